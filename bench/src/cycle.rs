//! One pod cycle, three ways, each returning its wall time:
//!
//! * [`rkt`]: `rkt run --net=NET -- true`;
//! * [`libcni`]: what a runtime scripted around the reference Go libcni does: `ip netns add`,
//!   libcni ADD, `ip netns exec … true`, libcni DEL, `ip netns del`;
//! * [`floor`]: the plugin itself, executed directly for ADD and DEL (DEL given the ADD
//!   result as `prevResult`, as the spec asks for 1.0.0) around `ip netns add` and
//!   `ip netns del`: what no runtime can go below.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::error::BenchError;
use crate::proc::run;
use crate::workspace::Workspace;

/// `rkt run --net=NET -- APP…`; returns the wall time and the app's stdout.
pub fn rkt_with_app(
    ws: &Workspace,
    net: &str,
    extra: &[String],
    app: &[&str],
    env: &[(&str, &OsStr)],
) -> Result<(Duration, Vec<u8>), BenchError> {
    let args = rkt_run_args(ws, net, extra, app);
    let start = Instant::now();
    let out = run(&ws.tools.rkt, &args, env, None)?;
    Ok((start.elapsed(), out.stdout))
}

/// The arguments of `rkt run --net=NET [extra] -- APP…` in the workspace.
pub fn rkt_run_args(ws: &Workspace, net: &str, extra: &[String], app: &[&str]) -> Vec<String> {
    let mut args = ws.rkt_globals();
    args.push("run".into());
    args.push(format!("--net={net}"));
    args.extend(ws.rkt_plugin_args());
    args.extend(extra.iter().cloned());
    args.push("--".into());
    args.extend(app.iter().map(|s| s.to_string()));
    args
}

/// `rkt run --net=NET -- true`, with `env` added to its environment.
pub fn rkt(ws: &Workspace, net: &str, env: &[(&str, &OsStr)]) -> Result<Duration, BenchError> {
    rkt_with_app(ws, net, &[], &["true"], env).map(|(d, _)| d)
}

/// [`rkt`] with another data directory (`--dir`).
pub fn rkt_in(
    ws: &Workspace,
    data: &Path,
    net: &str,
    env: &[(&str, &OsStr)],
) -> Result<Duration, BenchError> {
    rkt_binary(ws, &ws.tools.rkt, data, net, env)
}

/// [`rkt`] with another `rkt` binary and data directory.
pub fn rkt_binary(
    ws: &Workspace,
    binary: &Path,
    data: &Path,
    net: &str,
    env: &[(&str, &OsStr)],
) -> Result<Duration, BenchError> {
    let mut args = rkt_run_args(ws, net, &[], &["true"]);
    args[1] = data.display().to_string();
    let start = Instant::now();
    run(binary, &args, env, None)?;
    Ok(start.elapsed())
}

/// Starting one program and waiting for it.
pub fn spawn_only(program: &Path, args: &[&str]) -> Result<Duration, BenchError> {
    let start = Instant::now();
    run(program, args, &[], None)?;
    Ok(start.elapsed())
}

/// Creating and deleting a namespace with `ip`, the part of the floor that is not the plugin.
pub fn netns_only(ws: &Workspace) -> Result<Duration, BenchError> {
    let ns = ws.netns_name();
    let ip = &ws.tools.ip;
    let start = Instant::now();
    run(ip, &["netns", "add", &ns], &[], None)?;
    run(ip, &["netns", "del", &ns], &[], None)?;
    Ok(start.elapsed())
}

/// The scripted libcni cycle on `conf` (a file in the workspace).
pub fn libcni(ws: &Workspace, conf: &Path, cni_path: &str) -> Result<Duration, BenchError> {
    let ns = ws.netns_name();
    let ns_path = PathBuf::from("/run/netns").join(&ns);
    let id = format!("bench-{ns}");
    let driver = |cmd: &str| -> Result<(), BenchError> {
        let args: Vec<&OsStr> = vec![
            OsStr::new("-conf"),
            conf.as_os_str(),
            OsStr::new("-id"),
            OsStr::new(&id),
            OsStr::new("-netns"),
            ns_path.as_os_str(),
            OsStr::new("-ifname"),
            OsStr::new("eth0"),
            OsStr::new("-cache"),
            ws.libcni_cache.as_os_str(),
            OsStr::new(cmd),
        ];
        run(
            &ws.tools.libcni,
            &args,
            &[("CNI_PATH", OsStr::new(cni_path))],
            None,
        )
        .map(|_| ())
    };
    let ip = &ws.tools.ip;

    let start = Instant::now();
    run(ip, &["netns", "add", &ns], &[], None)?;
    let cycle = driver("add")
        .and_then(|()| run(ip, &["netns", "exec", &ns, "true"], &[], None).map(|_| ()))
        .and_then(|()| driver("del"));
    if cycle.is_err() {
        // Every ADD gets its DEL, even a failed one; the namespace goes either way.
        let _ = driver("del");
    }
    let deleted = run(ip, &["netns", "del", &ns], &[], None);
    let elapsed = start.elapsed();
    cycle?;
    deleted?;
    Ok(elapsed)
}

/// What the floor cycle sends the plugin: its object from the network's file with `name`
/// and `cniVersion` set, as any runtime sends it.
#[derive(Debug, Clone)]
pub struct FloorPlugin {
    pub binary: PathBuf,
    pub config: Map<String, Value>,
    pub cni_path: String,
}

impl FloorPlugin {
    /// The first (only) plugin of the network in `conf_file`, found in `dir`.
    pub fn from_conflist(
        conf_file: &Path,
        dir: &Path,
        cni_path: &str,
    ) -> Result<FloorPlugin, BenchError> {
        let bytes = std::fs::read(conf_file).map_err(|e| BenchError::io(conf_file, e))?;
        let list: Value = serde_json::from_slice(&bytes)
            .map_err(|e| BenchError::scenario("floor", format!("{}: {e}", conf_file.display())))?;
        let mut config = list["plugins"][0].as_object().cloned().unwrap_or_default();
        config.insert("name".into(), list["name"].clone());
        config.insert("cniVersion".into(), list["cniVersion"].clone());
        let plugin_type = config
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Ok(FloorPlugin {
            binary: dir.join(plugin_type),
            config,
            cni_path: cni_path.to_owned(),
        })
    }
}

/// The floor cycle: the plugin's ADD and DEL, executed directly, inside a fresh namespace.
pub fn floor(ws: &Workspace, plugin: &FloorPlugin) -> Result<Duration, BenchError> {
    let ns = ws.netns_name();
    let ns_path = format!("/run/netns/{ns}");
    let id = format!("bench-{ns}");
    let add_stdin = serde_json::to_vec(&plugin.config).expect("JSON serializes");
    let call = |command: &str, stdin: &[u8]| {
        run(
            &plugin.binary,
            &[] as &[&str],
            &[
                ("CNI_COMMAND", OsStr::new(command)),
                ("CNI_CONTAINERID", OsStr::new(&id)),
                ("CNI_NETNS", OsStr::new(&ns_path)),
                ("CNI_IFNAME", OsStr::new("eth0")),
                ("CNI_PATH", OsStr::new(&plugin.cni_path)),
            ],
            Some(stdin),
        )
    };
    let ip = &ws.tools.ip;

    let start = Instant::now();
    run(ip, &["netns", "add", &ns], &[], None)?;
    let added = call("ADD", &add_stdin);
    let mut del_config = plugin.config.clone();
    if let Ok(out) = &added {
        if let Ok(result) = serde_json::from_slice::<Value>(&out.stdout) {
            del_config.insert("prevResult".into(), result);
        }
    }
    let del_stdin = serde_json::to_vec(&del_config).expect("JSON serializes");
    let deleted = call("DEL", &del_stdin);
    let ns_deleted = run(ip, &["netns", "del", &ns], &[], None);
    let elapsed = start.elapsed();
    added?;
    deleted?;
    ns_deleted?;
    Ok(elapsed)
}
