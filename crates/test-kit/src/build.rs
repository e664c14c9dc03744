//! The workspace's helper binaries (`cni-test-plugin`, `escape-probe`), built on first use:
//! a package's tests get only their own package's binaries from cargo.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The binary of workspace package `package` (named like it), built once per test process
/// with `cargo build -q -p <package>` into the workspace's target directory.
pub fn workspace_bin(package: &str) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut built = BUILT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let built = built.get_or_insert_with(HashMap::new);
    if let Some(bin) = built.get(package) {
        return bin.clone();
    }
    let status = Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", package])
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo build -p {package}: {e}"));
    assert!(status.success(), "cargo build -p {package} failed");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let bin = target.join("debug").join(package);
    assert!(bin.is_file(), "no {package} at {}", bin.display());
    built.insert(package.to_owned(), bin.clone());
    bin
}
