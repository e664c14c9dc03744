//! The runtime against the reference plugins installed in `/usr/lib/cni` (containernetworking
//! plugins 1.1.1, which speak up to 1.0.0), in ways that need no root and touch nothing:
//! VERSION, validation, STATUS and their error objects. Skipped, with a note, when the
//! plugins are not installed.

use std::path::{Path, PathBuf};

use cni::api::{CniConfig, RuntimeConf};
use cni::error::Error;

const PLUGINS: &str = "/usr/lib/cni";

fn runtime() -> Option<(tempfile::TempDir, CniConfig)> {
    if !Path::new(PLUGINS).join("bridge").is_file() {
        eprintln!("skipping: reference CNI plugins are not installed in {PLUGINS}");
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cni = CniConfig::new(vec![PathBuf::from(PLUGINS)], tmp.path().join("cache"));
    Some((tmp, cni))
}

fn list(text: &str) -> cni::conf::NetworkConfigList {
    cni::conf::parse_list(text.as_bytes(), None).unwrap()
}

#[test]
fn version_info_and_validation_of_reference_plugins() {
    let Some((_tmp, cni)) = runtime() else { return };
    let info = cni.get_version_info("bridge").unwrap();
    assert!(info.supports("0.3.1") && info.supports("1.0.0"), "{info:?}");
    assert!(!info.supports("1.1.0"), "{info:?}");

    let ok = list(
        r#"{"cniVersion":"1.0.0","name":"n","plugins":[
            {"type":"bridge","ipam":{"type":"host-local","subnet":"10.250.0.0/24"}},
            {"type":"portmap","capabilities":{"portMappings":true}},
            {"type":"tuning","capabilities":{"mac":true}}]}"#,
    );
    assert_eq!(
        cni.validate_network_list(&ok).unwrap(),
        ["mac", "portMappings"]
    );

    let too_new =
        list(r#"{"cniVersion":"1.1.0","name":"n","plugins":[{"type":"bridge"},{"type":"ptp"}]}"#);
    let err = cni.validate_network_list(&too_new).unwrap_err();
    let Error::Multiple(errors) = &err else {
        panic!("{err}")
    };
    assert_eq!(errors.len(), 2);
    assert!(errors
        .iter()
        .all(|e| matches!(e, Error::UnsupportedByPlugin { version, .. } if version == "1.1.0")));

    // STATUS is a 1.1.0 command: below it nothing runs; at it these older plugins refuse
    // (their skel predates STATUS), and the refusal is surfaced.
    cni.get_status_network_list(&ok).unwrap();
    let err = cni.get_status_network_list(&too_new).unwrap_err();
    assert!(
        matches!(&err, Error::Plugin { plugin, command, .. } if plugin == "bridge" && *command == "STATUS"),
        "{err}"
    );
}

#[test]
fn reference_plugin_errors_are_decoded() {
    let Some((_tmp, cni)) = runtime() else { return };
    let lo = list(r#"{"cniVersion":"1.0.0","name":"lo","plugins":[{"type":"loopback"}]}"#);
    let rt = RuntimeConf::new("c1", Some("/nonexistent/netns".into()), "lo");
    let err = cni.add_network_list(&lo, &rt).unwrap_err();
    match &err {
        Error::Plugin {
            plugin,
            command,
            code,
            msg,
            ..
        } => {
            assert_eq!((plugin.as_str(), *command, *code), ("loopback", "ADD", 999));
            assert!(msg.contains("/nonexistent/netns"), "{msg}");
        }
        other => panic!("unexpected {other:?}"),
    }

    let too_new = list(r#"{"cniVersion":"1.1.0","name":"n","plugins":[{"type":"bridge"}]}"#);
    let rt = RuntimeConf::new("c1", Some("/nonexistent".into()), "eth0");
    let err = cni.add_network_list(&too_new, &rt).unwrap_err();
    assert!(
        matches!(&err, Error::Plugin { code: 1, msg, details, .. }
            if msg == "incompatible CNI versions" && details.contains("1.0.0")),
        "{err}"
    );
    assert_eq!(err.code(), Some(1));
}
