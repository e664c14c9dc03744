//! The apps of `rkt run` and `rkt prepare`: rkt's grammar for pods of several apps.
//!
//! `rkt run [POD AND FIRST APP OPTIONS] APP [APP OPTIONS] [-- ARGS] [--- [APP OPTIONS] APP
//! [APP OPTIONS] [-- ARGS]]…`. The word `---` always separates apps. Each APP is chosen as
//! for a pod of one app: an image (a transport, an image ID or a stored name), else a host
//! command (absolute paths are never images). App options may come before the APP, and
//! after an image (rkt's place for them, up to `--`); after a host command every word is
//! its argument, so a host command's options come before it: `--- --name=web
//! /usr/bin/python3 -m http.server`. The pod options (networks, DNS, ports, `--memory`,
//! `--cpu`, `--pids-limit`, `--private-users`, `--ipc`, `--exit-policy`) come before the
//! first app; given to a later app they are an error naming them. `--set-env` and
//! `--set-env-file` before the first `---` are every app's (rkt's rule), under a later
//! app's own.

use std::ffi::OsString;
use std::path::Path;

use anyhow::{bail, Context};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, ValueEnum};

use rkt::isolation::cgroups::{self, Limits};
use rkt::pod::{App, ExitPolicy, PodSpec};

use super::pod_args::AppArgs;
use super::GlobalArgs;

/// The word that separates apps.
pub const SEPARATOR: &str = "---";

/// The most apps a pod may have.
pub const MAX_APPS: usize = rkt::stage::signals::MAX_TARGETS;

/// `--exit-policy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum ExitPolicyArg {
    /// Stop the pod when an app fails (the others get SIGTERM, then SIGKILL after 10 s);
    /// exit with its status, or 0 when every app succeeded (rkt's behaviour).
    #[default]
    #[value(name = "onAnyFailure")]
    OnAnyFailure,
    /// Stop the pod when any app exits; exit with that app's status.
    #[value(name = "onAny")]
    OnAny,
    /// Run until every app has exited; exit with the first failure's status, or 0.
    #[value(name = "untilAll")]
    UntilAll,
}

impl From<ExitPolicyArg> for ExitPolicy {
    fn from(arg: ExitPolicyArg) -> ExitPolicy {
        match arg {
            ExitPolicyArg::OnAnyFailure => ExitPolicy::OnAnyFailure,
            ExitPolicyArg::OnAny => ExitPolicy::OnAny,
            ExitPolicyArg::UntilAll => ExitPolicy::UntilAll,
        }
    }
}

/// The pod options about its apps.
#[derive(Debug, Clone, Args)]
pub struct PodAppsArgs {
    /// When a pod of several apps ends.
    #[arg(long, value_enum, default_value_t, help_heading = "Pod")]
    pub exit_policy: ExitPolicyArg,
}

/// An app after `---`: the app options and the APP.
#[derive(Debug, Parser)]
#[command(name = "---", no_binary_name = true, disable_help_flag = true)]
struct LaterApp {
    #[command(flatten)]
    app: AppArgs,
}

/// App options that are the pod's: only the first app's count.
const POD_WIDE: [(&str, &str); 3] = [
    ("ipc", "--ipc"),
    ("pids_limit", "--pids-limit"),
    ("private_users", "--private-users"),
];

/// The pod `first` describes: its app, and the apps after each `---` in its command.
pub fn pod_spec(
    global: &GlobalArgs,
    data: &Path,
    first: &AppArgs,
    apps: &PodAppsArgs,
) -> anyhow::Result<PodSpec> {
    let mut segments = first.command.split(|w| w == SEPARATOR);
    let head = segments.next().unwrap_or_default();
    if head.is_empty() {
        bail!("{SEPARATOR} separates apps, but there is no app before the first {SEPARATOR}");
    }
    let first_app = AppArgs {
        command: head.to_vec(),
        ..first.clone()
    };
    let mut app = super::image_app::app(global, data, &first_app)?;
    app.isolators.own_limits = own_limits(&first.own_after_image)?;
    let mut list = vec![app];
    // rkt's --set-env and --set-env-file are the pod's: every app has them, under its own.
    let pod_env = first.set_env_vars()?;
    for (n, words) in segments.enumerate() {
        let which = n + 2;
        let mut app = later_app(global, data, words)
            .with_context(|| format!("app {which} (after {SEPARATOR} number {})", n + 1))?;
        app.env.splice(0..0, pod_env.iter().cloned());
        // A later app's --memory, --cpu and --cpu-shares are its own.
        let given = &mut app.isolators.limits;
        app.isolators.own_limits = Limits {
            memory: given.memory.take(),
            cpu_millis: given.cpu_millis.take(),
            cpu_shares: given.cpu_shares.take(),
            pids: None,
        };
        list.push(app);
    }
    check_names(&list)?;
    if list.len() > MAX_APPS {
        bail!("a pod runs at most {MAX_APPS} apps, {} given", list.len());
    }
    Ok(PodSpec {
        apps: list,
        exit_policy: apps.exit_policy.into(),
        volumes: Vec::new(),
        sandbox: None,
        meta: Default::default(),
        cgroup_parent: None,
        ports: Vec::new(),
    })
}

/// The flags that, after the first app's image, are that app's own (rkt 1.30's per-app
/// isolators) where before it they are the pod's.
const APP_OWN: [&str; 3] = ["--memory", "--cpu", "--cpu-shares"];

/// Of the `words` that follow the first app's image, those to move before it, and the
/// app's own flags ([`APP_OWN`]), each as `--flag=value` (a flag without its value stays
/// with the others, for clap to report).
pub fn take_app_own(words: &[String]) -> (Vec<String>, Vec<String>) {
    let (mut moved, mut own) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < words.len() {
        let word = &words[i];
        let (flag, value) = match word.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (word.as_str(), words.get(i + 1).cloned()),
        };
        match (APP_OWN.contains(&flag), value) {
            (true, Some(value)) => {
                if !word.contains('=') {
                    i += 1;
                }
                own.push(format!("{flag}={value}"));
            }
            _ => moved.push(word.clone()),
        }
        i += 1;
    }
    (moved, own)
}

/// The first app's own limits, from the `--flag=value` words [`take_app_own`] kept.
fn own_limits(words: &[String]) -> anyhow::Result<Limits> {
    let mut limits = Limits::default();
    for word in words {
        let (flag, value) = word.split_once('=').unwrap_or((word, ""));
        let again = match flag {
            "--memory" => limits
                .memory
                .replace(cgroups::parse_memory(value)?)
                .is_some(),
            "--cpu" => limits
                .cpu_millis
                .replace(cgroups::parse_cpu(value)?)
                .is_some(),
            _ => limits
                .cpu_shares
                .replace(cgroups::parse_cpu_shares(value)?)
                .is_some(),
        };
        if again {
            bail!("{flag} is given twice after the image");
        }
    }
    Ok(limits)
}

/// One app after `---`, from its words.
fn later_app(global: &GlobalArgs, data: &Path, words: &[String]) -> anyhow::Result<App> {
    if words.is_empty() {
        bail!("{SEPARATOR} must be followed by an app");
    }
    let words = hoist_image_options(data, words)?;
    let matches = LaterApp::command()
        .try_get_matches_from(words.iter().map(OsString::from))
        .map_err(|e| anyhow::anyhow!("{}", first_line(&e.to_string())))?;
    refuse_pod_wide(&matches)?;
    let later = LaterApp::from_arg_matches(&matches)?;
    super::image_app::app(global, data, &later.app)
}

/// clap's message without its usage lines.
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or(text);
    line.trim_start_matches("error: ").to_string()
}

fn refuse_pod_wide(matches: &ArgMatches) -> anyhow::Result<()> {
    for (id, flag) in POD_WIDE {
        if matches.value_source(id) == Some(ValueSource::CommandLine) {
            bail!("{flag} is a pod option: give it before the first app");
        }
    }
    Ok(())
}

/// App names are unique in a pod: `rkt enter --app`, `status` and the apps' directories
/// go by them.
fn check_names(apps: &[App]) -> anyhow::Result<()> {
    for (i, app) in apps.iter().enumerate() {
        if app.name == "." || app.name == ".." {
            bail!(
                "app {}: {:?} cannot be an app's name; give it one with --name",
                i + 1,
                app.name
            );
        }
        if let Some(j) = apps[..i].iter().position(|a| a.name == app.name) {
            bail!(
                "apps {} and {} are both named {:?}: give one another name with --name=NAME",
                j + 1,
                i + 1,
                app.name
            );
        }
    }
    Ok(())
}

/// In one app's `words`: where its APP is, when it is an image followed by app options
/// (rkt's place for them: `IMAGE --name=web -- ARGS`), and how many words those options
/// are (up to `--` or the end). `None` when the APP is no image or nothing follows it.
pub fn options_after_image(
    data: &Path,
    words: &[String],
) -> anyhow::Result<Option<(usize, usize)>> {
    let Some(at) = first_positional(words) else {
        return Ok(None);
    };
    if !rkt::image_pod::app::is_image(data, &words[at])? {
        return Ok(None);
    }
    let rest = &words[at + 1..];
    let count = rest.iter().position(|w| w == "--").unwrap_or(rest.len());
    Ok((count > 0).then_some((at, count)))
}

/// `words` with the options after its image moved before it, so that one parse reads them
/// all (see [`options_after_image`]).
fn hoist_image_options(data: &Path, words: &[String]) -> anyhow::Result<Vec<String>> {
    let Some((at, count)) = options_after_image(data, words)? else {
        return Ok(words.to_vec());
    };
    let mut out = words[..at].to_vec();
    out.extend_from_slice(&words[at + 1..at + 1 + count]);
    out.push(words[at].clone());
    out.extend_from_slice(&words[at + 1 + count..]);
    Ok(out)
}

/// Where the APP is in an app's words: the first that is not an option or an option's
/// value. Options are written `--flag=value` or, for those that take a value, `--flag
/// value`: the app options with a value are found in clap's definition.
fn first_positional(words: &[String]) -> Option<usize> {
    let cmd = LaterApp::command();
    // A flag whose value needs its `=` (the on/off flags) never takes the next word.
    let takes_value = |flag: &str| {
        cmd.get_arguments().any(|a| {
            a.get_long() == Some(flag)
                && a.get_num_args().is_none_or(|n| n.min_values() > 0)
                && !a.is_require_equals_set()
                && a.get_action().takes_values()
        })
    };
    let mut i = 0;
    while i < words.len() {
        let word = &words[i];
        if word == "--" {
            return (i + 1 < words.len()).then_some(i + 1);
        }
        match word.strip_prefix("--") {
            Some(flag) if !flag.contains('=') && takes_value(flag) => i += 2,
            Some(_) => i += 1,
            None => return Some(i),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_app_is_the_first_word_that_is_no_option() {
        assert_eq!(first_positional(&words(&["sleep", "1"])), Some(0));
        assert_eq!(first_positional(&words(&["--name=a", "sleep"])), Some(1));
        assert_eq!(first_positional(&words(&["--name", "a", "sleep"])), Some(2));
        assert_eq!(
            first_positional(&words(&["--inherit-env", "sleep"])),
            Some(1)
        );
        assert_eq!(first_positional(&words(&["--", "sleep"])), Some(1));
        assert_eq!(first_positional(&words(&["--name=a"])), None);
    }

    #[test]
    fn later_apps_refuse_pod_options() {
        for (given, flag) in [
            (&["--pids-limit=64", "sleep"][..], "--pids-limit"),
            (&["--private-users", "sleep"][..], "--private-users"),
            (&["--ipc=parent", "sleep"][..], "--ipc"),
        ] {
            let m = LaterApp::command()
                .try_get_matches_from(given.iter().copied())
                .unwrap();
            let err = refuse_pod_wide(&m).unwrap_err().to_string();
            assert!(err.starts_with(flag) && err.contains("pod option"), "{err}");
        }
        // An app's own limits.
        let m = LaterApp::command()
            .try_get_matches_from(["--name=b", "--memory=64M", "--cpu=1", "sleep"])
            .unwrap();
        refuse_pod_wide(&m).unwrap();
    }

    #[test]
    fn the_limits_after_the_first_image_are_the_apps_own() {
        let (moved, own) = take_app_own(&words(&[
            "--memory=268435456",
            "--exec=/bin/sh",
            "--cpu",
            "100",
            "--name",
            "web",
            "--cpu-shares=512",
            "--memory",
        ]));
        assert_eq!(
            moved,
            words(&["--exec=/bin/sh", "--name", "web", "--memory"])
        );
        assert_eq!(
            own,
            words(&["--memory=268435456", "--cpu=100", "--cpu-shares=512"])
        );
        let limits = own_limits(&own).unwrap();
        assert_eq!(limits.memory, Some(268_435_456));
        assert_eq!(limits.cpu_millis, Some(100_000));
        assert_eq!(limits.cpu_shares, Some(512));
        let err = own_limits(&words(&["--cpu=1", "--cpu=2"])).unwrap_err();
        assert!(err.to_string().contains("--cpu is given twice"), "{err}");
        let err = own_limits(&words(&["--memory=lots"])).unwrap_err();
        assert!(err.to_string().contains("--memory=lots"), "{err}");
    }

    #[test]
    fn app_names_must_differ() {
        let apps = [
            App::new("a", ["x"]),
            App::new("b", ["y"]),
            App::new("a", ["z"]),
        ];
        let err = check_names(&apps).unwrap_err().to_string();
        assert!(
            err.contains("apps 1 and 3") && err.contains("\"a\""),
            "{err}"
        );
        check_names(&apps[..2]).unwrap();
    }
}
