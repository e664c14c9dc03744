//! The configuration rkt reads nowhere: `stage1.d` (upstream rkt's stage1 image settings;
//! our pods run with rkt's built-in stage, there are no stage1 images), and the `auth.d`
//! files of rkt's `auth` kind (credentials for image hosts; images read only `dockerAuth`,
//! see [`super::auth`]). Their files are found in every configuration directory and
//! reported as warnings, which the command line prints under `--debug`, so that they are
//! never ignored silently.

use std::path::{Path, PathBuf};

use super::{ConfigDirs, ConfigWarning};

/// The subdirectories of a configuration directory that rkt does not read, and why.
const UNUSED_KINDS: &[(&str, &str)] = &[(
    "stage1.d",
    "pods run with rkt's built-in stage, there are no stage1 images to configure",
)];

/// A warning for each file (or unreadable directory) of a kind rkt does not read.
pub fn unused_files(dirs: &ConfigDirs) -> Vec<ConfigWarning> {
    let mut warnings = Vec::new();
    // A directory given as two layers is reported once.
    let mut layers: Vec<&Path> = Vec::new();
    for dir in dirs.layers() {
        if !layers.contains(&dir) {
            layers.push(dir);
        }
    }
    for dir in &layers {
        for (kind, why) in UNUSED_KINDS {
            let kind_dir = dir.join(kind);
            match files(&kind_dir) {
                Ok(files) => {
                    warnings.extend(files.into_iter().map(|file| ConfigWarning::NotUsed {
                        file,
                        why: why.to_string(),
                    }))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => warnings.push(ConfigWarning::NotUsed {
                    file: kind_dir,
                    why: format!("cannot be read ({e}); rkt does not read it anyway: {why}"),
                }),
            }
        }
    }
    for dir in layers {
        for file in files(&dir.join("auth.d")).unwrap_or_default() {
            // A file that cannot be read or parsed is the credentials loader's error.
            let kind = std::fs::read(&file)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
                .and_then(|v| v.get("rktKind")?.as_str().map(str::to_string));
            if let Some(kind) = kind.filter(|k| k != "dockerAuth") {
                warnings.push(ConfigWarning::NotUsed {
                    file,
                    why: format!(
                        "rktKind {kind:?} is not read; images take registry credentials from \
                         \"dockerAuth\" files"
                    ),
                });
            }
        }
    }
    warnings
}

/// The entries of `dir`, sorted by name.
fn files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()?;
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage1_d_file_of_every_layer_is_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = ConfigDirs {
            system: tmp.path().join("system"),
            local: tmp.path().join("local"),
            user: Some(tmp.path().join("user")),
        };
        for (layer, name) in [("system", "b.json"), ("user", "a.json"), ("user", "c.json")] {
            let dir = tmp.path().join(layer).join("stage1.d");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(name), "{}").unwrap();
        }
        let warnings: Vec<String> = unused_files(&dirs).iter().map(|w| w.to_string()).collect();
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(
            warnings[0].contains("system/stage1.d/b.json: not used"),
            "{warnings:?}"
        );
        assert!(
            warnings[2].contains("user/stage1.d/c.json: not used"),
            "{warnings:?}"
        );
        assert!(warnings[0].contains("built-in stage"), "{warnings:?}");
        let auth_d = tmp.path().join("local/auth.d");
        std::fs::create_dir_all(&auth_d).unwrap();
        std::fs::write(auth_d.join("hosts.json"), r#"{"rktKind":"auth"}"#).unwrap();
        std::fs::write(auth_d.join("reg.json"), r#"{"rktKind":"dockerAuth"}"#).unwrap();
        let warnings: Vec<String> = unused_files(&dirs).iter().map(|w| w.to_string()).collect();
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        assert!(
            warnings[3].contains("local/auth.d/hosts.json: not used: rktKind \"auth\""),
            "{warnings:?}"
        );
        assert!(unused_files(&ConfigDirs {
            system: tmp.path().join("none"),
            local: tmp.path().join("none"),
            user: None,
        })
        .is_empty());
    }
}
