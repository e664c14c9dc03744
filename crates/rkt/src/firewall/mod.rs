//! What rkt itself does to the host's firewall and ports around the plugins: removing the
//! NAT rules a plugin's DEL left behind for a pod ([`sweep`]), and port forwarding's
//! plumbing ([`ports`]: `--port`, the `portMappings` capability argument, the cross-pod
//! lock and conflict check).

pub mod ports;
pub mod sweep;
