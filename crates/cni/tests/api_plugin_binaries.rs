//! Plugins the runtime resolved itself (`CniConfig::with_plugin_binaries`): the library
//! runs exactly those binaries and searches nothing, so a runtime's check of a binary and
//! the execution cannot disagree.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cni::api::{CniConfig, RuntimeConf};
use cni::error::Error;
use cni::invoke::{Exec, ExecError, FindError};

/// Records the full path of every binary run and answers ADD/DEL/VERSION.
#[derive(Default)]
struct PathRecorder {
    ran: Mutex<Vec<PathBuf>>,
}

impl Exec for PathRecorder {
    fn exec_plugin(
        &self,
        plugin: &Path,
        _stdin: &[u8],
        env: &[(String, String)],
        _timeout: Duration,
    ) -> Result<Vec<u8>, ExecError> {
        self.ran.lock().unwrap().push(plugin.to_path_buf());
        let command = env.iter().find(|(k, _)| k == "CNI_COMMAND").unwrap();
        Ok(match command.1.as_str() {
            "ADD" => br#"{"cniVersion":"1.0.0","ips":[{"address":"10.9.0.2/24"}]}"#.to_vec(),
            "VERSION" => br#"{"cniVersion":"1.0.0","supportedVersions":["1.0.0"]}"#.to_vec(),
            _ => Vec::new(),
        })
    }
}

/// Two plugin directories, each with executables `bridge` and `portmap`.
fn two_dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let (first, second) = (tmp.path().join("first"), tmp.path().join("second"));
    for dir in [&first, &second] {
        std::fs::create_dir(dir).unwrap();
        for name in ["bridge", "portmap"] {
            std::fs::write(dir.join(name), "").unwrap();
            std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
    }
    (tmp, first, second)
}

fn list() -> cni::conf::NetworkConfigList {
    cni::conf::parse_list(
        br#"{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"},{"type":"portmap"}]}"#,
        None,
    )
    .unwrap()
}

fn rt() -> RuntimeConf {
    RuntimeConf::new("ctr", Some("/run/netns/x".into()), "eth0")
}

#[test]
fn the_given_binaries_run_although_the_path_has_others_first() {
    let (tmp, first, second) = two_dirs();
    let exec = Arc::new(PathRecorder::default());
    let binaries = BTreeMap::from([
        ("bridge".to_string(), second.join("bridge")),
        ("portmap".to_string(), second.join("portmap")),
    ]);
    let cni = CniConfig::new(
        vec![first.clone(), second.clone()],
        tmp.path().join("cache"),
    )
    .with_exec(exec.clone())
    .with_plugin_binaries(binaries);
    assert_eq!(cni.find_plugin("bridge").unwrap(), second.join("bridge"));
    cni.add_network_list(&list(), &rt()).unwrap();
    cni.del_network_list(&list(), &rt()).unwrap();
    cni.get_version_info("portmap").unwrap();
    let ran = exec.ran.lock().unwrap().clone();
    assert_eq!(ran.len(), 5, "{ran:?}");
    assert!(ran.iter().all(|p| p.starts_with(&second)), "{ran:?}");

    // Without them, the first directory's binaries run, as libcni's search finds them.
    let searched = Arc::new(PathRecorder::default());
    let cni = CniConfig::new(vec![first.clone(), second], tmp.path().join("cache2"))
        .with_exec(searched.clone());
    assert_eq!(cni.find_plugin("bridge").unwrap(), first.join("bridge"));
    cni.add_network_list(&list(), &rt()).unwrap();
    assert!(searched
        .ran
        .lock()
        .unwrap()
        .iter()
        .all(|p| p.starts_with(&first)));
}

#[test]
fn a_type_not_given_is_not_found_and_nothing_is_searched() {
    let (tmp, first, second) = two_dirs();
    let exec = Arc::new(PathRecorder::default());
    let binaries = BTreeMap::from([("bridge".to_string(), second.join("bridge"))]);
    let cni = CniConfig::new(
        vec![first.clone(), second.clone()],
        tmp.path().join("cache"),
    )
    .with_exec(exec.clone())
    .with_plugin_binaries(binaries);
    // portmap exists in both directories, but was not given.
    let e = cni.add_network_list(&list(), &rt()).unwrap_err();
    match &e {
        Error::PluginNotFound {
            network,
            source: FindError::NotFound { plugin, dirs },
        } => {
            assert_eq!(network, "n");
            assert_eq!(plugin, "portmap");
            assert_eq!(dirs, &[first, second.clone()]);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        cni::error::chain(&e).contains("\"portmap\" not found"),
        "{e}"
    );
    assert_eq!(*exec.ran.lock().unwrap(), [second.join("bridge")]);
    // Names are validated as for a search.
    assert!(matches!(
        cni.find_plugin("../bridge"),
        Err(FindError::InvalidName(_))
    ));
}
