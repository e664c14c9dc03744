//! The crate's import graph has no cycles, by the workspace's one checker,
//! `tools/import_graph.rs`, and its modules keep their layering: resolution and the `*at`
//! calls know nothing of mounts.

#[path = "../../../tools/import_graph.rs"]
mod import_graph;

use import_graph::Graph;
use std::path::Path;

#[test]
fn beneath_has_no_import_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let g = Graph::load(&root).unwrap();
    assert!(g.modules.len() >= 5, "{:?}", g.modules.keys());
    let edges = g.edges();
    assert!(
        edges.contains_key(&("at".into(), "resolve".into())),
        "the graph misses at -> resolve: {:?}",
        edges.keys()
    );
    for (from, to) in edges.keys() {
        assert!(
            !(["at", "resolve", "xattr"].contains(&from.as_str()) && to.starts_with("mount")),
            "{from} imports {to}"
        );
    }
    import_graph::assert_acyclic(&root);
}
