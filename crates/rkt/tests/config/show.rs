//! `rkt config` and `rkt config --show-origin`: the merged paths configuration in rkt's
//! JSON shape, after layering and flags, with origins on request.

use crate::support;

use serde_json::json;

use support::config_tree::{paths_file, ConfigTree};
use support::rkt;

const BUILTIN: [&str; 3] = ["/usr/lib/cni", "/usr/libexec/cni", "/opt/cni/bin"];

#[test]
fn defaults_in_rkt_shape() {
    let tree = ConfigTree::new();
    let local = tree.layer("local");
    let out = rkt(&["config"]).args(&tree.flags()).run();
    out.assert_success();
    assert_eq!(
        out.json(),
        json!({"stage0": [{
            "rktKind": "paths",
            "rktVersion": "v1",
            "data": "/var/lib/rkt",
            "stage1-images": "/usr/lib/rkt/stage1-images",
            "net-conf": local.join("net.d"),
            "net-plugin": [local.join("net.d"), "/usr/lib/rkt/plugins/net"],
            "net-operations": std::thread::available_parallelism().unwrap().get(),
        }]})
    );
}

/// `net-operations` (network operations at once on the host): the environment wins over
/// the configuration, and each says where it came from; bad values name their source.
#[test]
fn net_operations_from_the_configuration_and_the_environment() {
    let tree = ConfigTree::new();
    let file = tree.write("local", "ops.json", &paths_file(r#""net-operations":7"#));
    let out = rkt(&["config", "--show-origin"]).args(&tree.flags()).run();
    out.assert_success();
    let entry = &out.json()["stage0"][0];
    assert_eq!(entry["net-operations"], json!(7));
    assert_eq!(entry["origins"]["net-operations"], json!(file));

    let out = rkt(&["config", "--show-origin"])
        .args(&tree.flags())
        .env("RKT_NET_OPERATIONS", "3")
        .run();
    out.assert_success();
    let entry = &out.json()["stage0"][0];
    assert_eq!(entry["net-operations"], json!(3));
    assert_eq!(
        entry["origins"]["net-operations"],
        json!("environment $RKT_NET_OPERATIONS")
    );

    rkt(&["config"])
        .args(&tree.flags())
        .env("RKT_NET_OPERATIONS", "0")
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("RKT_NET_OPERATIONS");
    tree.write(
        "user",
        "ops.json",
        &paths_file(r#""net-operations":"many""#),
    );
    rkt(&["config"])
        .args(&tree.flags())
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("net-operations");
}

#[test]
fn layered_values_and_their_origins() {
    let tree = ConfigTree::new();
    let conf = tree.mkdir("conf");
    let local_conf = tree.mkdir("local-conf");
    let plugins = [tree.mkdir("p1"), tree.mkdir("p2")];
    let system = tree.write(
        "system",
        "10-paths.json",
        &paths_file(&format!(
            r#""data":"/srv/rkt","net-conf":"{}""#,
            local_conf.display()
        )),
    );
    let local = tree.write(
        "local",
        "net.json",
        &paths_file(&format!(r#""net-conf":"{}""#, conf.display())),
    );
    let user = tree.write(
        "user",
        "plugins.json",
        &serde_json::to_string(&json!({
            "rktKind": "paths", "rktVersion": "v1", "net-plugin": plugins,
        }))
        .unwrap(),
    );

    let out = rkt(&["config", "--show-origin"]).args(&tree.flags()).run();
    out.assert_success();
    let json = out.json();
    let entry = &json["stage0"][0];
    assert_eq!(entry["data"], json!("/srv/rkt"));
    assert_eq!(entry["net-conf"], json!(conf));
    assert_eq!(entry["net-plugin"], json!(plugins));
    assert_eq!(
        entry["origins"],
        json!({
            "data": system,
            "stage1-images": "default",
            "net-conf": local,
            "net-plugin": user,
            "net-operations": "default",
        })
    );
    for dir in entry["net-plugin-builtin"].as_array().expect("an array") {
        assert!(BUILTIN.contains(&dir.as_str().unwrap()), "{dir}");
    }

    // Without --show-origin there are no origins.
    let plain = rkt(&["config"]).args(&tree.flags()).run().json();
    assert!(plain["stage0"][0].get("origins").is_none());
    assert!(plain["stage0"][0].get("net-plugin-builtin").is_none());
}

#[test]
fn flags_win_and_say_so() {
    let tree = ConfigTree::new();
    tree.write("local", "all.json", &paths_file(r#""data":"/from-file""#));
    let conf = tree.mkdir("work/conf");
    let [a, b, c] = ["work/a", "work/b", "c"].map(|dir| tree.mkdir(dir));
    // Global options after the subcommand; relative paths against the current directory;
    // a repeated --net-plugin-dir whose first value is a ':'-list.
    let out = rkt(&[
        "config",
        "--show-origin",
        "--dir",
        "data",
        "--net-conf-dir",
        "conf",
    ])
    .args(&["--net-plugin-dir", "a:b", "--net-plugin-dir"])
    .args(&[&c])
    .args(&tree.flags())
    .current_dir(&tree.root().join("work"))
    .run();
    out.assert_success();
    let json = out.json();
    let entry = &json["stage0"][0];
    assert_eq!(entry["data"], json!(tree.root().join("work/data")));
    assert_eq!(entry["net-conf"], json!(conf));
    assert_eq!(entry["net-plugin"], json!([a, b, c]));
    assert_eq!(entry["origins"]["data"], json!("flag --dir"));
    assert_eq!(entry["origins"]["net-conf"], json!("flag --net-conf-dir"));
    assert_eq!(
        entry["origins"]["net-plugin"],
        json!("flag --net-plugin-dir")
    );
}

#[test]
fn global_options_work_before_the_subcommand() {
    let tree = ConfigTree::new();
    let out = rkt(&["--dir", "/tmp/rkt-data-before"])
        .args(&tree.flags())
        .args(&["config"])
        .run();
    out.assert_success();
    assert_eq!(
        out.json()["stage0"][0]["data"],
        json!("/tmp/rkt-data-before")
    );
}

#[test]
fn debug_shows_the_effective_directories() {
    let tree = ConfigTree::new();
    rkt(&["config", "--debug"])
        .args(&tree.flags())
        .run()
        .assert_success()
        .assert_stderr_contains("rkt: debug: data dir /var/lib/rkt (default)");
}

/// The registry credentials of auth.d are shown, one `dockerAuth` entry per registry with
/// the user and (with --show-origin) the file that wins, the password masked: the password
/// never appears in the output, with or without --show-origin.
#[test]
fn docker_auth_credentials_are_shown_with_the_password_masked() {
    let tree = ConfigTree::new();
    let auth = |layer: &str, name: &str, registries: &[&str], user: &str, password: &str| {
        let dir = tree.layer(layer).join("auth.d");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(name);
        std::fs::write(
            &file,
            json!({"rktKind": "dockerAuth", "rktVersion": "v1", "registries": registries,
                   "credentials": {"user": user, "password": password}})
            .to_string(),
        )
        .unwrap();
        file
    };
    auth(
        "system",
        "a.json",
        &["registry.example:5000", "other.example"],
        "sys",
        "sYsTeM-SeCrEt",
    );
    let user_file = auth(
        "user",
        "b.json",
        &["registry.example:5000"],
        "me",
        "uSeR-SeCrEt-42",
    );

    for show in [true, false] {
        let mut args = vec!["config"];
        if show {
            args.push("--show-origin");
        }
        let out = rkt(&args).args(&tree.flags()).run();
        out.assert_success();
        for secret in ["sYsTeM-SeCrEt", "uSeR-SeCrEt-42"] {
            assert!(
                !out.stdout().contains(secret) && !out.stderr().contains(secret),
                "the password {secret} was printed"
            );
        }
        let json = out.json();
        let stage0 = json["stage0"].as_array().unwrap();
        assert_eq!(stage0[0]["rktKind"], "paths");
        let mut registry = json!({
            "rktKind": "dockerAuth", "rktVersion": "v1",
            "registries": ["registry.example:5000"],
            "credentials": {"user": "me", "password": "********"},
        });
        let mut other = json!({
            "rktKind": "dockerAuth", "rktVersion": "v1",
            "registries": ["other.example"],
            "credentials": {"user": "sys", "password": "********"},
        });
        if show {
            registry["origin"] = json!(user_file);
            other["origin"] = json!(tree.layer("system").join("auth.d/a.json"));
        }
        assert_eq!(stage0[1..], [other, registry]);
    }
}
