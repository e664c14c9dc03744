//! The crate's import graph has no cycles, by the workspace's one checker,
//! `tools/import_graph.rs`, and its layers hold: the SPDY core (headers, frames, session)
//! knows nothing of HTTP, Kubernetes, WebSocket or blocking I/O.

#[path = "../../../tools/import_graph.rs"]
mod import_graph;

use import_graph::Graph;
use std::path::Path;

#[test]
fn spdy_has_no_import_cycles_and_a_sans_io_core() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let g = Graph::load(&root).unwrap();
    assert!(g.modules.len() >= 7, "{:?}", g.modules.keys());
    let edges = g.edges();
    for expected in [
        ("frame", "headers"),
        ("session", "frame"),
        ("blocking", "session"),
    ] {
        assert!(
            edges.contains_key(&(expected.0.into(), expected.1.into())),
            "the graph misses {expected:?}: {:?}",
            edges.keys()
        );
    }
    for (from, to) in edges.keys() {
        let core = ["headers", "frame", "session"].contains(&from.as_str());
        let edge = ["http", "k8s", "websocket", "blocking"].contains(&to.as_str());
        assert!(!(core && edge), "{from} imports {to}");
    }
    import_graph::assert_acyclic(&root);
}
