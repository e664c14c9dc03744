//! Source-address checks on the built-in networks: a pod must not send packets with another
//! pod's address, or any address not its own, as their source. After a built-in network's
//! ADD, the host side of each link it made (the pod's veth end, named in the CNI result as
//! an interface without a `sandbox`) gets strict reverse-path filtering,
//! `net.ipv4.conf.<link>.rp_filter = 1`: the kernel then drops a packet arriving on that
//! link unless its source address is routed back out of the same link, and the host routes
//! only the pod's own address there (ptp's host route). One sysctl write per link, on links
//! the pod's own ADD created and that go with it, so nothing of the host's is changed, and
//! it holds for packets the pod builds itself (raw and packet sockets), which bypass any
//! check inside the pod.
//!
//! The kernel uses the larger of `conf/all` and the link's value: a host whose
//! `net.ipv4.conf.all.rp_filter` is 2 (loose, as some distributions set it) makes every
//! link loose, ours too, and [`protect`] says so once per pod rather than changing a
//! host-wide setting. IPv4 only (the built-in networks are IPv4); user networks are the
//! user's to configure (e.g. with the `tuning` plugin's `sysctl`).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Where the per-link IPv4 settings of the current network namespace live.
pub const IPV4_CONF: &str = "/proc/sys/net/ipv4/conf";

/// Why strict reverse-path filtering could not be turned on.
#[derive(Debug, thiserror::Error)]
#[error(
    "network {net:?}: cannot turn on strict reverse-path filtering on the pod's host link \
     {link} ({})",
    path.display()
)]
pub struct RpFilterError {
    pub net: String,
    pub link: String,
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// The host-side interfaces a CNI result names (those without a `sandbox`), skipping any
/// name that is not a plain interface name (so that nothing but `conf/<link>` is written).
pub fn host_links(result: &Value) -> Vec<String> {
    result["interfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["sandbox"].as_str().unwrap_or("").is_empty())
        .filter_map(|i| i["name"].as_str())
        .filter(|n| plain_link_name(n))
        .map(str::to_string)
        .collect()
}

/// A name the kernel could give an interface, and not one of `conf`'s own entries.
fn plain_link_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 16
        && !matches!(name, "." | ".." | "all" | "default")
        && !name.contains(['/', ':'])
        && !name.chars().any(char::is_whitespace)
}

/// Writes a sysctl file that must exist (never creating one).
fn write_sysctl(path: &Path, value: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(value)
}

/// Turns on strict reverse-path filtering for every host link of network `net`'s `result`,
/// under `conf` ([`IPV4_CONF`] outside tests). A link that is already gone has nothing to
/// protect. Returns a warning when `conf/all` makes the check loose.
pub fn protect(conf: &Path, net: &str, result: &Value) -> Result<Option<String>, RpFilterError> {
    let links = host_links(result);
    for link in &links {
        let path = conf.join(link).join("rp_filter");
        match write_sysctl(&path, b"1") {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(source) => {
                return Err(RpFilterError {
                    net: net.to_string(),
                    link: link.clone(),
                    path,
                    source,
                })
            }
        }
    }
    let all = conf.join("all").join("rp_filter");
    let loose = std::fs::read_to_string(&all).is_ok_and(|v| v.trim() == "2");
    Ok((loose && !links.is_empty()).then(|| {
        format!(
            "{} is 2 (loose) and the kernel takes the larger of it and a link's value: pods on \
             network {net:?} can send with other pods' addresses (set it to 0 or 1 for rkt's \
             strict check)",
            all.display()
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_conf(links: &[&str], all: &str) -> tempfile::TempDir {
        let conf = tempfile::tempdir().unwrap();
        for l in links.iter().chain(&["all"]) {
            std::fs::create_dir_all(conf.path().join(l)).unwrap();
            std::fs::write(conf.path().join(l).join("rp_filter"), "0").unwrap();
        }
        std::fs::write(conf.path().join("all/rp_filter"), all).unwrap();
        conf
    }

    fn ptp_result(host: &str) -> Value {
        serde_json::json!({"interfaces": [
            {"name": host, "mac": "aa:bb:cc:dd:ee:ff"},
            {"name": "eth0", "mac": "aa:bb:cc:dd:ee:00", "sandbox": "/run/netns/x"}
        ]})
    }

    #[test]
    fn the_host_side_of_the_pods_link_gets_strict_filtering_and_nothing_else() {
        let conf = fake_conf(&["veth1234", "eth0"], "0");
        let warning = protect(conf.path(), "default", &ptp_result("veth1234")).unwrap();
        assert_eq!(warning, None);
        let read = |l: &str| std::fs::read_to_string(conf.path().join(l).join("rp_filter"));
        assert_eq!(read("veth1234").unwrap(), "1");
        // The pod's side (in its namespace) and the host's own settings stay as they were.
        assert_eq!(read("eth0").unwrap(), "0");
        assert_eq!(read("all").unwrap(), "0");
        // A link already gone is fine; no host link, no warning.
        protect(conf.path(), "default", &ptp_result("vethgone")).unwrap();
        assert!(!conf.path().join("vethgone").exists());
    }

    #[test]
    fn names_that_are_not_plain_links_are_never_written() {
        let conf = fake_conf(&[], "0");
        for bad in [
            "all",
            "default",
            "..",
            "../all",
            "a/b",
            "",
            "0123456789abcdef",
        ] {
            assert!(host_links(&ptp_result(bad)).is_empty(), "{bad:?}");
            protect(conf.path(), "default", &ptp_result(bad)).unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(conf.path().join("all/rp_filter")).unwrap(),
            "0"
        );
    }

    #[test]
    fn a_loose_host_wide_setting_is_reported_and_left_alone() {
        let conf = fake_conf(&["veth9"], "2");
        let warning = protect(conf.path(), "default", &ptp_result("veth9"))
            .unwrap()
            .unwrap();
        assert!(warning.contains("all/rp_filter is 2") && warning.contains("\"default\""));
        assert_eq!(
            std::fs::read_to_string(conf.path().join("all/rp_filter")).unwrap(),
            "2"
        );
    }

    #[test]
    fn a_link_that_cannot_be_written_is_an_error_naming_network_and_link() {
        let conf = fake_conf(&[], "0");
        // A directory where the file should be: the write fails with something else than
        // "not found".
        std::fs::create_dir_all(conf.path().join("veth7/rp_filter")).unwrap();
        let e = protect(conf.path(), "default", &ptp_result("veth7"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"default\"") && e.contains("veth7"), "{e}");
    }
}
