//! The `--net` flag: which networks a pod joins and the CNI arguments each one gets.
//!
//! Every `--net` value is a comma-separated list of items `name[:args]`. The item is split on
//! its *first* `:` only, so IPv6 values in the arguments work (`--net=n:IP=fd00::1`); rkt
//! splits on every `:` and rejects such values. The arguments are `K=V` pairs separated by
//! `;` and reach that network's plugins as `CNI_ARGS`.
//!
//! Rules (rkt's, with the one difference above): names are not empty and appear once, also
//! across repeated flags; `all`, `host` and `none` take no arguments; `host` and `none` must
//! be the only item. No flag at all, a bare `--net` (which the CLI passes as `default`) and
//! `--net=default` select the built-in `default` network.

use std::fmt;

/// The name that selects every configured network plus both built-in ones.
pub const ALL: &str = "all";
/// The name that keeps the pod in the caller's network namespace.
pub const HOST: &str = "host";
/// The name that gives the pod a namespace with only loopback.
pub const NONE: &str = "none";

/// Why a `--net` value was rejected. Each variant names the offending item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    /// `--net=`, `--net=a,,b` or `--net=:IP=…`.
    #[error("--net: empty network name in {flag:?}")]
    EmptyName { flag: String },
    /// The same network named twice, possibly in different `--net` flags.
    #[error("--net: network {name:?} is given more than once")]
    Duplicate { name: String },
    /// `all`, `host` or `none` with `:args`.
    #[error("--net: {name:?} does not take arguments (got {args:?})")]
    ArgsNotAllowed { name: String, args: String },
    /// `host` or `none` combined with other items.
    #[error("--net: {name:?} must be the only network, but {other:?} is also given")]
    MustBeAlone { name: String, other: String },
    /// `IP=` that is not an IP address (`ADDR` or `ADDR/PREFIX`).
    #[error("--net: network {net:?} has IP={value:?}, which is not an IP address")]
    BadIp { net: String, value: String },
    /// A CNI argument that is not `KEY=VALUE`.
    #[error("--net: network {net:?} has an invalid argument {pair:?}: expected KEY=VALUE pairs separated by ';'")]
    InvalidArgs { net: String, pair: String },
}

/// One network asked for by name, with its CNI arguments as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetRequest {
    /// The network's name (a configured network or a built-in one).
    pub name: String,
    /// The text after the first `:`, verbatim (empty when there was none).
    pub args: String,
}

impl NetRequest {
    /// The arguments split into `(KEY, VALUE)` pairs, as libcni passes them in `CNI_ARGS`.
    /// Validated at parse time, so this cannot fail on a request from [`NetSelection::parse`].
    pub fn arg_pairs(&self) -> Vec<(String, String)> {
        split_args(&self.name, &self.args).unwrap_or_default()
    }
}

/// What `--net` selected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetSelection {
    /// `--net=host`: no namespace of its own, no plugins, no files.
    Host,
    /// `--net=none`: a namespace with only loopback.
    None,
    /// Named networks, optionally every network (`all`); `requests` keeps the order given
    /// (setup order is decided by configuration file name, not by this order).
    Networks {
        all: bool,
        requests: Vec<NetRequest>,
    },
}

impl Default for NetSelection {
    /// The built-in `default` network, as with no `--net` flag.
    fn default() -> Self {
        NetSelection::Networks {
            all: false,
            requests: vec![NetRequest {
                name: super::builtin::DEFAULT.to_string(),
                args: String::new(),
            }],
        }
    }
}

impl NetSelection {
    /// Parses the values of every `--net` flag, in order. An empty slice (no flag) selects
    /// the built-in `default` network.
    pub fn parse(flags: &[String]) -> Result<NetSelection, SelectionError> {
        if flags.is_empty() {
            return Ok(NetSelection::default());
        }
        let mut requests: Vec<NetRequest> = Vec::new();
        for flag in flags {
            for item in flag.split(',') {
                let (name, args) = match item.split_once(':') {
                    Some((name, args)) => (name, args),
                    None => (item, ""),
                };
                if name.is_empty() {
                    return Err(SelectionError::EmptyName { flag: flag.clone() });
                }
                if requests.iter().any(|r| r.name == name) {
                    return Err(SelectionError::Duplicate {
                        name: name.to_string(),
                    });
                }
                if [ALL, HOST, NONE].contains(&name) && !args.is_empty() {
                    return Err(SelectionError::ArgsNotAllowed {
                        name: name.to_string(),
                        args: args.to_string(),
                    });
                }
                for (key, value) in split_args(name, args)? {
                    let addr = value.split_once('/').map_or(value.as_str(), |(a, _)| a);
                    if key == "IP" && addr.parse::<std::net::IpAddr>().is_err() {
                        return Err(SelectionError::BadIp {
                            net: name.to_string(),
                            value,
                        });
                    }
                }
                requests.push(NetRequest {
                    name: name.to_string(),
                    args: args.to_string(),
                });
            }
        }
        for alone in [HOST, NONE] {
            if requests.iter().any(|r| r.name == alone) {
                if let Some(other) = requests.iter().find(|r| r.name != alone) {
                    return Err(SelectionError::MustBeAlone {
                        name: alone.to_string(),
                        other: other.name.clone(),
                    });
                }
                return Ok(if alone == HOST {
                    NetSelection::Host
                } else {
                    NetSelection::None
                });
            }
        }
        let all = requests.iter().any(|r| r.name == ALL);
        requests.retain(|r| r.name != ALL);
        Ok(NetSelection::Networks { all, requests })
    }

    /// `--net=host`.
    pub fn is_host(&self) -> bool {
        matches!(self, NetSelection::Host)
    }

    /// `--net=none`.
    pub fn is_none(&self) -> bool {
        matches!(self, NetSelection::None)
    }

    /// `all` was given.
    pub fn is_all(&self) -> bool {
        matches!(self, NetSelection::Networks { all: true, .. })
    }

    /// The networks named explicitly (without `all`), in the order given.
    pub fn requests(&self) -> &[NetRequest] {
        match self {
            NetSelection::Networks { requests, .. } => requests,
            _ => &[],
        }
    }

    /// The CNI arguments given for `name` (empty when none were given).
    pub fn args_for(&self, name: &str) -> &str {
        self.requests()
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.args.as_str())
            .unwrap_or("")
    }
}

impl fmt::Display for NetSelection {
    /// The selection as one `--net` value that parses back to the same selection.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetSelection::Host => f.write_str(HOST),
            NetSelection::None => f.write_str(NONE),
            NetSelection::Networks { all, requests } => {
                let mut items: Vec<String> = Vec::new();
                if *all {
                    items.push(ALL.to_string());
                }
                for r in requests {
                    if r.args.is_empty() {
                        items.push(r.name.clone());
                    } else {
                        items.push(format!("{}:{}", r.name, r.args));
                    }
                }
                f.write_str(&items.join(","))
            }
        }
    }
}

/// Splits `K=V;K2=V2` into pairs; empty segments (a trailing `;`) are skipped.
fn split_args(net: &str, args: &str) -> Result<Vec<(String, String)>, SelectionError> {
    let mut pairs = Vec::new();
    for pair in args.split(';').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((k, v)) if !k.is_empty() => pairs.push((k.to_string(), v.to_string())),
            _ => {
                return Err(SelectionError::InvalidArgs {
                    net: net.to_string(),
                    pair: pair.to_string(),
                })
            }
        }
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(flags: &[&str]) -> Result<NetSelection, SelectionError> {
        NetSelection::parse(&flags.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    fn req(name: &str, args: &str) -> NetRequest {
        NetRequest {
            name: name.into(),
            args: args.into(),
        }
    }

    #[test]
    fn no_flag_and_bare_flag_select_default() {
        for sel in [parse(&[]).unwrap(), parse(&["default"]).unwrap()] {
            assert_eq!(
                sel,
                NetSelection::Networks {
                    all: false,
                    requests: vec![req("default", "")]
                }
            );
            assert!(!sel.is_host() && !sel.is_none() && !sel.is_all());
        }
    }

    #[test]
    fn host_and_none() {
        assert!(parse(&["host"]).unwrap().is_host());
        assert!(parse(&["none"]).unwrap().is_none());
        assert_eq!(parse(&["none"]).unwrap().requests(), &[]);
    }

    #[test]
    fn list_with_args_keeps_order_and_text() {
        let sel = parse(&["a,b:K=V;K2=V2,c"]).unwrap();
        assert_eq!(
            sel.requests(),
            &[req("a", ""), req("b", "K=V;K2=V2"), req("c", "")]
        );
        assert_eq!(
            sel.requests()[1].arg_pairs(),
            vec![("K".into(), "V".into()), ("K2".into(), "V2".into())]
        );
        assert_eq!(sel.args_for("b"), "K=V;K2=V2");
        assert_eq!(sel.args_for("a"), "");
    }

    #[test]
    fn repeated_flags_accumulate() {
        let sel = parse(&["a", "b:IP=10.1.2.3"]).unwrap();
        assert_eq!(sel.requests(), &[req("a", ""), req("b", "IP=10.1.2.3")]);
    }

    #[test]
    fn ipv6_args_split_on_first_colon_only() {
        let sel = parse(&["n:IP=fd00::1"]).unwrap();
        assert_eq!(sel.requests(), &[req("n", "IP=fd00::1")]);
        assert_eq!(
            sel.requests()[0].arg_pairs(),
            vec![("IP".into(), "fd00::1".into())]
        );
        let sel = parse(&["default:IP=172.16.28.9;X=a:b:c"]).unwrap();
        assert_eq!(
            sel.requests()[0].arg_pairs(),
            vec![
                ("IP".into(), "172.16.28.9".into()),
                ("X".into(), "a:b:c".into())
            ]
        );
    }

    #[test]
    fn value_may_contain_equals_and_be_empty() {
        let sel = parse(&["n:A=b=c;B="]).unwrap();
        assert_eq!(
            sel.requests()[0].arg_pairs(),
            vec![("A".into(), "b=c".into()), ("B".into(), "".into())]
        );
    }

    #[test]
    fn all_may_come_with_named_networks() {
        let sel = parse(&["all,default:IP=172.16.28.7"]).unwrap();
        assert!(sel.is_all());
        assert_eq!(sel.requests(), &[req("default", "IP=172.16.28.7")]);
        assert!(parse(&["all"]).unwrap().is_all());
    }

    #[test]
    fn empty_names_are_errors() {
        for flags in [&[""][..], &["a,,b"], &["a,"], &[":IP=1.2.3.4"], &["a", ""]] {
            assert!(
                matches!(parse(flags), Err(SelectionError::EmptyName { .. })),
                "{flags:?}"
            );
        }
    }

    #[test]
    fn duplicates_are_errors_also_across_flags() {
        assert_eq!(
            parse(&["a,a"]),
            Err(SelectionError::Duplicate { name: "a".into() })
        );
        assert_eq!(
            parse(&["a:IP=1.1.1.1", "b", "a"]),
            Err(SelectionError::Duplicate { name: "a".into() })
        );
        assert_eq!(
            parse(&["default", "default"]),
            Err(SelectionError::Duplicate {
                name: "default".into()
            })
        );
        assert!(matches!(
            parse(&["all", "all"]),
            Err(SelectionError::Duplicate { .. })
        ));
    }

    #[test]
    fn special_names_take_no_args() {
        for name in ["all", "host", "none"] {
            assert_eq!(
                parse(&[&format!("{name}:IP=1.2.3.4")]),
                Err(SelectionError::ArgsNotAllowed {
                    name: name.into(),
                    args: "IP=1.2.3.4".into()
                })
            );
        }
    }

    #[test]
    fn host_and_none_must_be_alone() {
        assert_eq!(
            parse(&["host,default"]),
            Err(SelectionError::MustBeAlone {
                name: "host".into(),
                other: "default".into()
            })
        );
        assert_eq!(
            parse(&["a", "none"]),
            Err(SelectionError::MustBeAlone {
                name: "none".into(),
                other: "a".into()
            })
        );
        assert!(matches!(
            parse(&["host", "none"]),
            Err(SelectionError::MustBeAlone { .. })
        ));
        assert!(matches!(
            parse(&["all,none"]),
            Err(SelectionError::MustBeAlone { .. })
        ));
    }

    #[test]
    fn malformed_args_name_the_network() {
        assert_eq!(
            parse(&["a", "n:IP"]),
            Err(SelectionError::InvalidArgs {
                net: "n".into(),
                pair: "IP".into()
            })
        );
        assert_eq!(
            parse(&["n:=v"]),
            Err(SelectionError::InvalidArgs {
                net: "n".into(),
                pair: "=v".into()
            })
        );
        let msg = parse(&["n:K=V;oops"]).unwrap_err().to_string();
        assert!(msg.contains("\"n\"") && msg.contains("\"oops\""), "{msg}");
    }

    #[test]
    fn display_round_trips() {
        for flags in [
            &["host"][..],
            &["none"],
            &["all"],
            &["a,b:K=V;K2=V2", "c:IP=fd00::1"],
            &["all,default:IP=172.16.28.3"],
        ] {
            let sel = parse(flags).unwrap();
            assert_eq!(parse(&[&sel.to_string()]).unwrap(), sel, "{flags:?}");
        }
    }
}
