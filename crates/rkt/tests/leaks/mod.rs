//! The leak checker: snapshots the host's network state when a test starts and, when it
//! ends, fails the test if anything attributable to it is still there.
//!
//! ```ignore
//! mod leaks;
//! let ctx = leaks::Ctx::new(&data_dir).network("rel-abc").subnet("10.77.3.0/24");
//! let _g = leaks::Guard::new(ctx); // asserts "nothing leaked" when dropped
//! ```
//!
//! Tests run in parallel on one host, so the checker only looks at state it can attribute
//! to THIS test, and only at state that appeared after the snapshot:
//! - pods: every pod directory under the test's data dir, plus the container ids given
//!   with [`Ctx::container`], found in the test plugin's call logs ([`Ctx::plugin_log`]) or
//!   in `uuid-*` files (`--uuid-file-save`) of [`Ctx::uuid_files_in`]. A [`Guard`] remembers
//!   every id it has seen, so a pod `rkt gc` removed still counts at the end;
//! - network namespaces `/run/netns/rkt-<uuid>` and their bind mounts (mountinfo) for those
//!   pods;
//! - host links named with [`Ctx::link`], or carrying an address in one of the test's
//!   subnets ([`Ctx::subnet`]); host addresses and routes in those subnets;
//! - `iptables -S` / `ip6tables -S` rules (nat and filter) that name one of the pods, one
//!   of the test's networks or subnets, and chains named as the reference plugins name an
//!   attachment's chains (`CNI-` + sha512(network + id), with or without `DN-`/`SN-`);
//! - host-local reservations under `/var/lib/cni/networks/<net>`: any address of a network
//!   the test owns ([`Ctx::network`]), and addresses leased to one of the pods in a shared
//!   one ([`Ctx::shared_network`], e.g. the built-in `default`);
//! - a pod's `stage1-init` process still alive;
//! - pods in state `running` under the data dir (a final state is `exited` or `garbage`,
//!   `prepared` pods hold nothing on the host);
//! - CNI cache entries (`<data>/cni/results`, and the pods' entries in
//!   `/var/lib/cni/results`).
//!
//! When not root the guard does nothing (the tests that need root skip themselves anyway).

#![allow(dead_code)] // Each test file uses its own subset.

pub mod lab;

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What a test owns: the state the checker may attribute to it.
#[derive(Debug, Clone, Default)]
pub struct Ctx {
    data_dir: PathBuf,
    networks: Vec<String>,
    shared_networks: Vec<String>,
    subnets: Vec<String>,
    links: Vec<String>,
    containers: Vec<String>,
    plugin_logs: Vec<PathBuf>,
    uuid_dirs: Vec<PathBuf>,
    cache_dirs: Vec<PathBuf>,
}

impl Ctx {
    /// The test's rkt data directory (`--dir`).
    pub fn new(data_dir: impl Into<PathBuf>) -> Ctx {
        Ctx {
            data_dir: data_dir.into(),
            ..Ctx::default()
        }
    }

    /// A network the test owns (its name is unique to the test).
    pub fn network(mut self, name: &str) -> Ctx {
        self.networks.push(name.to_string());
        self
    }

    /// A network other tests use too (`default`): only this test's pods count.
    pub fn shared_network(mut self, name: &str) -> Ctx {
        self.shared_networks.push(name.to_string());
        self
    }

    /// A subnet (CIDR) only this test uses.
    pub fn subnet(mut self, cidr: &str) -> Ctx {
        self.subnets.push(cidr.to_string());
        self
    }

    /// A host link name only this test uses (a bridge).
    pub fn link(mut self, name: &str) -> Ctx {
        self.links.push(name.to_string());
        self
    }

    /// A container id (pod UUID) of this test, beyond those under the data dir.
    pub fn container(mut self, id: &str) -> Ctx {
        self.containers.push(id.to_string());
        self
    }

    /// A test plugin call log: every `CNI_CONTAINERID` in it belongs to this test.
    pub fn plugin_log(mut self, path: impl Into<PathBuf>) -> Ctx {
        self.plugin_logs.push(path.into());
        self
    }

    /// A directory whose `uuid-*` files (written by `rkt run --uuid-file-save`) each hold a
    /// pod UUID of this test.
    pub fn uuid_files_in(mut self, dir: impl Into<PathBuf>) -> Ctx {
        self.uuid_dirs.push(dir.into());
        self
    }

    /// Another CNI cache directory the test's pods use.
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Ctx {
        self.cache_dirs.push(dir.into());
        self
    }

    /// Every pod UUID or container id of this test known now.
    pub fn ids(&self) -> BTreeSet<String> {
        let mut ids: BTreeSet<String> = self.containers.iter().cloned().collect();
        if let Ok(entries) = fs::read_dir(self.data_dir.join("pods")) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if uuid::Uuid::parse_str(&name).is_ok() {
                    ids.insert(name);
                }
            }
        }
        for dir in &self.uuid_dirs {
            for e in fs::read_dir(dir).into_iter().flatten().flatten() {
                if e.file_name().to_string_lossy().starts_with("uuid-") {
                    let text = fs::read_to_string(e.path()).unwrap_or_default();
                    if uuid::Uuid::parse_str(text.trim()).is_ok() {
                        ids.insert(text.trim().to_string());
                    }
                }
            }
        }
        for log in &self.plugin_logs {
            for line in fs::read_to_string(log).unwrap_or_default().lines() {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
                    if let Some(id) = v["env"]["CNI_CONTAINERID"].as_str() {
                        if !id.is_empty() {
                            ids.insert(id.to_string());
                        }
                    }
                }
            }
        }
        ids
    }
}

/// The host's state as the checker sees it: lines of text per source.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    netns: BTreeSet<String>,
    mounts: BTreeSet<String>,
    links: BTreeSet<String>,
    addrs: BTreeSet<String>,
    routes: BTreeSet<String>,
    rules: BTreeSet<String>,
    reservations: BTreeSet<String>,
    cache: BTreeSet<String>,
}

fn lines_of(cmd: &[&str]) -> BTreeSet<String> {
    match Command::new(cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect(),
        Err(_) => BTreeSet::new(),
    }
}

fn files_under(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let path = e.path();
            let text = fs::read_to_string(&path).unwrap_or_default();
            out.insert(format!("{} {}", path.display(), text.trim()));
        }
    }
    out
}

impl Snapshot {
    /// Reads the host's state now, limited to what `ctx` may own.
    pub fn take(ctx: &Ctx) -> Snapshot {
        let mut s = Snapshot {
            netns: fs::read_dir("/run/netns")
                .map(|d| {
                    d.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default(),
            mounts: fs::read_to_string("/proc/self/mountinfo")
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains("/run/netns/"))
                .map(|l| l.split_whitespace().nth(4).unwrap_or("").to_string())
                .collect(),
            links: lines_of(&["ip", "-o", "link", "show"])
                .into_iter()
                .filter_map(|l| link_name(&l))
                .collect(),
            addrs: lines_of(&["ip", "-o", "addr", "show"])
                .into_iter()
                .map(|l| addr_line(&l))
                .collect(),
            routes: lines_of(&["ip", "-4", "route", "show", "table", "all"])
                .into_iter()
                .chain(lines_of(&["ip", "-6", "route", "show", "table", "all"]))
                .collect(),
            ..Snapshot::default()
        };
        for tool in ["iptables", "ip6tables"] {
            for table in ["nat", "filter"] {
                for l in lines_of(&[tool, "-w", "-t", table, "-S"]) {
                    s.rules.insert(format!("{tool} -t {table} {l}"));
                }
            }
        }
        for net in ctx.networks.iter().chain(&ctx.shared_networks) {
            s.reservations
                .extend(files_under(&Path::new("/var/lib/cni/networks").join(net)));
        }
        for dir in ctx.cache_dirs_all() {
            s.cache.extend(files_under(&dir.join("results")));
        }
        s
    }
}

impl Ctx {
    fn cache_dirs_all(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.data_dir.join("cni"), PathBuf::from("/var/lib/cni")];
        dirs.extend(self.cache_dirs.iter().cloned());
        dirs
    }
}

/// `ip -o link` line to the link's name (without `@peer`).
fn link_name(line: &str) -> Option<String> {
    let name = line.split(": ").nth(1)?;
    Some(name.split('@').next()?.to_string())
}

/// `ip -o addr` line to `<link> <address/prefix>`.
fn addr_line(line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    format!(
        "{} {}",
        words.get(1).unwrap_or(&""),
        words.get(3).unwrap_or(&"")
    )
}

/// A CIDR, for containment tests.
#[derive(Debug, Clone, Copy)]
struct Cidr {
    addr: IpAddr,
    prefix: u32,
}

impl Cidr {
    fn parse(text: &str) -> Option<Cidr> {
        let (a, p) = text.split_once('/').unwrap_or((text, ""));
        let addr: IpAddr = a.parse().ok()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = if p.is_empty() { max } else { p.parse().ok()? };
        (prefix <= max).then_some(Cidr { addr, prefix })
    }

    /// Whether the two networks overlap.
    fn overlaps(&self, other: &Cidr) -> bool {
        let p = self.prefix.min(other.prefix);
        match (self.addr, other.addr) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let mask = if p == 0 { 0 } else { u32::MAX << (32 - p) };
                u32::from(a) & mask == u32::from(b) & mask
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let mask = if p == 0 { 0 } else { u128::MAX << (128 - p) };
                u128::from(a) & mask == u128::from(b) & mask
            }
            _ => false,
        }
    }
}

/// Whether any word of `text` is an address or network inside one of `subnets`.
fn mentions_subnet(text: &str, subnets: &[Cidr]) -> bool {
    text.split(|c: char| c.is_whitespace() || c == '"' || c == ',')
        .filter_map(Cidr::parse)
        .any(|c| {
            subnets
                .iter()
                .any(|s| c.prefix >= s.prefix && s.overlaps(&c))
        })
}

/// The reference plugins' chain name for an attachment: `CNI-<prefix>` + the sha512 of
/// network name and container id, in hex, cut to 28 characters.
pub fn chain_name(net: &str, id: &str, prefix: &str) -> String {
    let mut child = Command::new("sha512sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run sha512sum");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{net}{id}").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let hex = String::from_utf8_lossy(&out.stdout);
    let mut chain = format!(
        "CNI-{prefix}{}",
        hex.split_whitespace().next().unwrap_or("")
    );
    chain.truncate(28);
    chain
}

/// What leaked, one line per item, counting the pods and containers `ids` (and those `ctx`
/// finds now) as the test's.
pub fn leaked(ctx: &Ctx, before: &Snapshot, ids: &BTreeSet<String>) -> Vec<String> {
    let after = Snapshot::take(ctx);
    let mut ids = ids.clone();
    ids.extend(ctx.ids());
    let subnets: Vec<Cidr> = ctx.subnets.iter().filter_map(|s| Cidr::parse(s)).collect();
    let nets: Vec<&String> = ctx.networks.iter().chain(&ctx.shared_networks).collect();
    let new = |a: &BTreeSet<String>, b: &BTreeSet<String>| -> Vec<String> {
        a.difference(b).cloned().collect()
    };
    let mine = |text: &str| ids.iter().any(|id| text.contains(id.as_str()));
    let mut out = Vec::new();

    for n in new(&after.netns, &before.netns) {
        if mine(&n) {
            out.push(format!("network namespace /run/netns/{n}"));
        }
    }
    for m in new(&after.mounts, &before.mounts) {
        if mine(&m) {
            out.push(format!("namespace bind mount {m}"));
        }
    }
    // Links: by name, or because they hold one of the test's addresses.
    let addr_links: BTreeSet<String> = after
        .addrs
        .iter()
        .filter(|a| mentions_subnet(a, &subnets))
        .filter_map(|a| a.split_whitespace().next().map(str::to_string))
        .collect();
    for l in new(&after.links, &before.links) {
        if ctx.links.contains(&l) || addr_links.contains(&l) {
            out.push(format!("host link {l}"));
        }
    }
    for a in new(&after.addrs, &before.addrs) {
        if mentions_subnet(&a, &subnets) {
            out.push(format!("host address {a}"));
        }
    }
    for r in new(&after.routes, &before.routes) {
        if mentions_subnet(&r, &subnets) || ctx.links.iter().any(|l| r.contains(l.as_str())) {
            out.push(format!("host route {r}"));
        }
    }
    let mut chains = BTreeSet::new();
    for id in &ids {
        for net in &nets {
            for prefix in ["", "DN-", "SN-"] {
                chains.insert(chain_name(net, id, prefix));
            }
        }
    }
    // The reference plugins' comment, as iptables -S prints it (quotes escaped) or not.
    let quoted_nets: Vec<String> = ctx
        .networks
        .iter()
        .flat_map(|n| [format!("name: \"{n}\""), format!("name: \\\"{n}\\\"")])
        .collect();
    for r in new(&after.rules, &before.rules) {
        let by_chain = chains.iter().any(|c| r.contains(c.as_str()));
        let by_net = quoted_nets.iter().any(|q| r.contains(q.as_str()));
        if mine(&r) || by_chain || by_net || mentions_subnet(&r, &subnets) {
            out.push(format!("firewall: {r}"));
        }
    }
    for r in new(&after.reservations, &before.reservations) {
        let Some((path, content)) = r.split_once(' ') else {
            continue;
        };
        let file = Path::new(path)
            .file_name()
            .unwrap_or_default()
            .to_string_lossy();
        if file == "lock" || file.starts_with("last_reserved_ip") {
            continue;
        }
        let owned = ctx
            .networks
            .iter()
            .any(|n| Path::new(path).starts_with(Path::new("/var/lib/cni/networks").join(n)));
        if owned || mine(content) {
            out.push(format!("host-local reservation {path} ({content})"));
        }
    }
    for c in new(&after.cache, &before.cache) {
        let path = c.split(' ').next().unwrap_or("");
        if path.starts_with(&*ctx.data_dir.to_string_lossy()) || mine(path) {
            out.push(format!("CNI cache entry {path}"));
        }
    }
    // A pod's init (`stage1-init --pod-dir <data>/pods/<uuid>`) outliving its pod.
    let pods_dir = ctx.data_dir.join("pods").display().to_string();
    for (pid, cmdline) in processes() {
        if cmdline.contains("stage1-init") && cmdline.contains(&pods_dir) {
            out.push(format!("process {pid}: {cmdline}"));
        }
    }
    for id in &ids {
        let state = ctx.data_dir.join("pods").join(id).join("state.json");
        let Ok(text) = fs::read_to_string(&state) else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        if v["state"] == "running" {
            out.push(format!("pod {id} is still running ({})", state.display()));
        }
    }
    out
}

/// Every process as (pid, command line with spaces between arguments).
fn processes() -> Vec<(u32, String)> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let raw = fs::read(e.path().join("cmdline")).ok()?;
            let text = String::from_utf8_lossy(&raw).replace('\0', " ");
            Some((pid, text.trim().to_string()))
        })
        .collect()
}

/// Whether a plugin (or a program it started) is still running for container `id`: a
/// process whose environment has `CNI_CONTAINERID=<id>`.
pub fn plugin_running_for(id: &str) -> bool {
    let needle = format!("CNI_CONTAINERID={id}\0");
    let Ok(entries) = fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|e| {
        e.file_name()
            .to_str()
            .is_some_and(|n| n.parse::<u32>().is_ok())
            && fs::read(e.path().join("environ"))
                .map(|env| String::from_utf8_lossy(&env).contains(&needle))
                .unwrap_or(false)
    })
}

/// Whether a process whose command line contains `needle` exists (zombies aside).
pub fn process_running(needle: &str) -> bool {
    processes().iter().any(|(_, c)| c.contains(needle))
}

/// Snapshots at creation; asserts nothing leaked when dropped or when [`Guard::check`] is
/// called. When the test is already failing it prints the leaks instead (a second panic
/// would abort the test binary).
pub struct Guard {
    ctx: Ctx,
    before: Option<Snapshot>,
    /// Every pod or container id seen so far, also those whose pods are gone since.
    seen: std::cell::RefCell<BTreeSet<String>>,
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

impl Guard {
    pub fn new(ctx: Ctx) -> Guard {
        let before = is_root().then(|| Snapshot::take(&ctx));
        let seen = std::cell::RefCell::new(ctx.ids());
        Guard { ctx, before, seen }
    }

    /// The context, for adding to it as the test learns more (container ids).
    pub fn ctx_mut(&mut self) -> &mut Ctx {
        &mut self.ctx
    }

    /// Remembers the test's ids known now (call it while pods exist that `rkt gc` will
    /// remove before the check).
    pub fn remember(&self) {
        self.seen.borrow_mut().extend(self.ctx.ids());
    }

    /// What leaked so far (empty when not root).
    pub fn leaked(&self) -> Vec<String> {
        self.remember();
        match &self.before {
            Some(before) => leaked(&self.ctx, before, &self.seen.borrow()),
            None => Vec::new(),
        }
    }

    /// Panics, listing every leak, when something of this test is left on the host.
    pub fn check(&self) {
        let leaks = self.leaked();
        assert!(
            leaks.is_empty(),
            "leaked on the host:\n  {}",
            leaks.join("\n  ")
        );
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.check();
            return;
        }
        let leaks = self.leaked();
        if !leaks.is_empty() {
            eprintln!(
                "leak checker: the failing test also left on the host (its cleanup runs next):\n  {}",
                leaks.join("\n  ")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_names_are_the_reference_plugins() {
        // Seen on a host: ptp's masquerading chain for this network and container.
        assert_eq!(
            chain_name("r3a879a74-ptp", "153dc30c-0c9e-4d4f-bd42-8f018e7fad02", ""),
            "CNI-22977c8163dc354bd8c96d0d"
        );
    }

    #[test]
    fn subnets_contain_addresses_and_smaller_networks() {
        let s = [Cidr::parse("10.77.3.0/24").unwrap()];
        assert!(mentions_subnet("veth1 10.77.3.1/32", &s));
        assert!(mentions_subnet("-A POSTROUTING -s 10.77.3.4/32 -j X", &s));
        assert!(mentions_subnet("10.77.3.0/24 dev br0", &s));
        assert!(!mentions_subnet("10.77.0.0/16 dev br0", &s));
        assert!(!mentions_subnet("10.77.4.1/24", &s));
        assert!(!mentions_subnet("fd00::1/64 10", &s));
    }
}
