//! The leak checker of the runtime's real-plugin tests: snapshots the host's network state
//! when a test starts and, when it ends, fails the test if anything attributable to it
//! appeared and is still there.
//!
//! ```ignore
//! mod leaks;
//! let g = leaks::Guard::new(leaks::Ctx::new(tmp.path()).network(&net).subnet("10.251.10.0/24")
//!     .container(&rt.container_id).hostlocal_dir(&data_dir));
//! // ... ADD, then DEL through the library ...
//! g.check(); // and again when dropped, unless the test is already panicking
//! ```
//!
//! It is the counterpart of rkt's checker (`crates/rkt/tests/leaks`), which this crate cannot
//! include: that one's `lab` module runs the `rkt` binary (`env!("CARGO_BIN_EXE_rkt")`
//! exists only in rkt's tests) and it reads pod directories this crate knows nothing of.
//! Tests run in parallel, so only state this test owns counts:
//! - network namespaces whose name holds one of the test's container ids;
//! - host links named with [`Ctx::link`] or [`Guard::link`], or holding an address in one of
//!   the test's subnets; host addresses and routes in those subnets or on those links;
//! - `iptables`/`ip6tables` rules (nat and filter) naming a container id, a subnet, one of
//!   the test's networks in the reference plugins' comment, or an attachment's chain
//!   (`CNI-`, `CNI-DN-`, `CNI-SN-` + sha512(network + container id));
//! - host-local reservations (files named like an address) under `<dir>/<network>` for each
//!   host-local data dir (`/var/lib/cni/networks` and those given);
//! - CNI cache entries under the test's directory, and those naming a container id under
//!   `/var/lib/cni/results`.
//!
//! When not root the guard does nothing (the tests that need root skip themselves anyway).

#![allow(dead_code)] // Each test file uses its own subset.

use std::collections::BTreeSet;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What a test owns: the state the checker may attribute to it.
#[derive(Debug, Clone, Default)]
pub struct Ctx {
    dir: PathBuf,
    networks: Vec<String>,
    subnets: Vec<String>,
    links: Vec<String>,
    containers: Vec<String>,
    hostlocal_dirs: Vec<PathBuf>,
}

impl Ctx {
    /// The test's temporary directory: every CNI cache entry under it is the test's.
    pub fn new(dir: impl Into<PathBuf>) -> Ctx {
        Ctx {
            dir: dir.into(),
            hostlocal_dirs: vec![PathBuf::from("/var/lib/cni/networks")],
            ..Ctx::default()
        }
    }

    /// A network whose name is unique to the test.
    pub fn network(mut self, name: &str) -> Ctx {
        self.networks.push(name.to_string());
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

    /// A container id the test passes to the plugins.
    pub fn container(mut self, id: &str) -> Ctx {
        self.containers.push(id.to_string());
        self
    }

    /// A host-local `dataDir` the test's networks use besides `/var/lib/cni/networks`.
    pub fn hostlocal_dir(mut self, dir: impl Into<PathBuf>) -> Ctx {
        self.hostlocal_dirs.push(dir.into());
        self
    }
}

/// The host's state as the checker sees it: lines of text per source.
#[derive(Debug, Clone, Default)]
struct Snapshot {
    netns: BTreeSet<String>,
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

fn names_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Every file under `dir` (recursively) in a directory named `results`.
fn cache_entries(dir: &Path, out: &mut BTreeSet<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            cache_entries(&path, out);
        } else if dir.file_name().is_some_and(|n| n == "results") {
            out.insert(path.display().to_string());
        }
    }
}

impl Snapshot {
    fn take(ctx: &Ctx) -> Snapshot {
        let mut s = Snapshot {
            netns: names_in(Path::new("/run/netns")).into_iter().collect(),
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
            for net in &ctx.networks {
                let net_dir = dir.join(net);
                for name in names_in(&net_dir) {
                    if name.parse::<IpAddr>().is_ok() {
                        s.reservations
                            .insert(net_dir.join(name).display().to_string());
                    }
                }
            }
        }
        cache_entries(&ctx.dir, &mut s.cache);
        for name in names_in(Path::new("/var/lib/cni/results")) {
            if ctx.containers.iter().any(|c| name.contains(c.as_str())) {
                s.cache.insert(format!("/var/lib/cni/results/{name}"));
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

fn leaked(ctx: &Ctx, before: &Snapshot) -> Vec<String> {
    let after = Snapshot::take(ctx);
    let subnets: Vec<Cidr> = ctx.subnets.iter().filter_map(|s| Cidr::parse(s)).collect();
    let new = |a: &BTreeSet<String>, b: &BTreeSet<String>| -> Vec<String> {
        a.difference(b).cloned().collect()
    };
    let mine = |text: &str| ctx.containers.iter().any(|id| text.contains(id.as_str()));
    let mut out = Vec::new();

    for n in new(&after.netns, &before.netns) {
        if mine(&n) {
            out.push(format!("network namespace /run/netns/{n}"));
        }
    }
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
        let on_link = r
            .split_whitespace()
            .collect::<Vec<_>>()
            .windows(2)
            .any(|w| w[0] == "dev" && ctx.links.iter().any(|l| l == w[1]));
        if on_link || mentions_subnet(&r, &subnets) {
            out.push(format!("host route {r}"));
        }
    }
    let mut chains = BTreeSet::new();
    for id in &ctx.containers {
        for net in &ctx.networks {
            for prefix in ["", "DN-", "SN-"] {
                chains.insert(chain_name(net, id, prefix));
            }
        }
    }
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
        let holder = std::fs::read_to_string(&r).unwrap_or_default();
        out.push(format!(
            "host-local reservation {r} ({})",
            holder.lines().next().unwrap_or("")
        ));
    }
    for c in new(&after.cache, &before.cache) {
        out.push(format!("CNI cache entry {c}"));
    }
    out
}

/// Snapshots at creation; asserts nothing of the test was left when [`Guard::check`] is
/// called and when dropped (unless the test is already panicking).
pub struct Guard {
    ctx: Ctx,
    before: Option<Snapshot>,
}

impl Guard {
    pub fn new(ctx: Ctx) -> Guard {
        // SAFETY: geteuid(2) has no preconditions and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let before = root.then(|| Snapshot::take(&ctx));
        Guard { ctx, before }
    }

    /// Adds a host link the test learnt the name of (a host veth from a result).
    pub fn link(&mut self, name: &str) {
        self.ctx.links.push(name.to_string());
    }

    /// What leaked so far (empty when not root).
    pub fn leaked(&self) -> Vec<String> {
        match &self.before {
            Some(before) => leaked(&self.ctx, before),
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
    fn subnets_contain_addresses_and_smaller_networks_only() {
        let s = [Cidr::parse("10.251.10.0/24").unwrap()];
        assert!(mentions_subnet("veth1 10.251.10.1/32", &s));
        assert!(mentions_subnet("-A POSTROUTING -s 10.251.10.4/32 -j X", &s));
        assert!(mentions_subnet("10.251.10.0/24 dev br0", &s));
        assert!(!mentions_subnet("10.251.0.0/16 dev br0", &s));
        assert!(!mentions_subnet("10.251.11.1/24", &s));
        assert!(!mentions_subnet("fd00::1/64 10", &s));
    }
}
