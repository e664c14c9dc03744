//! What rkt itself does to the host's firewall and ports around the plugins: removing the
//! NAT rules a plugin's DEL left behind for a pod ([`sweep`]), and port forwarding's
//! plumbing ([`ports`]: `--port`, the `portMappings` capability argument, the cross-pod
//! lock and conflict check; [`host_ports`]: refusing a host port a host process serves, and
//! holding it for the pod's life; [`port_names`]: the ports an app's image exposes, by name).
//!
//! May not touch: networking's record or plans, or a pod's life cycle. The conflict check
//! reads another pod's forwarded ports through a function its caller passes, and finds
//! pods only as [`crate::podstore`] names and locks them. Rules are removed only when
//! they carry the exact comment the plugins gave the attachment.

pub mod host_ports;
pub mod port_names;
pub mod ports;
pub mod sweep;
