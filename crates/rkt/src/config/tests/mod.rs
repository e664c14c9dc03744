//! Unit tests of the configuration: the loader and the precedence table, on temporary
//! configuration trees.

mod loader;
mod precedence;
mod show;

use std::fs;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use super::ConfigDirs;

/// A temporary tree holding `system/`, `local/` and `user/` configuration directories.
struct Tree {
    tmp: TempDir,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            tmp: tempfile::tempdir().expect("create a temporary directory"),
        }
    }

    fn root(&self) -> &Path {
        self.tmp.path()
    }

    fn dirs(&self) -> ConfigDirs {
        ConfigDirs {
            system: self.root().join("system"),
            local: self.root().join("local"),
            user: Some(self.root().join("user")),
        }
    }

    /// Writes `<layer>/paths.d/<name>` and returns its path.
    fn write(&self, layer: &str, name: &str, body: &str) -> PathBuf {
        let dir = self.root().join(layer).join("paths.d");
        fs::create_dir_all(&dir).expect("create paths.d");
        let file = dir.join(name);
        fs::write(&file, body).expect("write a configuration file");
        file
    }

    /// Creates the directory `<root>/<rel>` and returns its path.
    fn mkdir(&self, rel: &str) -> PathBuf {
        let dir = self.root().join(rel);
        fs::create_dir_all(&dir).expect("create a directory");
        dir
    }
}

/// A `paths` v1 file body with the given extra fields (`"data":"/x"`, ...).
fn paths_file(fields: &str) -> String {
    if fields.is_empty() {
        r#"{"rktKind":"paths","rktVersion":"v1"}"#.to_owned()
    } else {
        format!(r#"{{"rktKind":"paths","rktVersion":"v1",{fields}}}"#)
    }
}
