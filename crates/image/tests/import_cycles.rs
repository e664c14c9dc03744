//! The crate's import graph has no cycles, between rooms or between files, by the workspace's
//! one checker, `tools/import_graph.rs` (a `mod.rs` re-exporting its children is no edge).
//! The checker itself is tested in `crates/cni/tests/import_cycles.rs`.

#[path = "../../../tools/import_graph.rs"]
mod import_graph;

use import_graph::Graph;
use std::path::Path;

#[test]
fn image_has_no_import_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let g = Graph::load(&root).unwrap();
    assert!(g.modules.len() > 15, "{:?}", g.modules.keys());
    let edges = g.edges();
    // The layering the crate is built on: a stored image's layers are walked above the
    // store and the stream unpacker, gc above the store and the layers.
    for (from, to) in [
        ("layers", "unpack::layer"),
        ("layers", "store"),
        ("unpack::stored", "store"),
        ("gc", "layers"),
        ("gc", "store"),
    ] {
        assert!(
            edges.contains_key(&(from.into(), to.into())),
            "the graph misses {from} -> {to}: {:?}",
            edges.keys()
        );
    }
    // The stream unpacker knows no store, and the store knows neither unpacking nor gc.
    for (from, to) in edges.keys() {
        assert!(
            !(from == "unpack::layer" && to == "store"),
            "unpack/layer.rs imports the store"
        );
        assert!(
            !(from == "store" && (to.starts_with("unpack") || to == "layers" || to == "gc")),
            "store.rs imports {to}"
        );
    }
    import_graph::assert_acyclic(&root);
}
