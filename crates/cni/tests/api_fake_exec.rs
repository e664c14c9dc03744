//! The runtime API over a fake `Exec`: exact requests, the timeout handed down, result
//! versions and error mapping, without running any process.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cni::api::{CniConfig, RuntimeConf, DEFAULT_TIMEOUT};
use cni::error::Error;
use cni::invoke::{Exec, ExecError};
use serde_json::{json, Value};

/// One recorded call: plugin file name, parsed stdin, env, timeout.
type Recorded = (String, Value, Vec<(String, String)>, Duration);

type Responder = dyn Fn(&str, &str) -> Result<Vec<u8>, ExecError> + Send + Sync;

/// Records every call and answers with a closure of (plugin file name, CNI_COMMAND).
struct FakeExec {
    calls: Mutex<Vec<Recorded>>,
    respond: Box<Responder>,
}

impl FakeExec {
    fn new(
        respond: impl Fn(&str, &str) -> Result<Vec<u8>, ExecError> + Send + Sync + 'static,
    ) -> Arc<FakeExec> {
        Arc::new(FakeExec {
            calls: Mutex::new(Vec::new()),
            respond: Box::new(respond),
        })
    }

    fn calls(&self) -> Vec<Recorded> {
        self.calls.lock().unwrap().clone()
    }
}

impl Exec for FakeExec {
    fn exec_plugin(
        &self,
        plugin: &Path,
        stdin: &[u8],
        env: &[(String, String)],
        timeout: Duration,
    ) -> Result<Vec<u8>, ExecError> {
        let name = plugin.file_name().unwrap().to_string_lossy().into_owned();
        let command = env
            .iter()
            .find(|(k, _)| k == "CNI_COMMAND")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let stdin: Value = serde_json::from_slice(stdin).unwrap();
        self.calls
            .lock()
            .unwrap()
            .push((name.clone(), stdin, env.to_vec(), timeout));
        (self.respond)(&name, &command)
    }
}

/// A plugin dir with empty executables of the given names (the fake never runs them).
fn plugin_dir(names: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bin");
    std::fs::create_dir(&dir).unwrap();
    for n in names {
        std::fs::write(dir.join(n), "").unwrap();
        std::fs::set_permissions(dir.join(n), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (tmp, dir)
}

fn rt() -> RuntimeConf {
    RuntimeConf::new("ctr", Some("/run/netns/x".into()), "eth0")
}

#[test]
fn add_sends_exactly_the_injected_config_with_the_configured_timeout() {
    let (tmp, dir) = plugin_dir(&["bridge", "portmap"]);
    let fake = FakeExec::new(|plugin, _| {
        Ok(match plugin {
            "bridge" => br#"{"cniVersion":"1.0.0","ips":[{"address":"10.1.0.5/16"}]}"#.to_vec(),
            _ => br#"{"cniVersion":"1.0.0","ips":[{"address":"10.1.0.5/16"}],"dns":{"nameservers":["10.1.0.1"]}}"#.to_vec(),
        })
    });
    let cni = CniConfig::new(vec![dir], tmp.path().join("cache"));
    assert_eq!(cni.timeout, DEFAULT_TIMEOUT);
    let cni = cni
        .with_exec(fake.clone())
        .with_timeout(Duration::from_secs(5));
    let list = cni::conf::parse_list(
        br#"{"cniVersion":"1.0.0","name":"mynet","plugins":[
            {"type":"bridge","bridge":"br0","ipam":{"type":"host-local","subnet":"10.1.0.0/16"}},
            {"type":"portmap","capabilities":{"portMappings":true},"snat":true}]}"#,
        None,
    )
    .unwrap();
    let mut r = rt();
    r.capability_args.insert(
        "portMappings".into(),
        json!([{"hostPort": 80, "containerPort": 8080}]),
    );

    let res = cni.add_network_list(&list, &r).unwrap();
    assert_eq!(res.to_value()["dns"]["nameservers"][0], "10.1.0.1");

    let calls = fake.calls();
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|c| c.3 == Duration::from_secs(5)));
    assert_eq!(
        calls[0].1,
        json!({"type": "bridge", "bridge": "br0", "ipam": {"type": "host-local", "subnet": "10.1.0.0/16"},
               "name": "mynet", "cniVersion": "1.0.0"})
    );
    assert_eq!(
        calls[1].1,
        json!({"type": "portmap", "snat": true, "name": "mynet", "cniVersion": "1.0.0",
               "prevResult": {"cniVersion": "1.0.0", "ips": [{"address": "10.1.0.5/16"}]},
               "runtimeConfig": {"portMappings": [{"hostPort": 80, "containerPort": 8080}]}})
    );
}

#[test]
fn a_result_without_cni_version_takes_the_configs() {
    let (tmp, dir) = plugin_dir(&["p"]);
    let fake =
        FakeExec::new(|_, _| Ok(br#"{"ips":[{"version":"4","address":"10.2.0.2/24"}]}"#.to_vec()));
    let cni = CniConfig::new(vec![dir], tmp.path().join("cache")).with_exec(fake);
    let list = cni::conf::parse_list(
        br#"{"cniVersion":"0.4.0","name":"n","plugins":[{"type":"p"}]}"#,
        None,
    )
    .unwrap();
    let res = cni.add_network_list(&list, &rt()).unwrap();
    assert_eq!(res.version(), "0.4.0");
    assert_eq!(res.to_value()["ips"][0]["address"], "10.2.0.2/24");
}

#[test]
fn exec_failures_map_to_errors_naming_network_plugin_and_command() {
    let (tmp, dir) = plugin_dir(&["p"]);
    let fake = FakeExec::new(|plugin, command| {
        Err(match command {
            "ADD" => ExecError::Spawn {
                plugin: plugin.into(),
                source: std::io::Error::from_raw_os_error(libc::ENOEXEC),
            },
            "DEL" => ExecError::Plugin {
                plugin: plugin.into(),
                exit_status: 1,
                code: Some(3),
                msg: "container unknown".into(),
                details: String::new(),
            },
            _ => ExecError::Plugin {
                plugin: plugin.into(),
                exit_status: 1,
                code: Some(4),
                msg: "unknown CNI_COMMAND: VERSION".into(),
                details: String::new(),
            },
        })
    });
    let cni = CniConfig::new(vec![dir], tmp.path().join("cache")).with_exec(fake);
    let list = cni::conf::parse_list(
        br#"{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"p"}]}"#,
        None,
    )
    .unwrap();

    let err = cni.add_network_list(&list, &rt()).unwrap_err();
    assert!(
        matches!(&err, Error::Exec { network, plugin, command, .. } if network == "n" && plugin == "p" && *command == "ADD"),
        "{err}"
    );
    let err = cni.del_network_list(&list, &rt()).unwrap_err();
    assert_eq!(err.code(), Some(3));
    assert_eq!(
        err.to_string(),
        r#"network "n": plugin "p" failed (DEL): code 3: container unknown"#
    );
    // An ancient plugin that does not know VERSION supports 0.1.0 only.
    assert_eq!(
        cni.get_version_info("p").unwrap().supported_versions,
        ["0.1.0"]
    );
}

#[test]
fn unsupported_config_version_fails_before_running_anything() {
    let (tmp, dir) = plugin_dir(&["p"]);
    let fake = FakeExec::new(|_, _| Ok(b"{}".to_vec()));
    let cni = CniConfig::new(vec![dir], tmp.path().join("cache")).with_exec(fake.clone());
    let list = cni::conf::parse_list(
        br#"{"cniVersion":"9.0.0","name":"n","plugins":[{"type":"p"}]}"#,
        None,
    )
    .unwrap();
    for err in [
        cni.add_network_list(&list, &rt()).unwrap_err(),
        cni.del_network_list(&list, &rt()).unwrap_err(),
        cni.check_network_list(&list, &rt()).unwrap_err(),
        cni.gc_network_list(&list, &[]).unwrap_err(),
    ] {
        assert!(
            matches!(&err, Error::Version { network, .. } if network == "n"),
            "{err}"
        );
    }
    assert!(fake.calls().is_empty());
}
