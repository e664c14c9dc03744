//! `cnitool` written with this crate: adds, checks, deletes, garbage-collects or asks the
//! status of a network for an existing network namespace, as the reference `cnitool` does.
//!
//! ```text
//! cnitool add|check|del|gc|status NET NETNS
//! ```
//!
//! * `NETCONFPATH`: where the network configurations are (default `/etc/cni/net.d`);
//!   `.conflist` files are searched first, then `.conf` and `.json` files.
//! * `CNI_PATH`: the plugin directories, `:`-separated.
//! * `CNI_IFNAME`: the interface in the namespace (default `eth0`).
//! * `CNI_ARGS`: `K=V;K=V` pairs passed to the plugins.
//! * `CAP_ARGS`: a JSON object of capability arguments (`portMappings`, `mac`, ...).
//! * `CNI_CACHE_DIR` (not in the reference tool): the cache directory, default
//!   `/var/lib/cni`.
//!
//! The container ID is derived from the namespace's absolute path, as the reference tool
//! derives it, so an `add` and a later `del` of the same namespace find each other. `add`
//! prints the result; every failure is printed on stderr with exit status 1.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cni::api::{CniConfig, RuntimeConf};
use cni::conf::{self, NetworkConfigList};
use serde_json::{Map, Value};
use sha2::{Digest, Sha512};

const USAGE: &str = "usage: cnitool add|check|del|gc|status NET NETNS";

/// The network called `name` in `dir`: the first `.conflist` defining it, else the first
/// `.conf` or `.json` file (the order of libcni's `LoadConfList`). Files that fail to load
/// do not stop the search; when the network is not found, the error lists them.
fn load_network(dir: &Path, name: &str) -> Result<NetworkConfigList, String> {
    let mut failed = Vec::new();
    for exts in [&["conflist"][..], &["conf", "json"][..]] {
        let files = conf::conf_files(dir, exts).map_err(|e| e.to_string())?;
        for file in files {
            match conf::load_file(&file) {
                Ok(list) if list.name == name => return Ok(list),
                Ok(_) => {}
                Err(e) => failed.push(e.to_string()),
            }
        }
    }
    let mut msg = format!(
        "no network configuration named {name:?} in {} (from NETCONFPATH)",
        dir.display()
    );
    for e in failed {
        msg.push_str(&format!("\n  not loaded: {e}"));
    }
    Err(msg)
}

/// `CNI_ARGS` as pairs; each pair must be `K=V` with both sides non-empty.
fn parse_cni_args(args: &str) -> Result<Vec<(String, String)>, String> {
    args.split(';')
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.is_empty() && !v.is_empty() && !v.contains('=') => {
                Ok((k.to_string(), v.to_string()))
            }
            _ => Err(format!(
                "invalid CNI_ARGS pair {pair:?}: expected KEY=VALUE"
            )),
        })
        .collect()
}

/// `cnitool-` and the first 10 bytes of the SHA-512 of the namespace path, in hex.
fn container_id(netns: &Path) -> String {
    let digest = Sha512::digest(netns.as_os_str().as_encoded_bytes());
    let hex: String = digest[..10].iter().map(|b| format!("{b:02x}")).collect();
    format!("cnitool-{hex}")
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn run(args: &[String]) -> Result<(), String> {
    let [command, net, netns] = args else {
        return Err(USAGE.to_string());
    };
    if !matches!(command.as_str(), "add" | "check" | "del" | "gc" | "status") {
        return Err(format!("unknown command {command:?}\n{USAGE}"));
    }
    let dir = PathBuf::from(env("NETCONFPATH").unwrap_or_else(|| "/etc/cni/net.d".into()));
    let list = load_network(&dir, net)?;

    let capability_args: Map<String, Value> = match env("CAP_ARGS") {
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| format!("CAP_ARGS is not a JSON object: {e}"))?,
        None => Map::new(),
    };
    let cni_args = match env("CNI_ARGS") {
        Some(text) => parse_cni_args(&text)?,
        None => Vec::new(),
    };
    let ifname = std::env::var("CNI_IFNAME").unwrap_or_else(|_| "eth0".into());
    let netns = std::path::absolute(netns).map_err(|e| format!("netns {netns:?}: {e}"))?;

    let path: Vec<PathBuf> =
        std::env::split_paths(&std::env::var_os("CNI_PATH").unwrap_or_default())
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
    let cache_dir = PathBuf::from(env("CNI_CACHE_DIR").unwrap_or_else(|| "/var/lib/cni".into()));
    let cni = CniConfig::new(path, cache_dir);
    let rt = RuntimeConf {
        container_id: container_id(&netns),
        netns: Some(netns),
        ifname,
        args: cni_args,
        capability_args,
        cache_dir: None,
    };

    let done = match command.as_str() {
        "add" => cni.add_network_list(&list, &rt).map(|result| {
            let text = serde_json::to_string_pretty(&result.to_value()).unwrap_or_default();
            println!("{text}");
        }),
        "check" => cni.check_network_list(&list, &rt),
        "del" => cni.del_network_list(&list, &rt),
        // Like the reference tool: no attachment is valid, so every cached one goes.
        "gc" => cni.gc_network_list(&list, &[]),
        _ => cni.get_status_network_list(&list),
    };
    done.map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
