//! `--port=NAME:[HOSTIP:]HOSTPORT`: forwarding a port an app's image exposes by its name.
//! An image's `ExposedPorts` (`80/tcp`, `53/udp`, `8080`) are named as rkt's docker2aci named
//! them, `PORT-PROTOCOL` (`80-tcp`, `53-udp`, `8080-tcp`). The names are resolved over a
//! list of apps, each with the ports its image exposes, so a pod of several apps passes
//! them all; a name no app exposes, or that two apps expose, is an error listing the names
//! there are.

use std::net::IpAddr;

pub use super::ports::is_named;
use super::ports::{PortError, PortMapping, Protocol};

/// One app of the pod and the ports its image exposes (`ExposedPorts` keys, `80/tcp`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppPorts {
    pub app: String,
    pub exposed: Vec<String>,
}

/// The docker2aci name, port and protocol of an `ExposedPorts` key: `80/tcp` is `80-tcp`,
/// `53/udp` is `53-udp`, a bare `8080` is TCP. `None` for a key that is not a port (and
/// for protocols other than tcp and udp, which cannot be forwarded).
pub fn exposed_port(key: &str) -> Option<(String, u16, Protocol)> {
    let (port, protocol) = match key.split_once('/') {
        Some((port, "tcp")) => (port, Protocol::Tcp),
        Some((port, "udp")) => (port, Protocol::Udp),
        Some(_) => return None,
        None => (key, Protocol::Tcp),
    };
    let number: u16 = port.parse().ok().filter(|p| *p > 0)?;
    Some((format!("{number}-{protocol}"), number, protocol))
}

/// Resolves the named `--port` values among `values` (the others are skipped: see
/// [`super::ports::parse_all`]) against the ports `apps` expose.
pub fn resolve(values: &[String], apps: &[AppPorts]) -> Result<Vec<PortMapping>, PortError> {
    let mut out = Vec::new();
    for value in values.iter().filter(|v| is_named(v)) {
        let bad = |reason: String| PortError::Malformed {
            value: value.clone(),
            reason,
        };
        let (name, host) = value.split_once(':').ok_or_else(|| {
            bad("a named port needs the host port: NAME:[HOSTIP:]HOSTPORT".into())
        })?;
        let (host_ip, host_port) = match host.rsplit_once(':') {
            Some((ip, port)) => {
                let ip = ip
                    .strip_prefix('[')
                    .and_then(|i| i.strip_suffix(']'))
                    .unwrap_or(ip);
                let ip: IpAddr = ip
                    .parse()
                    .map_err(|_| bad(format!("{ip:?} is not an IP address")))?;
                (Some(ip), port)
            }
            None => (None, host),
        };
        let host_port = match host_port.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => {
                return Err(bad(format!(
                    "host port {host_port:?} is not a port (1-65535)"
                )))
            }
        };
        let mut found = apps.iter().flat_map(|a| {
            a.exposed
                .iter()
                .filter_map(|k| exposed_port(k))
                .filter(|(n, _, _)| n == name)
                .map(move |(_, port, protocol)| (a.app.clone(), port, protocol))
        });
        let Some((app, port, protocol)) = found.next() else {
            return Err(PortError::UnknownName {
                value: value.clone(),
                name: name.to_string(),
                exposed: exposed_names(apps),
            });
        };
        if let Some((other, _, _)) = found.find(|(other, _, _)| *other != app) {
            return Err(bad(format!(
                "apps {app} and {other} both expose {name}; forward it by number, HOSTPORT:PODPORT"
            )));
        }
        out.push(PortMapping {
            host_port,
            container_port: port,
            protocol,
            host_ip,
        });
    }
    Ok(out)
}

/// `app: name, name` for each app that exposes ports, for messages.
fn exposed_names(apps: &[AppPorts]) -> Vec<String> {
    apps.iter()
        .filter_map(|a| {
            // By port, then protocol: the image's map has no order of its own.
            let mut ports: Vec<(u16, String)> = a
                .exposed
                .iter()
                .filter_map(|k| exposed_port(k))
                .map(|(n, port, _)| (port, n))
                .collect();
            ports.sort();
            ports.dedup();
            let names: Vec<String> = ports.into_iter().map(|(_, n)| n).collect();
            (!names.is_empty()).then(|| format!("app {} exposes {}", a.app, names.join(", ")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apps() -> Vec<AppPorts> {
        vec![
            AppPorts {
                app: "web".into(),
                exposed: vec![
                    "8443".into(),
                    "80/tcp".into(),
                    "x/sctp".into(),
                    "80/tcp".into(),
                ],
            },
            AppPorts {
                app: "dns".into(),
                exposed: vec!["53/udp".into()],
            },
        ]
    }

    #[test]
    fn names_follow_docker2aci() {
        assert_eq!(
            exposed_port("80/tcp"),
            Some(("80-tcp".into(), 80, Protocol::Tcp))
        );
        assert_eq!(
            exposed_port("53/udp"),
            Some(("53-udp".into(), 53, Protocol::Udp))
        );
        assert_eq!(
            exposed_port("8080"),
            Some(("8080-tcp".into(), 8080, Protocol::Tcp))
        );
        assert_eq!(exposed_port("9/sctp"), None);
        assert_eq!(exposed_port("0/tcp"), None);
    }

    #[test]
    fn named_and_numeric_forms_are_told_apart() {
        for named in ["80-tcp:8080", "443-tcp:x", "53-udp:127.0.0.1:5353"] {
            assert!(is_named(named), "{named}");
        }
        for numeric in [
            "8080:80",
            "127.0.0.1:8080:80/udp",
            "fe80::1:8080:80",
            "80:x",
            "host:8080:80",
            "x-tcp:80",
        ] {
            assert!(!is_named(numeric), "{numeric}");
        }
    }

    #[test]
    fn resolves_over_every_app_and_lists_the_names_when_unknown() {
        let values: Vec<String> = ["8080:80", "80-tcp:8081", "53-udp:127.0.0.1:5353"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let got = resolve(&values, &apps()).unwrap();
        assert_eq!(
            got.iter().map(|m| m.flag_value()).collect::<Vec<_>>(),
            ["8081:80", "127.0.0.1:5353:53/udp"]
        );
        let err = resolve(&["443-tcp:8443".into()], &apps()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("--port=443-tcp:8443"), "{msg}");
        assert!(
            msg.contains("app web exposes 80-tcp, 8443-tcp; app dns exposes 53-udp"),
            "{msg}"
        );
        let none = resolve(&["80-tcp:80".into()], &[]).unwrap_err().to_string();
        assert!(none.contains("exposes no ports"), "{none}");
        let twice = vec![
            apps()[0].clone(),
            AppPorts {
                app: "web2".into(),
                ..apps()[0].clone()
            },
        ];
        let msg = resolve(&["80-tcp:80".into()], &twice)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("web and web2 both expose 80-tcp"), "{msg}");
        let msg = resolve(&["80-tcp:nope".into()], &apps())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("\"nope\" is not a port"), "{msg}");
    }
}
