//! The effective directories: the one place that decides where rkt keeps its data, reads
//! network configurations and looks for CNI plugins.
//!
//! Precedence, highest first: command-line flags, then the `paths` configuration (user >
//! local > system, already layered by [`load_paths`](super::load_paths)), then the
//! defaults. The built-in plugin directories are always searched last.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::error::{ConfigError, DirProblem};
use super::origin::{Origin, Value};
use super::paths::{ConfigDirs, PathsConfig};

/// Default data directory (`data`, `--dir`).
pub const DEFAULT_DATA_DIR: &str = "/var/lib/rkt";
/// Default stage1 images directory (`stage1-images`).
pub const DEFAULT_STAGE1_IMAGES_DIR: &str = "/usr/lib/rkt/stage1-images";
/// rkt's own plugin directory, searched by default after `<local-config>/net.d`.
pub const STAGE1_PLUGIN_DIR: &str = "/usr/lib/rkt/plugins/net";
/// Where distributions install CNI plugins; those that exist are always searched last, so
/// the built-in networks keep working wherever `net-plugin` points.
pub const BUILTIN_PLUGIN_DIRS: [&str; 3] = ["/usr/lib/cni", "/usr/libexec/cni", "/opt/cni/bin"];

const STAGE1_IMAGES_FIELD: &str = "stage1-images";
const NET_CONF_FIELD: &str = "net-conf";
const NET_PLUGIN_FIELD: &str = "net-plugin";

/// Directories given on the command line. Relative paths are resolved against the
/// current directory by [`resolve`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirOverrides {
    /// `--dir`.
    pub data: Option<PathBuf>,
    /// `--net-conf-dir`.
    pub net_conf_dir: Option<PathBuf>,
    /// Every `--net-plugin-dir` value, already split on `:`, in command-line order.
    pub net_plugin_dirs: Vec<PathBuf>,
}

impl DirOverrides {
    /// The flags' overrides; a plugin directory given twice is searched (and shown) once,
    /// where it was first given, and an empty one not at all.
    pub fn new(
        data: Option<PathBuf>,
        net_conf_dir: Option<PathBuf>,
        plugin_dirs: &[PathBuf],
    ) -> DirOverrides {
        let mut net_plugin_dirs: Vec<PathBuf> = Vec::new();
        for dir in plugin_dirs {
            if !dir.as_os_str().is_empty() && !net_plugin_dirs.contains(dir) {
                net_plugin_dirs.push(dir.clone());
            }
        }
        DirOverrides {
            data,
            net_conf_dir,
            net_plugin_dirs,
        }
    }
}

/// The directories in effect, each with the place it was set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveDirs {
    pub data: Value<PathBuf>,
    pub stage1_images: Value<PathBuf>,
    pub net_conf: Value<PathBuf>,
    /// The configured part of the plugin search path (flags, `net-plugin` or defaults).
    pub net_plugin: Vec<Value<PathBuf>>,
    /// The built-in plugin directories that exist, searched after `net_plugin`.
    pub builtin_plugin_dirs: Vec<PathBuf>,
    /// How many network operations run at once on the host: `$RKT_NET_OPERATIONS` >
    /// `net-operations` > the number of CPUs.
    pub net_operations: Value<usize>,
}

impl EffectiveDirs {
    /// The whole plugin search path: the configured directories, then the built-in ones,
    /// each directory once (at its first position).
    pub fn plugin_path(&self) -> Vec<PathBuf> {
        let mut path: Vec<PathBuf> = Vec::new();
        let all = self
            .net_plugin
            .iter()
            .map(|dir| &dir.value)
            .chain(&self.builtin_plugin_dirs);
        for dir in all {
            if !path.contains(dir) {
                path.push(dir.clone());
            }
        }
        path
    }

    /// Where CNI keeps its attachment cache: `<data>/cni`.
    pub fn cni_cache_dir(&self) -> PathBuf {
        self.data.value.join("cni")
    }

    /// Where pods live: `<data>/pods`.
    pub fn pods_dir(&self) -> PathBuf {
        self.data.value.join("pods")
    }
}

/// The data directory alone, as [`resolve`] settles it: `--dir` (`flag`, taken from `cwd`
/// when relative) > `data` in the paths configuration > [`DEFAULT_DATA_DIR`]. For what
/// needs only it, cheaply (no other directory is looked at).
pub fn data_dir(paths: &PathsConfig, flag: Option<&Path>, cwd: &Path) -> Value<PathBuf> {
    flag.map(|dir| Value::new(absolutize(cwd, dir), Origin::Flag("--dir")))
        .or_else(|| paths.data.clone())
        .unwrap_or_else(|| Value::defaulted(PathBuf::from(DEFAULT_DATA_DIR)))
}

/// Resolves every directory: flags > `paths` configuration > defaults, with the built-in
/// plugin directories of this host ([`BUILTIN_PLUGIN_DIRS`]) appended.
///
/// A directory set explicitly (flag or file) must exist, except the data directory, which
/// rkt creates when it needs it. A default directory that does not exist holds nothing.
pub fn resolve(
    dirs: &ConfigDirs,
    paths: &PathsConfig,
    overrides: &DirOverrides,
    cwd: &Path,
) -> Result<EffectiveDirs, ConfigError> {
    let builtin: Vec<PathBuf> = BUILTIN_PLUGIN_DIRS.iter().map(PathBuf::from).collect();
    resolve_with_builtin(dirs, paths, overrides, cwd, &builtin)
}

/// [`resolve`] with the candidate built-in plugin directories given by the caller (tests
/// use their own); the candidates that exist become
/// [`EffectiveDirs::builtin_plugin_dirs`].
pub fn resolve_with_builtin(
    dirs: &ConfigDirs,
    paths: &PathsConfig,
    overrides: &DirOverrides,
    cwd: &Path,
    builtin_candidates: &[PathBuf],
) -> Result<EffectiveDirs, ConfigError> {
    let flag = |value: &PathBuf, name| Value::new(absolutize(cwd, value), Origin::Flag(name));

    let data = data_dir(paths, overrides.data.as_deref(), cwd);

    let stage1_images = paths
        .stage1_images
        .clone()
        .unwrap_or_else(|| Value::defaulted(PathBuf::from(DEFAULT_STAGE1_IMAGES_DIR)));
    require_dir(STAGE1_IMAGES_FIELD, &stage1_images)?;

    let net_conf = overrides
        .net_conf_dir
        .as_ref()
        .map(|dir| flag(dir, "--net-conf-dir"))
        .or_else(|| paths.net_conf.clone())
        .unwrap_or_else(|| Value::defaulted(dirs.local.join("net.d")));
    require_dir(NET_CONF_FIELD, &net_conf)?;

    let net_plugin: Vec<Value<PathBuf>> = if !overrides.net_plugin_dirs.is_empty() {
        overrides
            .net_plugin_dirs
            .iter()
            .map(|dir| flag(dir, "--net-plugin-dir"))
            .collect()
    } else if let Some(configured) = &paths.net_plugin {
        configured
            .value
            .iter()
            .map(|dir| Value::new(dir.clone(), configured.origin.clone()))
            .collect()
    } else {
        vec![
            Value::defaulted(dirs.local.join("net.d")),
            Value::defaulted(PathBuf::from(STAGE1_PLUGIN_DIR)),
        ]
    };
    for dir in &net_plugin {
        require_dir(NET_PLUGIN_FIELD, dir)?;
    }

    let builtin_plugin_dirs = builtin_candidates
        .iter()
        .filter(|dir| dir.is_dir())
        .cloned()
        .collect();

    Ok(EffectiveDirs {
        data,
        stage1_images,
        net_conf,
        net_plugin,
        builtin_plugin_dirs,
        net_operations: net_operations(paths)?,
    })
}

/// The environment variable that sets how many network operations may run at once on the
/// host, over the configuration (see [`crate::networking::admission`]).
pub const NET_OPERATIONS_ENV: &str = "RKT_NET_OPERATIONS";

/// How many network operations may run at once when nothing says: the number of CPUs this
/// process may use.
pub fn default_net_operations() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `$RKT_NET_OPERATIONS` (see [`crate::networking::admission`]) > `net-operations` > the
/// number of CPUs.
fn net_operations(paths: &PathsConfig) -> Result<Value<usize>, ConfigError> {
    if let Ok(text) = std::env::var(NET_OPERATIONS_ENV) {
        return match text.trim().parse::<usize>() {
            Ok(n) if n >= 1 => Ok(Value::new(n, Origin::Env(NET_OPERATIONS_ENV))),
            _ => Err(ConfigError::BadEnvCount {
                var: NET_OPERATIONS_ENV,
                value: text,
            }),
        };
    }
    Ok(paths
        .net_operations
        .clone()
        .unwrap_or_else(|| Value::defaulted(default_net_operations())))
}

/// Checks that a directory set explicitly (flag or file) exists and is a directory; a
/// default is accepted as it is. `field` names the setting in the error.
pub fn require_dir(field: &'static str, dir: &Value<PathBuf>) -> Result<(), ConfigError> {
    if !dir.origin.is_explicit() {
        return Ok(());
    }
    let problem = match fs::metadata(&dir.value) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => DirProblem::NotADirectory,
        Err(err) if err.kind() == io::ErrorKind::NotFound => DirProblem::Missing,
        Err(err) => DirProblem::Inaccessible(err),
    };
    Err(ConfigError::Dir {
        field,
        dir: dir.value.clone(),
        origin: dir.origin.clone(),
        problem,
    })
}

/// `cwd/path` for a relative path, without `.` components; absolute paths unchanged.
pub fn absolutize(cwd: &Path, path: &Path) -> PathBuf {
    cwd.join(path)
        .components()
        .filter(|component| *component != Component::CurDir)
        .collect()
}
