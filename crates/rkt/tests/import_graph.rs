//! The import graph of `crates/rkt` (library and binary) has no cycles, between rooms or
//! between files (`crates/cni/tests/import_cycles.rs` checks `crates/cni`); the checker,
//! `tools/import_graph.rs`, is tested here on a small crate. When this test fails it names
//! the modules in the cycle and the references that make it; see docs/ARCHITECTURE.md for
//! which room may take what from which.

#[path = "../../../tools/import_graph.rs"]
mod import_graph;

use import_graph::{assert_acyclic, Graph};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

#[test]
fn rkt_library_has_no_import_cycles() {
    assert_acyclic(&crate_dir().join("src/lib.rs"));
}

#[test]
fn rkt_binary_has_no_import_cycles() {
    assert_acyclic(&crate_dir().join("src/main.rs"));
}

/// docs/ARCHITECTURE.md's table of rooms is the law: every room of the library has a row,
/// a room takes only from the rooms its row names, and those rows are below its own.
#[test]
fn rooms_take_only_from_the_rooms_below_them() {
    let doc = std::fs::read_to_string(crate_dir().join("../../docs/ARCHITECTURE.md")).unwrap();
    let rooms = rooms_table(&doc);
    let graph = Graph::load(&crate_dir().join("src/lib.rs")).unwrap();
    let room_of = |m: &str| m.split("::").next().unwrap_or("").to_string();
    let mut wrong = Vec::new();
    let order: Vec<&String> = rooms.iter().map(|(room, _)| room).collect();
    let table: BTreeMap<&String, &BTreeSet<String>> = rooms.iter().map(|(r, t)| (r, t)).collect();
    for (row, (room, takes)) in rooms.iter().enumerate() {
        for taken in takes {
            match order.iter().position(|r| *r == taken) {
                Some(at) if at > row => {}
                _ => wrong.push(format!(
                    "row {room} takes {taken}, which is not a row below it"
                )),
            }
        }
    }
    for module in graph
        .modules
        .keys()
        .filter(|m| !m.is_empty() && !m.contains("::"))
    {
        if !table.contains_key(module) {
            wrong.push(format!("room {module} has no row in the table"));
        }
    }
    // What a room's paths name (`crate::pod::App`), and where that is defined (`podstore`,
    // when `pod` re-exports it): both must be rooms its row names.
    let mut taken: BTreeMap<(String, String), Vec<String>> = graph.named_rooms();
    for ((from, to), why) in graph.edges() {
        let (a, b) = (room_of(&from), room_of(&to));
        if a != b && !a.is_empty() && !b.is_empty() {
            taken.entry((a, b)).or_default().extend(why);
        }
    }
    for ((a, b), why) in taken {
        if !table.get(&a).is_some_and(|takes| takes.contains(&b)) {
            for w in why {
                wrong.push(format!(
                    "{a} takes from {b}, which its row does not name: {w}"
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/ARCHITECTURE.md's rooms table and the code disagree:\n{}",
        wrong.join("\n")
    );
}

/// The rows of the table in "The rooms of `crates/rkt`": each room (a row may name several)
/// with the rooms it takes from, top to bottom; the binary's row (`cli/`) is left out.
fn rooms_table(doc: &str) -> Vec<(String, BTreeSet<String>)> {
    let section = doc
        .split("## The rooms of `crates/rkt`")
        .nth(1)
        .expect("ARCHITECTURE.md has the rooms section");
    let names = |cell: &str| -> Vec<String> {
        // Parenthesised remarks are no rooms.
        let mut plain = String::new();
        let mut depth = 0;
        for c in cell.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ if depth == 0 => plain.push(c),
                _ => {}
            }
        }
        plain
            .split('`')
            .skip(1)
            .step_by(2)
            .map(|n| n.trim_end_matches('/').trim_end_matches(".rs").to_string())
            .collect()
    };
    let mut rows = Vec::new();
    for line in section.lines().skip_while(|l| !l.starts_with('|')) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').collect();
        if cells.len() != 3 || cells[0].contains("binary") || !cells[0].contains('`') {
            continue;
        }
        let takes: BTreeSet<String> = names(cells[2]).into_iter().collect();
        for room in names(cells[0]) {
            rows.push((room, takes.clone()));
        }
    }
    assert!(rows.len() > 10, "found only {} rows of rooms", rows.len());
    rows
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
    // The rooms a path names, as written, whatever it resolves to.
    let named = graph.named_rooms();
    assert_eq!(
        named[&("pod".to_string(), "net".to_string())],
        ["pod/state.rs:3 (crate::net::NetInfo)"]
    );
    assert!(!named.keys().any(|(a, b)| a == b), "{named:?}");
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
