//! The pod manifest (`<pod>/pod.json`): what to run. Written once when the pod is created
//! (by `rkt run` or `rkt prepare`) and never changed afterwards.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::time::Timestamp;
use crate::isolation::Isolators;

/// The pod's single app: a command from the host, or from a root filesystem directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct App {
    /// The app's name (`--name`, default the command's base name).
    pub name: String,
    /// The command and its arguments; `exec[0]` is looked up in the app's `PATH`.
    pub exec: Vec<String>,
    /// `--set-env` variables, in the order given; they override inherited ones.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// `--inherit-env`: start from the environment of the process that runs the pod.
    #[serde(default)]
    pub inherit_env: bool,
    /// `--rootfs`: the app's root directory (absolute); `None` means the host's root.
    #[serde(default)]
    pub rootfs: Option<PathBuf>,
    /// `--caps-retain`, `--caps-remove`, `--seccomp` (absent: the defaults).
    #[serde(default, skip_serializing_if = "Isolators::is_default")]
    pub isolators: Isolators,
}

impl App {
    /// The default app name for a command: its base name.
    pub fn default_name(exec0: &str) -> String {
        let base = exec0.rsplit('/').next().unwrap_or(exec0);
        if base.is_empty() {
            "app".to_string()
        } else {
            base.to_string()
        }
    }
}

/// `<pod>/pod.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodManifest {
    /// The pod's UUID (also its directory name).
    pub uuid: String,
    /// When the pod was created.
    pub created: Timestamp,
    /// The app.
    pub app: App,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_name_is_the_base_name() {
        assert_eq!(App::default_name("/bin/sleep"), "sleep");
        assert_eq!(App::default_name("true"), "true");
        assert_eq!(App::default_name("/"), "app");
    }
}
