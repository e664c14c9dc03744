//! The import graph of `crates/rkt` (library and binary) has no cycles, between rooms or
//! between files (`crates/cni/tests/import_cycles.rs` checks `crates/cni`); the checker,
//! `tools/import_graph.rs`, is tested here on a small crate. When this test fails it names
//! the modules in the cycle and the references that make it; see docs/ARCHITECTURE.md for
//! which room may take what from which.

#[path = "../../../tools/import_graph.rs"]
mod import_graph;

use import_graph::{assert_acyclic, Graph};
use std::path::PathBuf;

#[test]
fn rkt_library_has_no_import_cycles() {
    assert_acyclic(&crate_dir().join("src/lib.rs"));
}

#[test]
fn rkt_binary_has_no_import_cycles() {
    assert_acyclic(&crate_dir().join("src/main.rs"));
}

/// The checker finds the kinds of cycle it is for, and leaves parents and children alone.
#[test]
fn cycles_between_rooms_and_between_files_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("lib.rs", "pub mod net;\npub mod pod;\npub mod trust;\n");
    write(
        "pod/mod.rs",
        "pub mod state;\npub mod store;\npub use store::is_uuid;\n",
    );
    write(
        "pod/state.rs",
        "// crate::trust::x in a comment is no edge\nuse super::store::Pod;\nuse crate::net::NetInfo;\nconst S: &str = \"crate::trust::x\";\n",
    );
    write(
        "pod/store.rs",
        "pub struct Pod;\npub fn is_uuid() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
    );
    write(
        "net/mod.rs",
        "pub mod error;\npub mod plan;\npub mod record;\npub use error::NetError;\npub use record::NetInfo;\nfn f() { plan::plan(); crate::trust::check(); }\n",
    );
    write("net/record.rs", "pub struct NetInfo;\n");
    write(
        "net/plan.rs",
        "use super::NetError;\npub fn plan() { let _ = crate::pod::is_uuid; }\n",
    );
    write(
        "net/error.rs",
        "pub enum NetError { Untrusted(crate::trust::TrustError) }\n",
    );
    write(
        "trust.rs",
        "pub struct TrustError;\npub fn check() { crate::net::plan::plan(); }\n",
    );
    let graph = Graph::load(&dir.path().join("lib.rs")).unwrap();
    let report = graph.cycles();
    // Rooms: pod -> net (state.rs), net -> pod (plan.rs); net <-> trust.
    assert!(report.contains("rooms net, pod, trust"), "{report}");
    assert!(
        report.contains("pod/state.rs:3 -> net/record.rs (crate::net::NetInfo)"),
        "{report}"
    );
    // Files: plan.rs -> error.rs (through the re-export) -> trust.rs -> plan.rs.
    assert!(
        report.contains("files net/error.rs, net/plan.rs, trust.rs"),
        "{report}"
    );
    assert!(
        report.contains("net/plan.rs:1 -> net/error.rs (super::NetError)"),
        "{report}"
    );
    // Comments, strings, a parent's calls into its children and a test module's
    // `super::*` make no edges.
    assert!(
        !report.contains("state.rs:1") && !report.contains("state.rs:4"),
        "{report}"
    );
    assert!(!report.contains("pod/store.rs:"), "{report}");
    assert!(!report.contains("net/mod.rs:6 -> net/plan.rs"), "{report}");

    // Without the two back references, nothing is reported.
    write("net/plan.rs", "use super::NetError;\npub fn plan() {}\n");
    write("trust.rs", "pub struct TrustError;\npub fn check() {}\n");
    let report = Graph::load(&dir.path().join("lib.rs")).unwrap().cycles();
    assert_eq!(report, "");
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}
