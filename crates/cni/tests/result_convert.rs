//! Plugin results: parsing per version family and conversion between every ordered pair
//! of supported versions, checked against libcni's conversion rules.

use cni::result::{CniResult, Dns, Interface, IpConfig, Result100, ResultError, Route};
use cni::version::SUPPORTED;
use serde_json::{json, Value};

/// A representative 1.x result: two interfaces, two IPv4 and one IPv6 address, routes of
/// both families with 1.1.0 extras, and DNS.
fn rich_1x(version: &str) -> Value {
    json!({
        "cniVersion": version,
        "interfaces": [
            {"name": "veth1234", "mac": "aa:bb:cc:00:00:01", "mtu": 1400},
            {"name": "eth0", "mac": "aa:bb:cc:00:00:02", "sandbox": "/var/run/netns/p1",
             "mtu": 1400, "socketPath": "/run/vhost.sock", "pciID": "0000:00:1f.0"}
        ],
        "ips": [
            {"address": "10.1.2.3/24", "gateway": "10.1.2.1", "interface": 1},
            {"address": "fd00::3/64", "gateway": "fd00::1", "interface": 1},
            {"address": "10.9.9.9/32", "interface": 1}
        ],
        "routes": [
            {"dst": "0.0.0.0/0", "gw": "10.1.2.1", "mtu": 1400, "priority": 10},
            {"dst": "::/0", "gw": "fd00::1"},
            {"dst": "192.168.0.0/16", "table": 100, "scope": 253}
        ],
        "dns": {"nameservers": ["10.1.2.1", "fd00::1"], "domain": "pod.local",
                "search": ["pod.local", "local"], "options": ["ndots:2"]}
    })
}

/// The same network as a 0.3.x/0.4.0 plugin reports it.
fn rich_04(version: &str) -> Value {
    json!({
        "cniVersion": version,
        "interfaces": [
            {"name": "veth1234", "mac": "aa:bb:cc:00:00:01"},
            {"name": "eth0", "mac": "aa:bb:cc:00:00:02", "sandbox": "/var/run/netns/p1"}
        ],
        "ips": [
            {"version": "4", "address": "10.1.2.3/24", "gateway": "10.1.2.1", "interface": 1},
            {"version": "6", "address": "fd00::3/64", "gateway": "fd00::1", "interface": 1},
            {"version": "4", "address": "10.9.9.9/32", "interface": 1}
        ],
        "routes": [
            {"dst": "0.0.0.0/0", "gw": "10.1.2.1"},
            {"dst": "::/0", "gw": "fd00::1"},
            {"dst": "192.168.0.0/16"}
        ],
        "dns": {"nameservers": ["10.1.2.1", "fd00::1"], "domain": "pod.local",
                "search": ["pod.local", "local"], "options": ["ndots:2"]}
    })
}

/// The same network as a 0.1.0/0.2.0 plugin reports it.
fn rich_020(version: &str) -> Value {
    json!({
        "cniVersion": version,
        "ip4": {"ip": "10.1.2.3/24", "gateway": "10.1.2.1",
                "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.2.1"}, {"dst": "192.168.0.0/16"}]},
        "ip6": {"ip": "fd00::3/64", "gateway": "fd00::1", "routes": [{"dst": "::/0", "gw": "fd00::1"}]},
        "dns": {"nameservers": ["10.1.2.1", "fd00::1"], "domain": "pod.local",
                "search": ["pod.local", "local"], "options": ["ndots:2"]}
    })
}

fn source_for(version: &str) -> Value {
    match version {
        "0.1.0" | "0.2.0" => rich_020(version),
        "0.3.0" | "0.3.1" | "0.4.0" => rich_04(version),
        _ => rich_1x(version),
    }
}

fn is_legacy(v: &str) -> bool {
    v == "0.1.0" || v == "0.2.0"
}

fn is_04(v: &str) -> bool {
    matches!(v, "0.3.0" | "0.3.1" | "0.4.0")
}

fn route(dst: &str, gw: Option<&str>) -> Route {
    Route {
        dst: dst.into(),
        gw: gw.map(Into::into),
        ..Default::default()
    }
}

fn ip(address: &str, gateway: Option<&str>, interface: Option<usize>) -> IpConfig {
    IpConfig {
        address: address.into(),
        gateway: gateway.map(Into::into),
        interface,
    }
}

fn expected_dns() -> Dns {
    Dns {
        nameservers: vec!["10.1.2.1".into(), "fd00::1".into()],
        domain: Some("pod.local".into()),
        search: vec!["pod.local".into(), "local".into()],
        options: vec!["ndots:2".into()],
    }
}

/// What the 1.x view of a result converted from `from` to `to` must contain.
fn expected_view(from: &str, to: &str) -> Result100 {
    let legacy_in_path = is_legacy(from) || is_legacy(to);
    let interfaces = if legacy_in_path {
        vec![]
    } else {
        let rich = !is_04(from) && !is_04(to);
        vec![
            Interface {
                name: "veth1234".into(),
                mac: "aa:bb:cc:00:00:01".into(),
                mtu: rich.then_some(1400),
                ..Default::default()
            },
            Interface {
                name: "eth0".into(),
                mac: "aa:bb:cc:00:00:02".into(),
                sandbox: "/var/run/netns/p1".into(),
                mtu: rich.then_some(1400),
                socket_path: rich.then(|| "/run/vhost.sock".into()),
                pci_id: rich.then(|| "0000:00:1f.0".into()),
                ..Default::default()
            },
        ]
    };
    let (ips, routes) = if legacy_in_path {
        // First address per family, no interface index; routes grouped v4 then v6,
        // only dst and gw.
        (
            vec![
                ip("10.1.2.3/24", Some("10.1.2.1"), None),
                ip("fd00::3/64", Some("fd00::1"), None),
            ],
            vec![
                route("0.0.0.0/0", Some("10.1.2.1")),
                route("192.168.0.0/16", None),
                route("::/0", Some("fd00::1")),
            ],
        )
    } else {
        let mut routes = vec![
            route("0.0.0.0/0", Some("10.1.2.1")),
            route("::/0", Some("fd00::1")),
            route("192.168.0.0/16", None),
        ];
        if !is_04(from) {
            // Route extras live in the shared route type, so they survive 0.4.0 (libcni).
            routes[0].mtu = Some(1400);
            routes[0].priority = Some(10);
            routes[2].table = Some(100);
            routes[2].scope = Some(253);
        }
        (
            vec![
                ip("10.1.2.3/24", Some("10.1.2.1"), Some(1)),
                ip("fd00::3/64", Some("fd00::1"), Some(1)),
                ip("10.9.9.9/32", None, Some(1)),
            ],
            routes,
        )
    };
    let one_x = to == "1.0.0" || to == "1.1.0";
    Result100 {
        cni_version: if one_x { to.into() } else { "1.1.0".into() },
        interfaces,
        ips,
        routes,
        dns: expected_dns(),
    }
}

/// Checks the JSON shape of a converted result against its version family.
fn check_shape(to: &str, v: &Value) {
    assert_eq!(v["cniVersion"], to);
    if is_legacy(to) {
        assert!(
            v.get("ips").is_none() && v.get("interfaces").is_none() && v.get("routes").is_none(),
            "{v}"
        );
        assert_eq!(v["ip4"]["ip"], "10.1.2.3/24");
        assert_eq!(v["ip4"]["gateway"], "10.1.2.1");
        assert_eq!(v["ip6"]["ip"], "fd00::3/64");
        assert_eq!(v["ip4"]["routes"].as_array().unwrap().len(), 2);
        assert_eq!(v["ip6"]["routes"][0]["dst"], "::/0");
        assert!(
            v["ip4"]["routes"][0].get("mtu").is_none(),
            "0.2.0 routes have dst and gw only: {v}"
        );
    } else {
        assert!(v.get("ip4").is_none() && v.get("ip6").is_none(), "{v}");
        let ips = v["ips"].as_array().unwrap();
        for ipc in ips {
            let addr = ipc["address"].as_str().unwrap();
            if is_04(to) {
                let want = if addr.contains(':') { "6" } else { "4" };
                assert_eq!(ipc["version"], want, "{v}");
            } else {
                assert!(ipc.get("version").is_none(), "1.x ips have no version: {v}");
            }
        }
        if is_04(to) {
            for intf in v["interfaces"].as_array().into_iter().flatten() {
                assert!(
                    intf.get("mtu").is_none() && intf.get("socketPath").is_none(),
                    "{v}"
                );
            }
        }
    }
    assert_eq!(v["dns"]["domain"], "pod.local");
}

#[test]
fn every_ordered_pair_of_versions_converts_like_libcni() {
    let mut pairs = 0;
    for from in SUPPORTED {
        let src = CniResult::from_value(source_for(from), "0.4.0").unwrap();
        assert_eq!(src.version(), *from);
        for to in SUPPORTED {
            let got = src
                .convert_to(to)
                .unwrap_or_else(|e| panic!("{from} -> {to}: {e}"));
            assert_eq!(got.version(), *to, "{from} -> {to}");
            let v = got.to_value();
            check_shape(to, &v);
            assert_eq!(
                got.current(),
                expected_view(from, to),
                "{from} -> {to}: {v}"
            );
            // The JSON re-parses as its own version and yields the same result.
            let reparsed = CniResult::from_slice(&got.to_bytes(), "").unwrap();
            assert_eq!(reparsed, got, "{from} -> {to}");
            pairs += 1;
        }
    }
    assert_eq!(pairs, SUPPORTED.len() * SUPPORTED.len());
}

#[test]
fn round_trips_without_loss_are_exact() {
    // Up and back down again loses nothing.
    for (from, via) in [
        ("0.2.0", "1.1.0"),
        ("0.1.0", "0.4.0"),
        ("0.3.1", "1.0.0"),
        ("1.0.0", "1.1.0"),
    ] {
        let src = CniResult::from_value(source_for(from), "").unwrap();
        let back = src.convert_to(via).unwrap().convert_to(from).unwrap();
        assert_eq!(back.to_value(), src.to_value(), "{from} via {via}");
    }
    // Through 0.2.0 the second IPv4 address and the interfaces are lost, as in libcni.
    let src = CniResult::from_value(rich_1x("1.1.0"), "").unwrap();
    let back = src
        .convert_to("0.2.0")
        .unwrap()
        .convert_to("1.1.0")
        .unwrap()
        .current();
    assert_eq!(back.ips.len(), 2);
    assert!(back.interfaces.is_empty());
    assert!(!back.ips.iter().any(|i| i.address == "10.9.9.9/32"));
}

#[test]
fn down_to_020_literal() {
    let src = CniResult::from_value(rich_1x("1.1.0"), "").unwrap();
    let v = src.convert_to("0.2.0").unwrap().to_value();
    assert_eq!(
        v,
        json!({
            "cniVersion": "0.2.0",
            "ip4": {"ip": "10.1.2.3/24", "gateway": "10.1.2.1",
                    "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.2.1"}, {"dst": "192.168.0.0/16"}]},
            "ip6": {"ip": "fd00::3/64", "gateway": "fd00::1", "routes": [{"dst": "::/0", "gw": "fd00::1"}]},
            "dns": {"nameservers": ["10.1.2.1", "fd00::1"], "domain": "pod.local",
                    "search": ["pod.local", "local"], "options": ["ndots:2"]}
        })
    );
}

#[test]
fn down_to_020_drops_routes_of_a_family_without_address() {
    let src = CniResult::from_value(
        json!({"cniVersion": "1.0.0", "ips": [{"address": "10.0.0.2/8"}],
               "routes": [{"dst": "::/0"}, {"dst": "0.0.0.0/0"}]}),
        "",
    )
    .unwrap();
    let v = src.convert_to("0.1.0").unwrap().to_value();
    assert_eq!(
        v,
        json!({"cniVersion": "0.1.0", "ip4": {"ip": "10.0.0.2/8", "routes": [{"dst": "0.0.0.0/0"}]}})
    );
}

#[test]
fn down_to_020_without_addresses_fails() {
    let src = CniResult::from_value(
        json!({"cniVersion": "1.1.0", "interfaces": [{"name": "eth0"}]}),
        "",
    )
    .unwrap();
    let err = src.convert_to("0.2.0").unwrap_err();
    assert!(matches!(err, ResultError::Convert { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("1.1.0") && msg.contains("0.2.0") && msg.contains("IP address"),
        "{msg}"
    );
    // Upward conversion of the same result is fine.
    assert_eq!(
        src.convert_to("0.4.0").unwrap().to_value()["interfaces"][0]["name"],
        "eth0"
    );
}

#[test]
fn up_from_020_literal() {
    let src = CniResult::from_value(rich_020("0.2.0"), "").unwrap();
    assert_eq!(
        src.convert_to("0.4.0").unwrap().to_value(),
        json!({
            "cniVersion": "0.4.0",
            "ips": [
                {"version": "4", "address": "10.1.2.3/24", "gateway": "10.1.2.1"},
                {"version": "6", "address": "fd00::3/64", "gateway": "fd00::1"}
            ],
            "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.2.1"}, {"dst": "192.168.0.0/16"},
                       {"dst": "::/0", "gw": "fd00::1"}],
            "dns": {"nameservers": ["10.1.2.1", "fd00::1"], "domain": "pod.local",
                    "search": ["pod.local", "local"], "options": ["ndots:2"]}
        })
    );
}

#[test]
fn convert_to_unsupported_version_fails() {
    let src = CniResult::from_value(rich_1x("1.0.0"), "").unwrap();
    for bad in ["2.0.0", "1.0", ""] {
        assert!(
            matches!(
                src.convert_to(bad),
                Err(ResultError::UnsupportedVersion { .. })
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn own_cni_version_wins_over_config() {
    let r = CniResult::from_slice(
        br#"{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.0.0.2/24"}]}"#,
        "1.0.0",
    )
    .unwrap();
    assert_eq!(r.version(), "0.3.1");
}

#[test]
fn missing_cni_version_takes_the_config_version() {
    let r = CniResult::from_slice(br#"{"ips":[{"address":"10.0.0.2/24"}]}"#, "1.0.0").unwrap();
    assert_eq!(r.version(), "1.0.0");
    assert_eq!(r.to_value()["cniVersion"], "1.0.0");
    let r = CniResult::from_slice(br#"{"cniVersion":"","ip4":{"ip":"10.0.0.2/24"}}"#, "").unwrap();
    assert_eq!(r.version(), "0.1.0");
    // A 0.4.0 config makes the same bytes a 0.4.0 result, which needs ips[].version.
    let err =
        CniResult::from_slice(br#"{"ips":[{"address":"10.0.0.2/24"}]}"#, "0.4.0").unwrap_err();
    assert!(err.to_string().contains("version"), "{err}");
}

#[test]
fn null_is_an_empty_result() {
    let r = CniResult::from_slice(b"null", "1.0.0").unwrap();
    assert_eq!(r.to_value(), json!({"cniVersion": "1.0.0"}));
}

#[test]
fn unknown_keys_are_ignored_on_input() {
    let r = CniResult::from_slice(
        br#"{"cniVersion":"1.1.0","foo":{"bar":1},"ips":[{"address":"10.0.0.2/24","version":"4","x":true}],
            "interfaces":[{"name":"eth0","metadata":{"k":"v"}}]}"#,
        "",
    )
    .unwrap();
    let cur = r.current();
    assert_eq!(cur.ips, vec![ip("10.0.0.2/24", None, None)]);
    assert_eq!(cur.interfaces[0].metadata["k"], "v");
    assert!(r.to_value().get("foo").is_none());
}

#[test]
fn shape_errors_name_the_field() {
    let cases: &[(&str, &str)] = &[
        (
            r#"{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.2"}]}"#,
            "ips[0].address",
        ),
        (
            r#"{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.2/33"}]}"#,
            "ips[0].address",
        ),
        (
            r#"{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.2/24","gateway":"nope"}]}"#,
            "ips[0].gateway",
        ),
        (
            r#"{"cniVersion":"1.1.0","routes":[{"dst":"default"}]}"#,
            "routes[0].dst",
        ),
        (
            r#"{"cniVersion":"0.4.0","ips":[{"version":"6","address":"10.0.0.2/24"}]}"#,
            "ips[0].version",
        ),
        (
            r#"{"cniVersion":"0.3.0","ips":[{"address":"10.0.0.2/24"}]}"#,
            "version",
        ),
        (
            r#"{"cniVersion":"0.2.0","ip4":{"ip":"fd00::1/64"}}"#,
            "ip4.ip",
        ),
        (
            r#"{"cniVersion":"0.2.0","ip6":{"ip":"fd00::1/64","routes":[{"dst":"::/0","gw":"x"}]}}"#,
            "ip6.routes[0].gw",
        ),
        (r#"{"cniVersion":"1.0.0","ips":"10.0.0.2/24"}"#, "ips"),
    ];
    for (input, field) in cases {
        let err = CniResult::from_slice(input.as_bytes(), "").unwrap_err();
        assert!(matches!(err, ResultError::Shape { .. }), "{input}: {err:?}");
        assert!(err.to_string().contains(field), "{input}: {err}");
    }
}

#[test]
fn bad_documents_are_errors() {
    assert!(matches!(
        CniResult::from_slice(b"{", "1.0.0"),
        Err(ResultError::Json(_))
    ));
    assert!(matches!(
        CniResult::from_slice(b"[]", "1.0.0"),
        Err(ResultError::NotAnObject("an array"))
    ));
    assert!(matches!(
        CniResult::from_slice(br#"{"cniVersion":1}"#, ""),
        Err(ResultError::VersionNotString)
    ));
    let err = CniResult::from_slice(br#"{"cniVersion":"9.9.9"}"#, "").unwrap_err();
    assert!(err.to_string().contains("\"9.9.9\""), "{err}");
    let deep = "[".repeat(100_000);
    assert!(CniResult::from_slice(deep.as_bytes(), "1.0.0").is_err());
}

#[test]
fn ip_config_helpers() {
    let v4 = ip("10.1.2.3/24", None, None);
    assert_eq!(v4.ip(), Some("10.1.2.3".parse().unwrap()));
    assert_eq!(v4.prefix_len(), Some(24));
    assert!(v4.is_v4());
    let v6 = ip("fd00::3/64", None, None);
    assert_eq!(v6.prefix_len(), Some(64));
    assert!(!v6.is_v4());
    let bad = ip("10.1.2.3", None, None);
    assert_eq!(
        (bad.ip(), bad.prefix_len(), bad.is_v4()),
        (None, None, false)
    );
    assert_eq!(ip("fd00::1/129", None, None).prefix_len(), None);
}

#[test]
fn current_view_and_from_result100() {
    let r = CniResult::from_value(rich_020("0.1.0"), "").unwrap();
    let cur = r.current();
    assert_eq!(cur.cni_version, "1.1.0");
    assert_eq!(r.first_ipv4().unwrap().address, "10.1.2.3/24");
    let wrapped = CniResult::from(Result100 {
        ips: vec![ip("10.0.0.5/16", None, None)],
        ..Default::default()
    });
    assert_eq!(wrapped.version(), "1.1.0");
    assert_eq!(
        wrapped.to_value(),
        json!({"cniVersion": "1.1.0", "ips": [{"address": "10.0.0.5/16"}]})
    );
    let r10 = CniResult::from(Result100 {
        cni_version: "1.0.0".into(),
        ..Default::default()
    });
    assert_eq!(r10.version(), "1.0.0");
}
