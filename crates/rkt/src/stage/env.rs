//! The app's environment and executable lookup.
//!
//! Without `--inherit-env` the app gets a minimal environment: `PATH` (rkt's default),
//! `HOME=/root` and `TERM` when the runner has one. With it, the runner's whole environment.
//! `--set-env` values come last and override either.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::podstore::App;

/// The `PATH` an app gets unless it inherits or sets one.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The environment for `app`, given the runner's environment.
pub fn app_env(
    app: &App,
    runner: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let set = |env: &mut Vec<(OsString, OsString)>, key: OsString, value: OsString| match env
        .iter_mut()
        .find(|(k, _)| *k == key)
    {
        Some(entry) => entry.1 = value,
        None => env.push((key, value)),
    };
    let runner: Vec<(OsString, OsString)> = runner.into_iter().collect();
    if app.inherit_env {
        for (k, v) in runner {
            set(&mut env, k, v);
        }
        if !env.iter().any(|(k, _)| k == "PATH") {
            set(&mut env, "PATH".into(), DEFAULT_PATH.into());
        }
    } else {
        set(&mut env, "PATH".into(), DEFAULT_PATH.into());
        set(&mut env, "HOME".into(), "/root".into());
        if let Some((_, term)) = runner.iter().find(|(k, _)| k == "TERM") {
            set(&mut env, "TERM".into(), term.clone());
        }
    }
    for (k, v) in &app.env {
        set(&mut env, k.into(), v.into());
    }
    env
}

/// Finds `program` the way `execvp` would, but in the app's `PATH` (not the caller's): a
/// name with a `/` is used as it is; otherwise the first executable regular file named so in
/// a `PATH` directory.
pub fn find_executable(program: &str, path_var: Option<&OsString>) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let default = OsString::from(DEFAULT_PATH);
    let path_var = path_var.unwrap_or(&default);
    path_var
        .as_bytes()
        .split(|b| *b == b':')
        .map(|dir| {
            if dir.is_empty() {
                Path::new(".").to_path_buf()
            } else {
                Path::new(std::ffi::OsStr::from_bytes(dir)).to_path_buf()
            }
        })
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(inherit: bool, env: &[(&str, &str)]) -> App {
        App {
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            inherit_env: inherit,
            ..App::new("a", ["a"])
        }
    }

    fn runner() -> Vec<(OsString, OsString)> {
        vec![
            ("TERM".into(), "xterm".into()),
            ("SECRET".into(), "x".into()),
            ("PATH".into(), "/opt/bin".into()),
        ]
    }

    fn get<'a>(env: &'a [(OsString, OsString)], key: &str) -> Option<&'a str> {
        env.iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.to_str().unwrap())
    }

    #[test]
    fn minimal_env_keeps_only_term_and_adds_defaults() {
        let env = app_env(
            &app(false, &[("FOO", "bar"), ("HOME", "/home/x")]),
            runner(),
        );
        assert_eq!(get(&env, "PATH"), Some(DEFAULT_PATH));
        assert_eq!(get(&env, "HOME"), Some("/home/x"));
        assert_eq!(get(&env, "TERM"), Some("xterm"));
        assert_eq!(get(&env, "FOO"), Some("bar"));
        assert_eq!(get(&env, "SECRET"), None);
    }

    #[test]
    fn inherited_env_is_overridden_by_set_env() {
        let env = app_env(&app(true, &[("SECRET", "y")]), runner());
        assert_eq!(get(&env, "SECRET"), Some("y"));
        assert_eq!(get(&env, "PATH"), Some("/opt/bin"));
        assert_eq!(env.iter().filter(|(k, _)| k == "SECRET").count(), 1);
    }

    #[test]
    fn executables_are_found_in_the_given_path() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("tool");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        let plain = dir.path().join("data");
        std::fs::write(&plain, "").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = OsString::from(format!("/nonexistent:{}", dir.path().display()));
        assert_eq!(find_executable("tool", Some(&path)), Some(exe));
        assert_eq!(find_executable("data", Some(&path)), None);
        assert_eq!(find_executable("/x/y", None), Some(PathBuf::from("/x/y")));
    }
}
