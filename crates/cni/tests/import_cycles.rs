//! The crate's import graph has no cycles: no file reaches, through `crate::`, `super::`
//! or `self::` paths, a file that reaches it back (the strict reading of
//! `tools/import_graph.rs`, where a `mod.rs` re-exporting its children counts too).
//! The checker itself is tested on a small crate written here.

#[path = "../../../tools/import_graph.rs"]
mod import_graph;

use std::path::Path;

#[test]
fn cni_has_no_import_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let g = import_graph::graph(&root).unwrap();
    assert!(g.modules.len() > 20, "{:?}", g.modules.keys());
    assert!(
        g.edges
            .iter()
            .any(|e| e.from == "api.rs" && e.to == "conf/mod.rs"),
        "the graph misses api.rs -> conf: {:?}",
        g.edges
    );
    let cycles = g.cycles();
    assert!(cycles.is_empty(), "{}", import_graph::report(&cycles));
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
    let g = import_graph::graph(&tmp.path().join("lib.rs")).unwrap();
    assert_eq!(g.modules.len(), 5, "{:?}", g.modules);
    let edges: Vec<(&str, &str)> = g
        .edges
        .iter()
        .map(|e| (e.from.as_str(), e.to.as_str()))
        .collect();
    assert_eq!(
        edges,
        [("a.rs", "b.rs"), ("a.rs", "c/mod.rs"), ("c/mod.rs", "a.rs")]
    );
    let cycles = g.cycles();
    assert_eq!(cycles.len(), 1);
    assert_eq!(cycles[0].0, ["a.rs", "c/mod.rs"]);
    let report = import_graph::report(&cycles);
    assert!(
        report.contains("c/mod.rs:2 -> a.rs (super::a::f)"),
        "{report}"
    );
}

#[test]
fn parent_to_child_edges_count_unless_lenient() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        &[
            ("lib.rs", "mod p;\n"),
            ("p/mod.rs", "mod q;\npub use self::q::Q;\npub struct E;\n"),
            ("p/q.rs", "use super::E;\npub struct Q(E);\n"),
        ],
    );
    let g = import_graph::graph(&tmp.path().join("lib.rs")).unwrap();
    assert_eq!(g.cycles().len(), 1, "{:?}", g.edges);
    assert!(g.without_parent_to_child().cycles().is_empty());
}
