//! The built-in networks `default` and `default-restricted`, and how they join the user's
//! configured networks.
//!
//! - `default`: ptp with `ipMasq`, host-local IPAM in `172.16.28.0/24`, a default route,
//!   then `portmap` (declaring `portMappings`, with `snat` so that `127.0.0.1:<port>`
//!   works too) so that `--port` works out of the box. Without `--port`, portmap passes the
//!   result through and sets nothing up.
//! - `default-restricted`: ptp without masquerading, host-local in `172.31.0.0/16`, no
//!   routes (the pod reaches only the host).
//!
//! Both are configuration lists (so more plugins, such as `portmap`, can be chained) with
//! `cniVersion` 1.0.0, the newest the plugins shipped with Debian 12 (1.1.1) speak; CHECK
//! needs at least 0.4.0. They are only used when named or through `all`, and a user
//! network with the same name replaces them. For ordering they count as rkt's files
//! `99-default.conf` and `99-default-restricted.conf`. host-local keeps its default data
//! directory (`/var/lib/cni/networks/<name>`), where other CNI tools look for reservations.

use std::path::Path;

use cni::conf::{ConfError, NetworkConfigList};

/// The name of the built-in default network.
pub const DEFAULT: &str = "default";
/// The name of the built-in restricted network.
pub const DEFAULT_RESTRICTED: &str = "default-restricted";

/// The subnet host-local allocates from on `default`.
pub const DEFAULT_SUBNET: &str = "172.16.28.0/24";
/// The subnet host-local allocates from on `default-restricted`.
pub const DEFAULT_RESTRICTED_SUBNET: &str = "172.31.0.0/16";

/// One built-in network: its rkt file name (used for ordering and for the pod's copy) and
/// its configuration text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Builtin {
    /// The network's name.
    pub name: &'static str,
    /// rkt's file name for it, which decides its place in the setup order.
    pub file_name: &'static str,
    /// The configuration list as JSON.
    pub conflist: &'static str,
}

const DEFAULT_CONFLIST: &str = r#"{
  "cniVersion": "1.0.0",
  "name": "default",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": true,
      "ipam": {
        "type": "host-local",
        "subnet": "172.16.28.0/24",
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    {
      "type": "portmap",
      "capabilities": { "portMappings": true },
      "snat": true
    }
  ]
}
"#;

const DEFAULT_RESTRICTED_CONFLIST: &str = r#"{
  "cniVersion": "1.0.0",
  "name": "default-restricted",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "subnet": "172.31.0.0/16"
      }
    }
  ]
}
"#;

/// Both built-in networks, in their file-name order.
pub const BUILTINS: [Builtin; 2] = [
    Builtin {
        name: DEFAULT_RESTRICTED,
        file_name: "99-default-restricted.conf",
        conflist: DEFAULT_RESTRICTED_CONFLIST,
    },
    Builtin {
        name: DEFAULT,
        file_name: "99-default.conf",
        conflist: DEFAULT_CONFLIST,
    },
];

impl Builtin {
    /// The built-in network called `name`, if there is one.
    pub fn named(name: &str) -> Option<Builtin> {
        BUILTINS.iter().copied().find(|b| b.name == name)
    }

    /// The parsed configuration; its `source` is the rkt file name (not a real file).
    pub fn config(&self) -> Result<NetworkConfigList, ConfError> {
        cni::conf::parse_list(self.conflist.as_bytes(), Some(Path::new(self.file_name)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_with_expected_plugins() {
        let d = Builtin::named(DEFAULT).unwrap().config().unwrap();
        assert_eq!(d.name, "default");
        assert_eq!(d.plugins.len(), 2);
        assert_eq!(d.plugins[1].plugin_type, "portmap");
        assert!(d.plugins[1].has_capability("portMappings"));
        assert_eq!(d.plugins[1].raw["snat"], true);
        assert_eq!(d.plugins[0].plugin_type, "ptp");
        assert_eq!(d.plugins[0].raw["ipMasq"], true);
        assert_eq!(d.plugins[0].raw["ipam"]["type"], "host-local");
        assert_eq!(d.plugins[0].raw["ipam"]["subnet"], DEFAULT_SUBNET);
        assert_eq!(d.plugins[0].raw["ipam"]["routes"][0]["dst"], "0.0.0.0/0");
        assert!(d.plugins[0].raw["ipam"].get("dataDir").is_none());

        let r = Builtin::named(DEFAULT_RESTRICTED)
            .unwrap()
            .config()
            .unwrap();
        assert_eq!(r.name, "default-restricted");
        assert_eq!(r.plugins[0].raw["ipMasq"], false);
        assert_eq!(
            r.plugins[0].raw["ipam"]["subnet"],
            DEFAULT_RESTRICTED_SUBNET
        );
        assert!(r.plugins[0].raw["ipam"].get("routes").is_none());
        assert_eq!(r.plugins.len(), 1);
        assert!(Builtin::named("bridge").is_none());
    }

    #[test]
    fn builtins_are_listed_in_file_name_order() {
        let names: Vec<_> = BUILTINS.iter().map(|b| b.file_name).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
    }
}
