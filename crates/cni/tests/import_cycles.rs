//! The crate's import graph has no cycles, between rooms or between files, by the workspace's
//! one checker, `tools/import_graph.rs` (a `mod.rs` re-exporting its children is no edge).
//! The checker's reading of use trees, comments, literals and `super` is tested here on a small
//! crate; `crates/rkt/tests/import_graph.rs` tests its rooms and re-exports.

#[path = "../../../tools/import_graph.rs"]
mod import_graph;

use import_graph::Graph;
use std::path::Path;

#[test]
fn cni_has_no_import_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let g = Graph::load(&root).unwrap();
    assert!(g.modules.len() > 20, "{:?}", g.modules.keys());
    assert!(
        g.edges().contains_key(&("api".into(), "conf".into())),
        "the graph misses api.rs -> conf: {:?}",
        g.edges().keys()
    );
    import_graph::assert_acyclic(&root);
}

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

#[test]
fn checker_finds_cycles_through_use_trees_code_paths_and_super() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        &[
            ("lib.rs", "pub mod a;\npub mod b;\nmod c;\n"),
            // A nested use tree and an alias.
            ("a.rs", "use crate::{b::{self as bee}, c};\npub fn f() {}\n"),
            // Comments, strings and a char literal that look like imports are not.
            (
                "b.rs",
                "// use crate::c;\nconst S: &str = \"crate::c::x\";\nconst C: char = '{';\npub fn g<'a>(x: &'a str) -> &'a str { x }\n",
            ),
            // A code path through `super` closes a -> c -> a.
            ("c/mod.rs", "mod d;\npub fn h() { super::a::f() }\n"),
            // An inline test module's `super` is its own file.
            (
                "c/d.rs",
                "pub fn k() {}\n#[cfg(test)]\nmod tests { use super::*; }\n",
            ),
        ],
    );
    let g = Graph::load(&tmp.path().join("lib.rs")).unwrap();
    assert_eq!(g.modules.len(), 5, "{:?}", g.modules.keys());
    let edges: Vec<(&str, &str)> = g
        .edges()
        .keys()
        .map(|(from, to)| (g.modules[from].file.as_str(), g.modules[to].file.as_str()))
        .collect();
    assert_eq!(
        edges,
        [("a.rs", "b.rs"), ("a.rs", "c/mod.rs"), ("c/mod.rs", "a.rs")]
    );
    let report = g.cycles();
    assert!(
        report.contains("cycle between files a.rs, c/mod.rs:"),
        "{report}"
    );
    assert!(
        report.contains("c/mod.rs:2 -> a.rs (super::a::f)"),
        "{report}"
    );
}

#[test]
fn a_parent_re_exporting_its_child_is_no_cycle() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        &[
            ("lib.rs", "mod p;\n"),
            ("p/mod.rs", "mod q;\npub use self::q::Q;\npub struct E;\n"),
            ("p/q.rs", "use super::E;\npub struct Q(E);\n"),
        ],
    );
    let g = Graph::load(&tmp.path().join("lib.rs")).unwrap();
    assert_eq!(g.cycles(), "", "{:?}", g.edges());
}
