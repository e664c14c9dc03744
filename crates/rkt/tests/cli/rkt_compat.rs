//! rkt 1.30 compatibility of what scripts read: `status` text, `list` table, the JSON of
//! both (`--format=json|json-pretty`, rkt's API v1 names), `version`, what `rm` and `stop`
//! print, and `--user-annotation` / `--user-label`. Each test is named after the point it
//! holds and reads the output the way a script written for rkt 1.30 would. Tests that run
//! pods need root and skip otherwise, and end with the leak checker.

use crate::{leaks, pod_support, support};

use std::collections::BTreeMap;
use std::fs;
use std::process::Command;

use pod_support::World;
use serde_json::Value;

fn prepare(world: &World, args: &[&str]) -> String {
    let mut full = vec!["prepare"];
    full.extend_from_slice(args);
    let out = world.rkt(&full).run();
    out.assert_success();
    out.stdout().trim().to_string()
}

/// `rkt status` read as an orchestrator did: every line `key=value`, split at the first
/// `=`, into a map.
fn status_map(world: &World, uuid: &str, tz: &str) -> BTreeMap<String, String> {
    let out = world.rkt(&["status", uuid]).env("TZ", tz).run();
    out.assert_success();
    out.stdout()
        .lines()
        .map(|line| {
            let (k, v) = line
                .split_once('=')
                .unwrap_or_else(|| panic!("not key=value: {line:?}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// Whether `text` is Go's `2006-01-02 15:04:05.999 -0700 MST` (fraction optional, one to
/// three digits without trailing zeros) and ends with ` <offset> <zone>`.
fn is_go_layout(text: &str, offset: &str, zone: &str) -> bool {
    let suffix = format!(" {offset} {zone}");
    let Some(stamp) = text.strip_suffix(&suffix) else {
        return false;
    };
    let (whole, frac) = match stamp.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (stamp, None),
    };
    let shape_ok = whole.len() == 19
        && whole.char_indices().all(|(i, c)| match i {
            4 | 7 => c == '-',
            10 => c == ' ',
            13 | 16 => c == ':',
            _ => c.is_ascii_digit(),
        });
    let frac_ok = frac.is_none_or(|f| {
        (1..=3).contains(&f.len()) && f.chars().all(|c| c.is_ascii_digit()) && !f.ends_with('0')
    });
    shape_ok && frac_ok
}

/// Pipes `input` through the real `cut -f<field>`.
fn cut(input: &str, field: usize) -> Vec<String> {
    let out = test_kit::output_with_stdin(
        Command::new("cut").arg(format!("-f{field}")),
        input.as_bytes(),
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// Rewrites the pod's state record as gc and rm would have left it.
fn set_recorded_state(world: &World, uuid: &str, edit: impl FnOnce(&mut Value)) {
    let file = world.path(&format!("data/pods/{uuid}/state.json"));
    let mut st: Value = serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
    edit(&mut st);
    fs::write(&file, st.to_string()).unwrap();
}

#[test]
fn status_text_of_a_prepared_pod_is_rkts_state_and_created_only() {
    let world = World::new(support::RKT);
    let uuid = prepare(&world, &["--", "true"]);
    let out = world.rkt(&["status", &uuid]).run();
    out.assert_success();
    let text = out.stdout();
    let keys: Vec<&str> = text.lines().map(|l| l.split('=').next().unwrap()).collect();
    assert_eq!(keys, ["state", "created"], "{text}");
    assert!(text.starts_with("state=prepared\n"), "{text}");
}

#[test]
fn status_times_use_gos_layout_in_the_local_time_zone() {
    let world = World::new(support::RKT);
    let uuid = prepare(&world, &["--", "true"]);
    let utc = status_map(&world, &uuid, "UTC0");
    assert!(
        is_go_layout(&utc["created"], "+0000", "UTC"),
        "{:?}",
        utc["created"]
    );
    // A fixed zone without daylight saving, so the test does not depend on the date.
    let ist = status_map(&world, &uuid, "IST-5:30");
    assert!(
        is_go_layout(&ist["created"], "+0530", "IST"),
        "{:?}",
        ist["created"]
    );
}

#[test]
fn status_state_names_are_rkts_for_pods_marked_garbage() {
    let world = World::new(support::RKT);
    let never_ran = prepare(&world, &["--", "true"]);
    set_recorded_state(&world, &never_ran, |st| st["state"] = "garbage".into());
    assert_eq!(status_map(&world, &never_ran, "UTC0")["state"], "garbage");

    let ran = prepare(&world, &["--name=web", "--", "true"]);
    set_recorded_state(&world, &ran, |st| {
        st["state"] = "garbage".into();
        st["started"] = "2016-01-26T13:23:34.744Z".into();
        st["exited"] = "2016-01-26T13:24:00Z".into();
        st["exitStatus"] = 0.into();
        st["initPid"] = 16964.into();
    });
    let st = status_map(&world, &ran, "UTC0");
    assert_eq!(st["state"], "exited garbage");
    assert_eq!(st["started"], "2016-01-26 13:23:34.744 +0000 UTC");
    assert_eq!(st["pid"], "16964", "rkt printed pid= after exit too");
    assert_eq!(st["exited"], "true");
    assert_eq!(st["app-web"], "0");
}

#[test]
fn list_columns_are_rkts_and_cut_f_picks_each_one() {
    let world = World::new(support::RKT);
    let rootfs = world.path("root");
    fs::create_dir(&rootfs).unwrap();
    let host = prepare(&world, &["--name=web", "--", "true"]);
    let in_dir = prepare(
        &world,
        &[
            &format!("--rootfs={}", rootfs.display()),
            "--name=db",
            "--",
            "/bin/true",
        ],
    );
    let out = world.rkt(&["list"]).run();
    out.assert_success();
    let text = out.stdout();
    assert_eq!(
        text.lines().next().unwrap(),
        "UUID\tAPP\tIMAGE NAME\tSTATE\tCREATED\tSTARTED\tNETWORKS"
    );
    assert_eq!(cut(&text, 1), ["UUID", &host[..8], &in_dir[..8]]);
    assert_eq!(cut(&text, 2), ["APP", "web", "db"]);
    assert_eq!(
        cut(&text, 3),
        ["IMAGE NAME", "-", &rootfs.display().to_string()]
    );
    assert_eq!(cut(&text, 4), ["STATE", "prepared", "prepared"]);
    assert_eq!(cut(&text, 6), ["STARTED", "", ""], "never started");

    let full = world
        .rkt(&["list", "--full"])
        .env("TZ", "UTC0")
        .run()
        .stdout();
    assert_eq!(
        full.lines().next().unwrap(),
        "UUID\tAPP\tIMAGE NAME\tIMAGE ID\tSTATE\tCREATED\tSTARTED\tNETWORKS"
    );
    assert_eq!(cut(&full, 1), ["UUID", host.as_str(), in_dir.as_str()]);
    assert_eq!(cut(&full, 4), ["IMAGE ID", "-", "-"]);
    assert_eq!(cut(&full, 5), ["STATE", "prepared", "prepared"]);
    for created in &cut(&full, 6)[1..] {
        assert!(is_go_layout(created, "+0000", "UTC"), "{created:?}");
    }
}

#[test]
fn list_times_are_relative_as_rkt_printed_them() {
    let world = World::new(support::RKT);
    prepare(&world, &["--", "true"]);
    let text = world.rkt(&["list", "--no-legend"]).run().stdout();
    let created = &cut(&text, 5)[0];
    let fresh = created == "now"
        || created == "1 second ago"
        || created
            .strip_suffix(" seconds ago")
            .is_some_and(|n| n.parse::<u32>().is_ok());
    assert!(fresh, "{created:?}");
    let full = world
        .rkt(&["list", "--no-legend", "--full"])
        .env("TZ", "UTC0")
        .run()
        .stdout();
    let created = &cut(&full, 6)[0];
    assert!(is_go_layout(created, "+0000", "UTC"), "{created:?}");
}

#[test]
fn list_no_legend_drops_only_the_header() {
    let world = World::new(support::RKT);
    let uuid = prepare(&world, &["--", "true"]);
    let with = world.rkt(&["list"]).run().stdout();
    let without = world.rkt(&["list", "--no-legend"]).run().stdout();
    assert_eq!(
        with.lines().skip(1).collect::<Vec<_>>(),
        without.lines().collect::<Vec<_>>()
    );
    assert!(without.starts_with(&uuid[..8]));
}

#[test]
fn json_is_one_line_and_json_pretty_is_tab_indented() {
    let world = World::new(support::RKT);
    let uuid = prepare(&world, &["--", "true"]);
    for cmd in [vec!["status", uuid.as_str()], vec!["list"]] {
        let mut args = cmd.clone();
        args.push("--format=json");
        let one = world.rkt(&args).run();
        one.assert_success();
        assert_eq!(one.stdout().lines().count(), 1, "{}", one.stdout());
        let mut args = cmd.clone();
        args.push("--format=json-pretty");
        let pretty = world.rkt(&args).run();
        pretty.assert_success();
        let text = pretty.stdout();
        assert!(text.lines().count() > 3, "{text}");
        assert!(text.contains("\n\t"), "indented with tabs: {text}");
        assert!(!text.contains("\n "), "not with spaces: {text}");
        assert_eq!(one.json(), pretty.json());
    }
}

#[test]
fn list_json_is_null_without_pods() {
    let world = World::new(support::RKT);
    let out = world.rkt(&["list", "--format=json"]).run();
    out.assert_success();
    assert_eq!(out.stdout(), "null\n");
}

#[test]
fn status_and_list_json_use_rkts_api_v1_names_and_types() {
    let world = World::new(support::RKT);
    let uuid = prepare(&world, &["--name=web", "--", "true"]);
    let st = world.rkt(&["status", "--format=json", &uuid]).run().json();
    let list = world.rkt(&["list", "--format=json"]).run().json();
    assert_eq!(list, Value::Array(vec![st.clone()]));
    assert_eq!(st["name"], uuid.as_str());
    assert_eq!(st["state"], "prepared");
    assert_eq!(st["app_names"], serde_json::json!(["web"]));
    assert!(
        st["created_at"].as_i64().unwrap() > 1_600_000_000,
        "Unix seconds"
    );
    // omitempty in rkt: what a prepared pod does not have is left out, not null.
    for absent in ["started_at", "networks", "user_annotations", "user_labels"] {
        assert!(st.get(absent).is_none(), "{absent} in {st}");
    }
    let app = &st["apps"][0];
    assert_eq!(app["name"], "web");
    assert_eq!(app["state"], "created");
    assert!(
        app["created_at"].as_u64().unwrap() > 1_600_000_000_000_000_000,
        "nanoseconds"
    );
    assert_eq!(app["image_id"], "");
    for absent in ["exit_code", "started_at", "finished_at", "mounts"] {
        assert!(app.get(absent).is_none(), "{absent} in {app}");
    }
}

#[test]
fn version_prints_rkts_lines_first() {
    let out = support::rkt(&["version"]).run();
    out.assert_success();
    let text = out.stdout();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("rkt Version: "), "{text}");
    assert!(lines[1].starts_with("appc Version: "), "{text}");
    // This rkt's own version on a line of its own (issue 25).
    assert!(lines[2].starts_with("rkt-rs Version: "), "{text}");
    let features = lines[3].strip_prefix("Features: ").expect(&text);
    assert!(
        features
            .split(' ')
            .all(|f| f.starts_with('+') || f.starts_with('-')),
        "{features}"
    );
    assert!(text.contains("\nCNI Spec Version: "), "{text}");
}

#[test]
fn rm_prints_each_removed_pod_quoted_as_rkt() {
    let world = World::new(support::RKT);
    let a = prepare(&world, &["--", "true"]);
    let b = prepare(&world, &["--", "true"]);
    let out = world.rkt(&["rm", &a, &b]).run();
    out.assert_success();
    assert_eq!(out.stdout(), format!("\"{a}\"\n\"{b}\"\n"));
    let out = world.rkt(&["rm", &a]).run();
    out.assert_exit_code(254)
        .assert_stderr_contains("failed to remove one or more pods");
}

#[test]
fn stop_of_a_pod_that_never_ran_is_an_error() {
    let world = World::new(support::RKT);
    let uuid = prepare(&world, &["--", "true"]);
    world
        .rkt(&["stop", &uuid])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("is not running")
        .assert_stderr_contains("failed to stop 1 pod(s)");
}

#[test]
fn stop_prints_quoted_uuids_and_already_stopped_pods_as_rkt() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (running, index) = world.spawn_run(&["--net=none", "--", "sleep", "1000"]);
    let pid = world.wait_running(&running);
    let out = world.rkt(&["stop", &running]).run();
    out.assert_success();
    assert_eq!(out.stdout(), format!("\"{running}\"\n"));
    world.wait_child(index);
    let out = world.rkt(&["stop", &running]).run();
    out.assert_success();
    assert_eq!(
        out.stdout(),
        format!("pod \"{running}\" is already stopped\n")
    );
    // And status keeps the init's PID after the exit, as rkt did.
    let st = status_map(&world, &running, "UTC0");
    assert_eq!(st["pid"], pid.to_string());
    assert_eq!(st["exited"], "true");
    assert_eq!(st["networks"], "", "networks= is printed even when empty");
}

#[test]
fn user_annotations_and_labels_are_kept_and_shown_as_rkt() {
    let world = World::new(support::RKT);
    let uuid = prepare(
        &world,
        &[
            "--user-annotation=team=net",
            "--user-annotation=note=a=b",
            "--user-label=tier=front",
            "--",
            "true",
        ],
    );
    let st = status_map(&world, &uuid, "UTC0");
    assert_eq!(st["user-annotation-team"], "net");
    assert_eq!(st["user-annotation-note"], "a=b");
    assert_eq!(st["user-label-tier"], "front");
    let json = world.rkt(&["status", "--format=json", &uuid]).run().json();
    let app = &json["apps"][0];
    assert_eq!(
        app["user_annotations"],
        serde_json::json!({"note": "a=b", "team": "net"})
    );
    assert_eq!(app["user_labels"], serde_json::json!({"tier": "front"}));
    let list = world.rkt(&["list", "--format=json"]).run().json();
    assert_eq!(list[0]["apps"][0]["user_labels"]["tier"], "front");

    // A malformed one is a usage error, and no pod is created.
    world
        .rkt(&["prepare", "--user-label=novalue", "--", "true"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("--user-label=\"novalue\": expected KEY=VALUE");
    assert_eq!(world.pods(), [uuid]);
}

/// `rkt list | head -1`: when the reader stops early, rkt ends as rkt 1.30 did, killed by
/// SIGPIPE (status 141 in the shell), not with a panic message on stderr.
#[test]
fn list_into_a_reader_that_stops_early_ends_by_sigpipe_as_rkt() {
    let world = World::new(support::RKT);
    // Enough output (about 700 bytes per pod) to outlast the pipe's buffer.
    for _ in 0..200 {
        world.rkt(&["prepare", "--", "true"]).run().assert_success();
    }
    let rkt = world.command(&["list", "--format=json-pretty"]);
    let line = format!(
        "{} {} 2>stderr | head -c 10 > /dev/null; echo ${{PIPESTATUS[@]}}",
        rkt.get_program().to_string_lossy(),
        rkt.get_args()
            .map(|a| format!("'{}'", a.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let out = Command::new("bash")
        .args(["-c", &line])
        .current_dir(world.root.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "141 0");
    let stderr = fs::read_to_string(world.path("stderr")).unwrap();
    assert!(stderr.is_empty(), "{stderr}");
}

/// A shell script written against rkt 1.30's documented output, run unchanged: it parses
/// `status` with awk and sed, `list` with a tab field separator, and `rm`'s quoted UUID.
#[test]
fn a_script_written_for_rkt_1_30_runs_unchanged() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    // `rkt` on PATH: the binary under test in this world's directories.
    let base = world.command(&[]);
    let mut wrapper = format!("#!/bin/sh\nexec '{}'", base.get_program().to_string_lossy());
    for arg in base.get_args() {
        wrapper.push_str(&format!(" '{}'", arg.to_string_lossy()));
    }
    wrapper.push_str(" \"$@\"\n");
    let bin = world.path("bin");
    fs::create_dir(&bin).unwrap();
    fs::write(bin.join("rkt"), wrapper).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(bin.join("rkt"), fs::Permissions::from_mode(0o755)).unwrap();
    let script = r#"
set -euo pipefail
uuid=$(rkt prepare --name=job -- sh -c 'exit 3')
rkt run-prepared --net=none "$uuid" || test $? -eq 3
rkt status --wait "$uuid" > st
test "$(awk -F= '$1 == "state" {print $2}' st)" = exited
grep -x 'exited=true' st > /dev/null
test "$(sed -n 's/^app-job=//p' st)" = 3
test -n "$(sed -n 's/^pid=//p' st)"
grep '^networks=' st > /dev/null
short=$(echo "$uuid" | cut -c1-8)
test "$(rkt list --no-legend | awk -F'\t' -v u="$short" '$1 == u {print $2 "/" $4}')" = job/exited
test "$(rkt rm "$uuid" | tr -d '"')" = "$uuid"
"#;
    let path = std::env::var("PATH").unwrap_or_default();
    let out = Command::new("bash")
        .args(["-c", script])
        .current_dir(world.root.path())
        .env("PATH", format!("{}:{path}", bin.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(world.pods().is_empty());
}
