//! The JSON `rkt config` prints: the effective `paths` configuration in rkt's shape,
//! `{"stage0":[{"rktKind":"paths","rktVersion":"v1",...}]}`, optionally with origins, and
//! the registry credentials of `auth.d` (`dockerAuth` entries) with their passwords masked.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value as Json};

use super::auth::DockerAuth;
use super::dirs::EffectiveDirs;

/// What `rkt config` shows instead of a password: never the password, nor its length.
pub const MASKED_PASSWORD: &str = "********";

/// One `dockerAuth` entry per registry, in rkt's shape (`registries`, `credentials` with
/// `user` and the password masked); with `show_origin`, `"origin"`: the file it came from.
pub fn docker_auth_json(auth: &BTreeMap<String, DockerAuth>, show_origin: bool) -> Vec<Json> {
    auth.iter()
        .map(|(registry, a)| {
            let mut entry = json!({
                "rktKind": "dockerAuth",
                "rktVersion": "v1",
                "registries": [registry],
                "credentials": {"user": a.user, "password": MASKED_PASSWORD},
            });
            if show_origin {
                entry["origin"] = json!(a.origin);
            }
            entry
        })
        .collect()
}

/// The effective directories as a `stage0` list with one `paths` entry.
///
/// With `show_origin`, the entry also holds `"origins"`, mapping each field to where its
/// value came from (`"default"`, a file's path, or `"flag --dir"`), and
/// `"net-plugin-builtin"`, the built-in plugin directories searched after `net-plugin`.
pub fn stage0_json(dirs: &EffectiveDirs, show_origin: bool) -> Json {
    let mut entry = Map::new();
    entry.insert("rktKind".into(), json!("paths"));
    entry.insert("rktVersion".into(), json!("v1"));
    entry.insert("data".into(), json!(dirs.data.value));
    entry.insert("stage1-images".into(), json!(dirs.stage1_images.value));
    entry.insert("net-conf".into(), json!(dirs.net_conf.value));
    let plugin_dirs: Vec<_> = dirs.net_plugin.iter().map(|dir| &dir.value).collect();
    entry.insert("net-plugin".into(), json!(plugin_dirs));
    entry.insert("net-operations".into(), json!(dirs.net_operations.value));
    if show_origin {
        // `net-plugin` is replaced as a whole by one layer, so all its entries share an
        // origin; should they ever differ, each is listed.
        let mut plugin_origins: Vec<String> = dirs
            .net_plugin
            .iter()
            .map(|dir| dir.origin.to_string())
            .collect();
        plugin_origins.dedup();
        let plugin_origin = match plugin_origins.as_slice() {
            [one] => json!(one),
            list => json!(list),
        };
        entry.insert(
            "origins".into(),
            json!({
                "data": dirs.data.origin.to_string(),
                "stage1-images": dirs.stage1_images.origin.to_string(),
                "net-conf": dirs.net_conf.origin.to_string(),
                "net-plugin": plugin_origin,
                "net-operations": dirs.net_operations.origin.to_string(),
            }),
        );
        entry.insert("net-plugin-builtin".into(), json!(dirs.builtin_plugin_dirs));
    }
    json!({ "stage0": [entry] })
}
