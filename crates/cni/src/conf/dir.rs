//! Loading configurations from disk: one file ([`load_file`]), with the plugin drop-in
//! files of `<dir>/<network>/*.conf` appended, and a whole directory ([`load_dir`]),
//! parsed on several threads when it is large.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error::{ConfError, Origin};
use super::network::{LoadedDir, NetworkConfigList, Shadowed};
use super::parse::{parse_list_inner, parse_object, parse_single_owned, plugin, require_plugins};

fn read(path: &Path) -> Result<Vec<u8>, ConfError> {
    std::fs::read(path).map_err(|source| ConfError::Read {
        origin: Origin::of(Some(path)),
        source,
    })
}

/// What a configuration directory holds: its configuration files and its subdirectories.
#[derive(Default)]
struct Listing {
    /// Regular files (symlinks followed) with a wanted extension, sorted byte-wise by name.
    files: Vec<PathBuf>,
    /// Names of the subdirectories (symlinks followed), where aggregated plugin files live.
    subdirs: HashSet<OsString>,
}

/// Lists `dir`: regular files (symlinks followed) whose extension is in `exts`, sorted
/// byte-wise by file name, and the subdirectories. A missing directory is empty.
///
/// The entry types come from the directory itself; only symlinks and entries of unknown
/// type cost a `stat` (for 10,000 files that is 10,000 system calls saved).
fn list_dir(dir: &Path, exts: &[&str]) -> Result<Listing, ConfError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Listing::default()),
        Err(source) => {
            return Err(ConfError::Read {
                origin: Origin::of(Some(dir)),
                source,
            })
        }
    };
    let mut out = Listing::default();
    // (file name, path): sorting on the names avoids re-parsing every path.
    let mut named: Vec<(OsString, PathBuf)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ConfError::Read {
            origin: Origin::of(Some(dir)),
            source,
        })?;
        let (is_file, is_dir) = match entry.file_type() {
            Ok(t) if t.is_file() => (true, false),
            Ok(t) if t.is_dir() => (false, true),
            Ok(t) if !t.is_symlink() => (false, false),
            // A symlink, or a type the directory does not record: ask the file.
            _ => match std::fs::metadata(entry.path()) {
                Ok(m) => (m.is_file(), m.is_dir()),
                Err(_) => (false, false),
            },
        };
        if is_dir {
            out.subdirs.insert(entry.file_name());
            continue;
        }
        let path = entry.path();
        let ext_ok = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| exts.contains(&e));
        if is_file && ext_ok {
            named.push((entry.file_name(), path));
        }
    }
    named.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.files = named.into_iter().map(|(_, path)| path).collect();
    Ok(out)
}

/// The files directly in `dir` whose extension is one of `extensions` (given with or
/// without the leading dot), in byte-wise file-name order; directories are left out and
/// symlinks followed (libcni `ConfFiles`). A missing directory has no files.
pub fn conf_files(dir: &Path, extensions: &[&str]) -> Result<Vec<PathBuf>, ConfError> {
    let exts: Vec<&str> = extensions
        .iter()
        .map(|e| e.strip_prefix('.').unwrap_or(e))
        .collect();
    Ok(list_dir(dir, &exts)?.files)
}

/// Loads one configuration file, choosing the format by extension: `.conflist` is a
/// list, `.conf` and `.json` are single plugins upgraded to a list.
///
/// For a `.conflist`, unless `loadOnlyInlinedPlugins` is set, the plugin objects in
/// `<dir>/<name>/*.conf` (each a single plugin object with a `type`, in file-name
/// order) are appended after the inlined plugins, as libcni does.
pub fn load_file(path: &Path) -> Result<NetworkConfigList, ConfError> {
    load_file_in(path, None)
}

/// [`load_file`], told which subdirectories the file's directory has (`None`: look).
fn load_file_in(
    path: &Path,
    subdirs: Option<&HashSet<OsString>>,
) -> Result<NetworkConfigList, ConfError> {
    let origin = Origin::of(Some(path));
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "conflist" => {
            let bytes = read(path)?;
            let mut list = parse_list_inner(bytes, &origin)?;
            let may_aggregate = subdirs.is_none_or(|dirs| dirs.contains(OsStr::new(&list.name)));
            if !list.load_only_inlined_plugins && may_aggregate {
                let dir = path.parent().unwrap_or(Path::new("."));
                let sub = dir.join(&list.name);
                for file in list_dir(&sub, &["conf"])?.files {
                    let file_origin = Origin::of(Some(&file));
                    let m = parse_object(&read(&file)?, &file_origin)?;
                    let index = list.plugins.len();
                    let p = plugin(Value::Object(m), index, &list.name, "", &file_origin)?;
                    list.plugins.push(p);
                }
            }
            require_plugins(list, &origin)
        }
        "conf" | "json" => parse_single_owned(read(path)?, Some(path)),
        _ => Err(ConfError::UnknownExtension { origin }),
    }
}

/// Each loading thread gets at least this many files, so directories with fewer than twice
/// as many are loaded on the calling thread.
const PARALLEL_MIN_FILES: usize = 256;

/// Loads `files` in order, on several threads when there are many (in a VM, a few dozen
/// microseconds per file go to opening and reading it; two threads halve that).
fn load_files(
    files: &[PathBuf],
    subdirs: &HashSet<OsString>,
) -> Vec<Result<NetworkConfigList, ConfError>> {
    // Asking for the parallelism reads cgroup files: only worth it for a large directory.
    let threads = if files.len() < PARALLEL_MIN_FILES * 2 {
        1
    } else {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(files.len() / PARALLEL_MIN_FILES)
    };
    let load = |chunk: &[PathBuf]| -> Vec<_> {
        chunk
            .iter()
            .map(|f| load_file_in(f, Some(subdirs)))
            .collect()
    };
    if threads == 1 {
        return load(files);
    }
    let chunk = files.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .chunks(chunk)
            .map(|c| scope.spawn(move || load(c)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| match h.join() {
                Ok(results) => results,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    })
}

/// Loads every `*.conflist`, `*.conf` and `*.json` file directly in `dir`, in byte-wise
/// file-name order. The first file defining a name wins; later ones are reported in
/// [`LoadedDir::shadowed`]. Files that fail to load are reported in
/// [`LoadedDir::failed`] and do not stop the others. A missing directory is empty;
/// only a directory that exists but cannot be read is an error.
///
/// Large directories are parsed on several threads; the result does not depend on it.
pub fn load_dir(dir: &Path) -> Result<LoadedDir, ConfError> {
    let listing = list_dir(dir, &["conflist", "conf", "json"])?;
    let mut out = LoadedDir::default();
    let mut first_by_name: HashMap<String, usize> = HashMap::new();
    for (file, loaded) in listing
        .files
        .iter()
        .zip(load_files(&listing.files, &listing.subdirs))
    {
        match loaded {
            Ok(list) => {
                if let Some(&first) = first_by_name.get(&list.name) {
                    out.shadowed.push(Shadowed {
                        name: list.name,
                        file: file.clone(),
                        shadowed_by: out.networks[first].source.clone().unwrap_or_default(),
                    });
                } else {
                    first_by_name.insert(list.name.clone(), out.networks.len());
                    out.networks.push(list);
                }
            }
            Err(e) => out.failed.push(e),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory large enough to be loaded on several threads gives what loading one file
    /// after another gives: file-name order, first definition wins, failures reported,
    /// aggregated plugins found through a real and a symlinked subdirectory.
    #[test]
    fn large_dir_loads_like_one_file_after_another() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let n = PARALLEL_MIN_FILES * 3;
        for i in 0..n {
            let name = format!("net{}", i % (n - 10)); // the last 10 files shadow the first 10
            let body =
                format!(r#"{{"cniVersion":"1.0.0","name":"{name}","plugins":[{{"type":"ptp"}}]}}"#);
            std::fs::write(d.join(format!("{i:05}.conflist")), body).unwrap();
        }
        std::fs::write(d.join("00003.conf"), "{broken").unwrap();
        std::fs::create_dir(d.join("net5")).unwrap();
        std::fs::write(d.join("net5/1.conf"), r#"{"type":"tuning"}"#).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("1.conf"), r#"{"type":"portmap"}"#).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), d.join("net7")).unwrap();

        let loaded = load_dir(d).unwrap();
        let sequential: Vec<_> = list_dir(d, &["conflist", "conf", "json"])
            .unwrap()
            .files
            .iter()
            .map(|f| load_file(f).map(|l| l.name))
            .collect();
        let expected_names: Vec<String> = sequential
            .iter()
            .filter_map(|r| r.as_ref().ok().cloned())
            .take(n - 10)
            .collect();
        let names: Vec<String> = loaded.networks.iter().map(|l| l.name.clone()).collect();
        assert_eq!(names, expected_names);
        assert_eq!(names[0], "net0");
        assert_eq!(loaded.shadowed.len(), 10);
        assert_eq!(
            loaded.shadowed[0].file,
            d.join(format!("{:05}.conflist", n - 10))
        );
        assert_eq!(loaded.shadowed[0].shadowed_by, d.join("00000.conflist"));
        assert_eq!(loaded.failed.len(), 1);
        assert_eq!(
            loaded.failed[0].path(),
            Some(d.join("00003.conf").as_path())
        );
        let types = |name: &str| -> Vec<String> {
            let list = loaded.find(name).unwrap();
            list.plugins.iter().map(|p| p.plugin_type.clone()).collect()
        };
        assert_eq!(types("net5"), ["ptp", "tuning"]);
        assert_eq!(types("net7"), ["ptp", "portmap"]);
        assert_eq!(types("net6"), ["ptp"]);
    }
}
