//! A temporary set of configuration directories (`system/`, `local/`, `user/`) and the
//! global flags that point `rkt` at them.

use std::fs;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

pub struct ConfigTree {
    tmp: TempDir,
}

impl ConfigTree {
    /// Creates `system/`, `local/` and `user/` in a fresh temporary directory.
    pub fn new() -> ConfigTree {
        let tmp = tempfile::tempdir().expect("create a temporary directory");
        for layer in ["system", "local", "user"] {
            fs::create_dir(tmp.path().join(layer)).expect("create a configuration directory");
        }
        ConfigTree { tmp }
    }

    pub fn root(&self) -> &Path {
        self.tmp.path()
    }

    pub fn layer(&self, layer: &str) -> PathBuf {
        self.root().join(layer)
    }

    /// `--system-config <root>/system --local-config <root>/local --user-config <root>/user`.
    pub fn flags(&self) -> Vec<String> {
        ["system", "local", "user"]
            .iter()
            .flat_map(|layer| {
                [
                    format!("--{layer}-config"),
                    self.layer(layer).display().to_string(),
                ]
            })
            .collect()
    }

    /// Writes `<layer>/paths.d/<name>` and returns its path.
    pub fn write(&self, layer: &str, name: &str, body: &str) -> PathBuf {
        let dir = self.layer(layer).join("paths.d");
        fs::create_dir_all(&dir).expect("create paths.d");
        let file = dir.join(name);
        fs::write(&file, body).expect("write a configuration file");
        file
    }

    /// Creates `<root>/<rel>` and returns its path.
    pub fn mkdir(&self, rel: &str) -> PathBuf {
        let dir = self.root().join(rel);
        fs::create_dir_all(&dir).expect("create a directory");
        dir
    }
}

/// A `paths` v1 file body with extra fields, e.g. `"data":"/x"`.
pub fn paths_file(fields: &str) -> String {
    if fields.is_empty() {
        r#"{"rktKind":"paths","rktVersion":"v1"}"#.to_owned()
    } else {
        format!(r#"{{"rktKind":"paths","rktVersion":"v1",{fields}}}"#)
    }
}
