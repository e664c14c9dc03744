//! The leak checker checked: it sees every kind of leftover it promises to see (planted by
//! hand here), attributes nothing of other tests to this one, and a real pod on real
//! plugins (ptp with masquerading, host-local) leaves nothing once it has exited.

use crate::leaks;

use std::fs;
use std::process::Command;

use leaks::lab::{stderr, Lab, RemoveHostLocal};
use leaks::{Ctx, Guard};
use test_kit::unique;

fn run(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Undoes the planted leaks even when the test fails.
struct Planted {
    netns: String,
    link: String,
    chain: String,
    rule: Vec<String>,
    hostlocal: std::path::PathBuf,
}

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .status();
        let _ = Command::new("ip")
            .args(["link", "del", &self.link])
            .status();
        let mut del = vec!["-w".to_string(), "-t".into(), "nat".into(), "-D".into()];
        del.extend(self.rule.iter().cloned());
        let _ = Command::new("iptables").args(&del).status();
        let _ = Command::new("iptables")
            .args(["-w", "-t", "nat", "-X", &self.chain])
            .status();
        let _ = fs::remove_dir_all(&self.hostlocal);
    }
}

#[test]
fn every_kind_of_leftover_is_seen_and_only_this_tests() {
    test_kit::require_root!();
    let data = tempfile::tempdir().unwrap();
    let uuid = uuid::Uuid::new_v4().to_string();
    let other = uuid::Uuid::new_v4().to_string();
    let net = format!("leakchk-{}", unique());
    let octet = 100 + (uuid.as_bytes()[0] as u32 % 100);
    let subnet = format!("10.253.{octet}.0/24");
    let ctx = Ctx::new(data.path())
        .network(&net)
        .subnet(&subnet)
        .container(&uuid);
    let guard = Guard::new(ctx);
    assert!(guard.leaked().is_empty(), "{:?}", guard.leaked());

    let chain = leaks::chain_name(&net, &uuid, "");
    let comment = format!("name: \"{net}\" id: \"{uuid}\"");
    let planted = Planted {
        netns: format!("rkt-{uuid}"),
        link: format!("lk{}", unique()),
        chain: chain.clone(),
        rule: vec![
            "POSTROUTING".into(),
            "-s".into(),
            format!("10.253.{octet}.7/32"),
            "-m".into(),
            "comment".into(),
            "--comment".into(),
            comment.clone(),
            "-j".into(),
            chain.clone(),
        ],
        hostlocal: std::path::Path::new("/var/lib/cni/networks").join(&net),
    };
    // Something of another test, which must not be reported.
    let other_ns = format!("rkt-{other}");
    run(&["ip", "netns", "add", &other_ns]);
    let _other = Planted {
        netns: other_ns,
        link: String::new(),
        chain: String::new(),
        rule: vec![],
        hostlocal: std::path::PathBuf::from("/nonexistent-leak-test"),
    };
    run(&["ip", "netns", "add", &planted.netns]);
    run(&["ip", "link", "add", &planted.link, "type", "bridge"]);
    run(&[
        "ip",
        "addr",
        "add",
        &format!("10.253.{octet}.1/24"),
        "dev",
        &planted.link,
    ]);
    run(&["ip", "link", "set", &planted.link, "up"]);
    run(&["iptables", "-w", "-t", "nat", "-N", &chain]);
    let mut add = vec!["iptables", "-w", "-t", "nat", "-A"];
    add.extend(planted.rule.iter().map(String::as_str));
    run(&add);
    fs::create_dir_all(&planted.hostlocal).unwrap();
    fs::write(
        planted.hostlocal.join(format!("10.253.{octet}.7")),
        format!("{uuid}\neth0"),
    )
    .unwrap();
    let pod = data.path().join("pods").join(&uuid);
    fs::create_dir_all(&pod).unwrap();
    fs::write(pod.join("state.json"), r#"{"state":"running"}"#).unwrap();
    fs::create_dir_all(data.path().join("cni/results")).unwrap();
    fs::write(
        data.path().join(format!("cni/results/{net}-{uuid}-eth0")),
        "{}",
    )
    .unwrap();

    let found = guard.leaked().join("\n");
    for needle in [
        format!("network namespace /run/netns/rkt-{uuid}"),
        format!("namespace bind mount /run/netns/rkt-{uuid}"),
        format!("host link {}", planted.link),
        format!("host address {} 10.253.{octet}.1/24", planted.link),
        format!("host route 10.253.{octet}.0/24"),
        format!("-N {chain}"),
        format!("--comment \"name: \\\"{net}\\\" id: \\\"{uuid}\\\"\""),
        format!("host-local reservation {}", planted.hostlocal.display()),
        format!("CNI cache entry {}", data.path().display()),
        format!("pod {uuid} is still running"),
    ] {
        assert!(found.contains(&needle), "not seen: {needle:?} in\n{found}");
    }
    assert!(!found.contains(&other), "another test's namespace: {found}");

    drop(planted);
    fs::remove_dir_all(data.path().join("pods")).unwrap();
    fs::remove_dir_all(data.path().join("cni")).unwrap();
    guard.check();
}

/// A pod on real plugins with masquerading: while it runs the checker sees its firewall
/// chain (so the chain-name formula matches the plugins'), its host veth address and its
/// lease; after it exited, nothing.
#[test]
fn a_real_pod_leaves_nothing_and_is_seen_while_it_runs() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.net("ptp");
    let octet = 100 + (lab.id.as_bytes()[0] as u32 % 100) + (lab.id.as_bytes()[1] as u32 % 50);
    let subnet = format!("10.254.{octet}.0/24");
    lab.conf(
        "10-ptp.conf",
        &serde_json::json!({
            "cniVersion": "1.0.0", "name": net, "type": "ptp", "ipMasq": true,
            "ipam": {"type": "host-local", "subnet": subnet}
        }),
    );
    let _hl = RemoveHostLocal(net.clone());
    let guard = Guard::new(lab.ctx(&[&net]).subnet(&subnet));
    let pod = lab.spawn(&[&format!("--net={net}"), "--", "/bin/sleep", "600"]);
    let uuid = pod.uuid.clone();
    lab.wait_running(&uuid);
    let running = guard.leaked().join("\n");
    assert!(
        running.contains(&leaks::chain_name(&net, &uuid, "")),
        "{running}"
    );
    assert!(
        running.contains(&format!("10.254.{octet}.1/32")),
        "{running}"
    );
    assert!(running.contains("host-local reservation"), "{running}");
    assert!(
        running.contains(&format!("/run/netns/rkt-{uuid}")),
        "{running}"
    );
    let stop = lab.output(&["stop", &uuid]);
    assert_eq!(stop.status.code(), Some(0), "{}", stderr(&stop));
    let out = pod.wait();
    assert_ne!(out.status.code(), Some(254), "{}", stderr(&out));
    guard.check();
}
