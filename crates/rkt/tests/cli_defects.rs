//! The command-line defects of issue 16, each tried as a user would through the binary: an
//! unknown option taken for the command, `--rootfs` pods without resolv.conf/hosts, a port
//! of a family the pod has no address of, `rkt net` disagreeing with `rkt run`, CNI_ARGS
//! that real plugins refuse, and the smaller ones. Tests that run pods need root (skipped
//! otherwise) and end with the leak checker.

mod leaks;
mod pod_support;
mod support;

use pod_support::World;

/// Issue 16, defect 1: a word starting with '-' before the command is a known option or a
/// usage error naming it; nothing is created and no plugin runs.
#[test]
fn unknown_or_misplaced_option_before_the_command_is_a_usage_error_and_creates_nothing() {
    let world = World::new();
    let _g = leaks::Guard::new(world.leak_ctx());
    let cases: &[(&[&str], &str)] = &[
        (&["run", "--bogus", "--net=none", "--", "true"], "--bogus"),
        (&["run", "--no-such=1", "--", "true"], "--no-such"),
        (&["prepare", "--bogus", "--", "true"], "--bogus"),
        (&["prepare", "--net=default", "--", "true"], "--net"),
        (&["prepare", "--port=8080:80", "--", "true"], "--port"),
        (&["prepare", "-q", "true"], "-q"),
    ];
    for (args, word) in cases {
        world
            .rkt(args)
            .run()
            .assert_failure()
            .assert_stderr_contains(&format!("'{word}'"));
        assert_eq!(
            world.pods(),
            Vec::<String>::new(),
            "rkt {args:?} made a pod"
        );
    }
}

/// Issue 16, defect 1: the command starts at `--` or at the first word that is not an
/// option; what follows it is the command's, even if it starts with '-'.
#[test]
fn unknown_or_misplaced_option_the_command_starts_at_double_dash_or_first_word() {
    let world = World::new();
    let out = world
        .rkt(&["prepare", "--name=a", "sh", "-c", "--debug"])
        .run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    let manifest = std::fs::read_to_string(world.path(&format!("data/pods/{uuid}/pod.json")))
        .unwrap_or_else(|e| panic!("pod {uuid}'s manifest: {e}"));
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    assert_eq!(
        manifest["app"]["exec"],
        serde_json::json!(["sh", "-c", "--debug"])
    );
    let out = world.rkt(&["prepare", "--", "--weird"]).run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    let manifest =
        std::fs::read_to_string(world.path(&format!("data/pods/{uuid}/pod.json"))).unwrap();
    assert!(manifest.contains("\"--weird\""), "{manifest}");
}
