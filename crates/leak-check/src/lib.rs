//! The leak checker of the tests that touch the host's network (rkt's and the CNI
//! runtime's): snapshots the host's state when a test starts and, when it ends, fails the
//! test if anything attributable to it appeared and is still there.
//!
//! ```no_run
//! # let data_dir = std::path::Path::new("/tmp/test-data");
//! let ctx = leak_check::Ctx::new(data_dir).network("rel-abc").subnet("10.77.3.0/24");
//! let mut guard = leak_check::Guard::new(ctx);
//! // ... the test; what it learns on the way (a host veth's name) goes to the guard:
//! guard.add_link("veth1a2b3c4d");
//! guard.check(); // and again when dropped (printing instead when the test already panics)
//! ```
//!
//! Tests run in parallel on one host, so the checker only looks at state it can attribute
//! to THIS test, and only at state that appeared after the snapshot:
//! - ids: every pod directory under the test's data dir (`<data>/pods/<uuid>`), the
//!   container ids given with [`Ctx::container`] or [`Guard::add_container`], those in the
//!   test plugin's call logs ([`Ctx::plugin_log`]) and in `uuid-*` files
//!   (`rkt run --uuid-file-save`) of [`Ctx::uuid_files_in`]. A [`Guard`] remembers every id
//!   it has seen, so a pod `rkt gc` removed still counts at the end;
//! - network namespaces under `/run/netns` whose name holds one of the ids, and their bind
//!   mounts (mountinfo); any mount at or below the data dir (an image pod's overlay root
//!   filesystem at `<data>/pods/<uuid>/rootfs`);
//! - host links named with [`Ctx::link`] or [`Guard::add_link`], or carrying an address in
//!   one of the test's subnets ([`Ctx::subnet`]); host addresses and routes in those
//!   subnets, and routes on those links (`dev <name>`);
//! - `iptables -S` / `ip6tables -S` rules (nat and filter) that name one of the ids, one of
//!   the test's subnets, one of its networks in the reference plugins' comment, or a chain
//!   named as the reference plugins name an attachment's chains (`CNI-` +
//!   sha512(network + id), with or without `DN-`/`SN-`, see [`chain_name`]);
//! - host-local reservations (files named like an address) under `<dir>/<network>` for
//!   `/var/lib/cni/networks` and each [`Ctx::hostlocal_dir`]: any address of a network the
//!   test owns ([`Ctx::network`]), and addresses leased to one of the ids in a shared one
//!   ([`Ctx::shared_network`], e.g. rkt's built-in `default`);
//! - CNI cache entries: every file in a `results` directory under the data dir, and those
//!   naming one of the ids in `/var/lib/cni/results` and each [`Ctx::cache_dir`];
//! - a pod's `stage1-init` process still alive, and pods still in state `running` under the
//!   data dir (a final state is `exited` or `garbage`; `prepared` pods hold nothing);
//! - pod cgroups, anywhere in the unified hierarchy (`/sys/fs/cgroup`) or any v1 hierarchy
//!   (`/sys/fs/cgroup/<controller>`): `rkt/<id>` (below the cgroup of the process that ran
//!   the pod, or an older rkt's below the root) and `rkt-<id>` (below a `--cgroup-parent`),
//!   every pod's for its pids limit.
//!
//! When not root the guard does nothing (the tests that need root skip themselves anyway).

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// host-local's default `dataDir`.
const HOSTLOCAL_DIR: &str = "/var/lib/cni/networks";
/// libcni's default cache directory.
const SYSTEM_CACHE_DIR: &str = "/var/lib/cni";

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
    hostlocal_dirs: Vec<PathBuf>,
}

impl Ctx {
    /// The test's data directory (rkt's `--dir`, or the test's temporary directory): pods
    /// under `<dir>/pods` are the test's, and so is every CNI cache entry under it.
    pub fn new(data_dir: impl Into<PathBuf>) -> Ctx {
        Ctx {
            data_dir: data_dir.into(),
            hostlocal_dirs: vec![PathBuf::from(HOSTLOCAL_DIR)],
            ..Ctx::default()
        }
    }

    /// A network the test owns (its name is unique to the test).
    pub fn network(mut self, name: &str) -> Ctx {
        self.networks.push(name.to_string());
        self
    }

    /// A network other tests use too (`default`): only this test's ids count.
    pub fn shared_network(mut self, name: &str) -> Ctx {
        self.shared_networks.push(name.to_string());
        self
    }

    /// A subnet (CIDR) only this test uses.
    pub fn subnet(mut self, cidr: &str) -> Ctx {
        self.subnets.push(cidr.to_string());
        self
    }

    /// A host link name only this test uses (a bridge, a host veth).
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

    /// Another CNI cache directory the test's pods use (its `results` entries count when
    /// they are under the data dir or name one of the test's ids).
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Ctx {
        self.cache_dirs.push(dir.into());
        self
    }

    /// A host-local `dataDir` the test's networks use besides `/var/lib/cni/networks`.
    pub fn hostlocal_dir(mut self, dir: impl Into<PathBuf>) -> Ctx {
        self.hostlocal_dirs.push(dir.into());
        self
    }

    /// Every pod UUID or container id of this test known now.
    pub fn ids(&self) -> BTreeSet<String> {
        let mut ids: BTreeSet<String> = self.containers.iter().cloned().collect();
        for name in names_in(&self.data_dir.join("pods")) {
            if uuid::Uuid::parse_str(&name).is_ok() {
                ids.insert(name);
            }
        }
        for dir in &self.uuid_dirs {
            for name in names_in(dir) {
                if name.starts_with("uuid-") {
                    let text = fs::read_to_string(dir.join(&name)).unwrap_or_default();
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

    /// The directories whose `results` entries may be the test's.
    fn cache_dirs_all(&self) -> Vec<PathBuf> {
        let mut dirs = vec![PathBuf::from(SYSTEM_CACHE_DIR)];
        dirs.extend(self.cache_dirs.iter().cloned());
        dirs
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
    /// `<path> <content>` of each reservation file.
    reservations: BTreeSet<String>,
    /// Paths of CNI cache entries.
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

/// The names in directory `dir` (none when it cannot be read).
fn names_in(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Every file in a directory named `results` under `dir`, recursively (symlinks are not
/// followed).
fn cache_entries(dir: &Path, out: &mut BTreeSet<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(kind) = e.file_type() else {
            continue;
        };
        if kind.is_dir() {
            cache_entries(&e.path(), out);
        } else if dir.file_name().is_some_and(|n| n == "results") {
            out.insert(e.path().display().to_string());
        }
    }
}

/// Whether the mount point `m` (as mountinfo shows it) is at or below `dir`.
fn under(m: &str, dir: &Path) -> bool {
    let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let dir = dir.display().to_string();
    !dir.is_empty() && dir != "/" && Path::new(m).starts_with(&dir)
}

impl Snapshot {
    /// Reads the host's state now, limited to what `ctx` may own.
    pub fn take(ctx: &Ctx) -> Snapshot {
        let mut s = Snapshot {
            netns: names_in(Path::new("/run/netns")).into_iter().collect(),
            mounts: fs::read_to_string("/proc/self/mountinfo")
                .unwrap_or_default()
                .lines()
                .map(|l| l.split_whitespace().nth(4).unwrap_or("").to_string())
                .filter(|m| m.starts_with("/run/netns/") || under(m, &ctx.data_dir))
                .collect(),
            links: lines_of(&["ip", "-o", "link", "show"])
                .iter()
                .filter_map(|l| link_name(l))
                .collect(),
            addrs: lines_of(&["ip", "-o", "addr", "show"])
                .iter()
                .map(|l| addr_line(l))
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
        for dir in &ctx.hostlocal_dirs {
            for net in ctx.networks.iter().chain(&ctx.shared_networks) {
                let net_dir = dir.join(net);
                for name in names_in(&net_dir) {
                    if name.parse::<IpAddr>().is_ok() {
                        let path = net_dir.join(name);
                        let holder = fs::read_to_string(&path).unwrap_or_default();
                        s.reservations
                            .insert(format!("{} {}", path.display(), holder.trim()));
                    }
                }
            }
        }
        cache_entries(&ctx.data_dir, &mut s.cache);
        for dir in ctx.cache_dirs_all() {
            let results = dir.join("results");
            for name in names_in(&results) {
                s.cache.insert(results.join(name).display().to_string());
            }
        }
        s
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

/// Whether route `line` (`ip route` output) goes through one of `links` (`dev <name>`,
/// the whole name: `veth1` is not `veth12`).
fn route_on_link(line: &str, links: &[String]) -> bool {
    line.split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .any(|w| w[0] == "dev" && links.iter().any(|l| l == w[1]))
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

    /// Whether `other` (an address or a network) lies inside this network.
    fn contains(&self, other: &Cidr) -> bool {
        if other.prefix < self.prefix {
            return false;
        }
        let p = self.prefix;
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
        .any(|c| subnets.iter().any(|s| s.contains(&c)))
}

/// The reference plugins' chain name for an attachment: `CNI-<prefix>` + the sha512 of
/// network name and container id, in hex, cut to 28 characters.
///
/// Computed with `sha512sum`, independently of rkt's own implementation, which tests check
/// against this one.
pub fn chain_name(net: &str, id: &str, prefix: &str) -> String {
    let mut child = Command::new("sha512sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run sha512sum");
    child
        .stdin
        .take()
        .expect("sha512sum's stdin")
        .write_all(format!("{net}{id}").as_bytes())
        .expect("write to sha512sum");
    let out = child.wait_with_output().expect("wait for sha512sum");
    let hex = String::from_utf8_lossy(&out.stdout);
    let mut chain = format!(
        "CNI-{prefix}{}",
        hex.split_whitespace().next().unwrap_or("")
    );
    chain.truncate(28);
    chain
}

/// What leaked since `before`, one line per item, counting the ids `ids` (and those `ctx`
/// finds now) as the test's.
fn leaked(ctx: &Ctx, before: &Snapshot, ids: &BTreeSet<String>) -> Vec<String> {
    let after = Snapshot::take(ctx);
    let mut ids = ids.clone();
    ids.extend(ctx.ids());
    let subnets: Vec<Cidr> = ctx.subnets.iter().filter_map(|s| Cidr::parse(s)).collect();
    let nets: Vec<&String> = ctx.networks.iter().chain(&ctx.shared_networks).collect();
    let new = |a: &BTreeSet<String>, b: &BTreeSet<String>| -> Vec<String> {
        a.difference(b).cloned().collect()
    };
    let mine = |text: &str| ids.iter().any(|id| text.contains(id.as_str()));
    let data_dir = ctx.data_dir.display().to_string();
    let mut out = Vec::new();

    for n in new(&after.netns, &before.netns) {
        if mine(&n) {
            out.push(format!("network namespace /run/netns/{n}"));
        }
    }
    for m in new(&after.mounts, &before.mounts) {
        if under(&m, &ctx.data_dir) {
            // An image pod's overlay root filesystem, or anything else mounted in a pod.
            out.push(format!("mount {m} under the data directory"));
        } else if mine(&m) {
            out.push(format!("namespace bind mount {m}"));
        }
    }
    // Links: by name, or because they hold one of the test's addresses.
    let addr_links: BTreeSet<&str> = after
        .addrs
        .iter()
        .filter(|a| mentions_subnet(a, &subnets))
        .filter_map(|a| a.split_whitespace().next())
        .collect();
    for l in new(&after.links, &before.links) {
        if ctx.links.contains(&l) || addr_links.contains(l.as_str()) {
            out.push(format!("host link {l}"));
        }
    }
    for a in new(&after.addrs, &before.addrs) {
        if mentions_subnet(&a, &subnets) {
            out.push(format!("host address {a}"));
        }
    }
    for r in new(&after.routes, &before.routes) {
        if route_on_link(&r, &ctx.links) || mentions_subnet(&r, &subnets) {
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
    let comments: Vec<String> = ctx
        .networks
        .iter()
        .flat_map(|n| [format!("name: \"{n}\""), format!("name: \\\"{n}\\\"")])
        .collect();
    for r in new(&after.rules, &before.rules) {
        let by_chain = chains.iter().any(|c| r.contains(c.as_str()));
        let by_net = comments.iter().any(|c| r.contains(c.as_str()));
        if mine(&r) || by_chain || by_net || mentions_subnet(&r, &subnets) {
            out.push(format!("firewall: {r}"));
        }
    }
    for r in new(&after.reservations, &before.reservations) {
        let (path, holder) = r.split_once(' ').unwrap_or((&r, ""));
        let owned = ctx.hostlocal_dirs.iter().any(|dir| {
            ctx.networks
                .iter()
                .any(|n| Path::new(path).starts_with(dir.join(n)))
        });
        if owned || mine(holder) {
            let holder = holder.lines().next().unwrap_or("");
            out.push(format!("host-local reservation {path} ({holder})"));
        }
    }
    for c in new(&after.cache, &before.cache) {
        if c.starts_with(&data_dir) || mine(&c) {
            out.push(format!("CNI cache entry {c}"));
        }
    }
    // A pod's stage or init (`stage1-init --args-fd N --pod <uuid>`; older ones:
    // `--pod-dir <data>/pods/<uuid>`) outliving its pod.
    let pods_dir = ctx.data_dir.join("pods").display().to_string();
    for (pid, cmdline) in processes() {
        if cmdline.contains("stage1-init") && (cmdline.contains(&pods_dir) || mine(&cmdline)) {
            out.push(format!("process {pid}: {cmdline}"));
        }
    }
    for dir in pod_cgroups(Path::new("/sys/fs/cgroup"), &ids) {
        out.push(format!("pod cgroup {}", dir.display()));
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

/// The cgroups rkt made for the pods `ids` that exist, at any depth of the hierarchy at
/// `root` (cgroup v2) and of each hierarchy mounted under it (v1): `…/rkt/<id>` and
/// `…/rkt-<id>`. Symlinks (`cpu` → `cpu,cpuacct`) are not followed: the hierarchy is
/// walked under its own name.
fn pod_cgroups(root: &Path, ids: &BTreeSet<String>) -> Vec<PathBuf> {
    fn walk(dir: &Path, ids: &BTreeSet<String>, out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let in_rkt = dir.file_name().is_some_and(|n| n == "rkt");
            let id = name.strip_prefix("rkt-").unwrap_or(&name);
            if ids.contains(id) && (in_rkt || name.starts_with("rkt-")) {
                out.push(e.path());
            } else {
                walk(&e.path(), ids, out);
            }
        }
    }
    let mut out = Vec::new();
    if !ids.is_empty() {
        walk(root, ids, &mut out);
    }
    out.sort();
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
    seen: RefCell<BTreeSet<String>>,
}

impl Guard {
    /// Snapshots the host (when root) for what `ctx` may own.
    pub fn new(ctx: Ctx) -> Guard {
        let root = nix::unistd::geteuid().is_root();
        let before = root.then(|| Snapshot::take(&ctx));
        let seen = RefCell::new(ctx.ids());
        Guard { ctx, before, seen }
    }

    /// Adds a host link the test learnt the name of (a host veth from a result).
    pub fn add_link(&mut self, name: &str) {
        self.ctx.links.push(name.to_string());
    }

    /// Adds a container id the test learnt (a pod UUID known only once it started).
    pub fn add_container(&mut self, id: &str) {
        self.ctx.containers.push(id.to_string());
        self.seen.borrow_mut().insert(id.to_string());
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
    fn mounts_count_when_at_or_below_the_data_dir() {
        let dir = Path::new("/nonexistent-leak-check/data");
        assert!(under("/nonexistent-leak-check/data/pods/u/rootfs", dir));
        assert!(under("/nonexistent-leak-check/data", dir));
        assert!(!under("/nonexistent-leak-check/data2/x", dir));
        assert!(!under("/run/netns/rkt-u", dir));
        assert!(!under("/anything", Path::new("/")));
    }

    #[test]
    fn chain_names_are_the_reference_plugins() {
        // Seen on a host: ptp's masquerading chain for this network and container.
        assert_eq!(
            chain_name("r3a879a74-ptp", "153dc30c-0c9e-4d4f-bd42-8f018e7fad02", ""),
            "CNI-22977c8163dc354bd8c96d0d"
        );
    }

    #[test]
    fn subnets_contain_addresses_and_smaller_networks_only() {
        let s = [Cidr::parse("10.77.3.0/24").unwrap()];
        assert!(mentions_subnet("veth1 10.77.3.1/32", &s));
        assert!(mentions_subnet("-A POSTROUTING -s 10.77.3.4/32 -j X", &s));
        assert!(mentions_subnet("10.77.3.0/24 dev br0", &s));
        assert!(!mentions_subnet("10.77.0.0/16 dev br0", &s));
        assert!(!mentions_subnet("10.77.4.1/24", &s));
        assert!(!mentions_subnet("fd00::1/64 10", &s));
    }

    #[test]
    fn routes_belong_to_a_link_by_its_whole_name() {
        let links = ["veth1".to_string()];
        assert!(route_on_link("10.9.0.2 dev veth1 scope link", &links));
        assert!(route_on_link(
            "fe80::/64 dev veth1 proto kernel metric 256",
            &links
        ));
        assert!(!route_on_link("10.9.0.2 dev veth12 scope link", &links));
        assert!(!route_on_link(
            "10.9.0.2 via 10.9.0.1 dev eth0 # veth1",
            &links
        ));
        assert!(!route_on_link("veth1 dev", &links));
    }

    #[test]
    fn ids_come_from_pods_uuid_files_plugin_logs_and_containers() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path();
        let pod = uuid::Uuid::new_v4().to_string();
        let saved = uuid::Uuid::new_v4().to_string();
        fs::create_dir_all(tmp.join("pods").join(&pod)).unwrap();
        fs::create_dir_all(tmp.join("pods").join("not-a-uuid")).unwrap();
        fs::write(tmp.join("uuid-a"), format!("{saved}\n")).unwrap();
        fs::write(tmp.join("other"), uuid::Uuid::new_v4().to_string()).unwrap();
        fs::write(
            tmp.join("calls.jsonl"),
            "{\"env\":{\"CNI_CONTAINERID\":\"from-log\"}}\nnot json\n{\"env\":{}}\n",
        )
        .unwrap();
        let ctx = Ctx::new(tmp)
            .container("given")
            .uuid_files_in(tmp)
            .plugin_log(tmp.join("calls.jsonl"));
        let ids = ctx.ids();
        let want: BTreeSet<String> = [pod, saved, "from-log".into(), "given".into()].into();
        assert_eq!(ids, want);
    }

    #[test]
    fn pod_cgroups_are_found_in_the_unified_and_every_v1_hierarchy() {
        let root = tempfile::tempdir().unwrap();
        for d in [
            "rkt/p1",
            "pids/rkt/p1",
            "memory/rkt/p2",
            "cpu/rkt",
            "pids/system.slice/a.service/rkt/p1",
            "memory/kubepods/pod9/rkt-p1",
            "memory/kubepods/p1",
        ] {
            fs::create_dir_all(root.path().join(d)).unwrap();
        }
        let ids = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
        let found = pod_cgroups(root.path(), &ids(&["p1"]));
        let want: Vec<PathBuf> = [
            "memory/kubepods/pod9/rkt-p1",
            "pids/rkt/p1",
            "pids/system.slice/a.service/rkt/p1",
            "rkt/p1",
        ]
        .iter()
        .map(|d| root.path().join(d))
        .collect();
        assert_eq!(found, want);
        assert!(pod_cgroups(root.path(), &ids(&["p3"])).is_empty());
    }

    #[test]
    fn cache_entries_are_files_in_results_directories() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path();
        fs::create_dir_all(tmp.join("cni/results")).unwrap();
        fs::create_dir_all(tmp.join("pods/x")).unwrap();
        fs::write(tmp.join("cni/results/net-id-eth0"), "{}").unwrap();
        fs::write(tmp.join("pods/x/state.json"), "{}").unwrap();
        let mut found = BTreeSet::new();
        cache_entries(tmp, &mut found);
        let want = tmp.join("cni/results/net-id-eth0").display().to_string();
        assert_eq!(found, BTreeSet::from([want]));
    }
}
