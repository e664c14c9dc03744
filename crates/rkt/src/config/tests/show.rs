//! The JSON of `rkt config`, with and without origins.

use std::path::PathBuf;

use serde_json::json;

use crate::config::{stage0_json, EffectiveDirs, Origin, Value};

fn sample() -> EffectiveDirs {
    EffectiveDirs {
        data: Value::new(PathBuf::from("/d"), Origin::Flag("--dir")),
        stage1_images: Value::defaulted(PathBuf::from("/s")),
        net_conf: Value::new(
            PathBuf::from("/c"),
            Origin::File(PathBuf::from("/etc/rkt/paths.d/n.json")),
        ),
        net_plugin: vec![
            Value::defaulted(PathBuf::from("/p1")),
            Value::defaulted(PathBuf::from("/p2")),
        ],
        builtin_plugin_dirs: vec![PathBuf::from("/usr/lib/cni")],
        net_operations: Value::new(4, Origin::Env("RKT_NET_OPERATIONS")),
    }
}

#[test]
fn plain_output_has_rkt_shape() {
    assert_eq!(
        stage0_json(&sample(), false),
        json!({"stage0": [{
            "rktKind": "paths",
            "rktVersion": "v1",
            "data": "/d",
            "stage1-images": "/s",
            "net-conf": "/c",
            "net-plugin": ["/p1", "/p2"],
            "net-operations": 4,
        }]})
    );
}

#[test]
fn show_origin_adds_origins_and_builtin_plugin_dirs() {
    let json = stage0_json(&sample(), true);
    let entry = &json["stage0"][0];
    assert_eq!(
        entry["origins"],
        json!({
            "data": "flag --dir",
            "stage1-images": "default",
            "net-conf": "/etc/rkt/paths.d/n.json",
            "net-plugin": "default",
            "net-operations": "environment $RKT_NET_OPERATIONS",
        })
    );
    assert_eq!(entry["net-plugin-builtin"], json!(["/usr/lib/cni"]));
    assert_eq!(entry["net-plugin"], json!(["/p1", "/p2"]));
}
