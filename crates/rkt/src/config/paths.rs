//! The `paths` configuration: `paths.d/*.json` files (rktKind `paths`, rktVersion `v1`) read
//! from the system, local and user configuration directories and layered field by field.
//!
//! Within one directory the files are read in file-name order and a field may be set by
//! one file only. Across directories a later layer replaces a field of an earlier one:
//! system, then local, then user. Unknown fields are kept as warnings, not errors, so that
//! files written for a newer rkt keep working.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::Map;

use super::error::ConfigError;
use super::origin::{Origin, Value};

/// Default system configuration directory (`--system-config`): the vendor's, read only.
pub const DEFAULT_SYSTEM_CONFIG: &str = "/usr/lib/rkt";
/// Default local configuration directory (`--local-config`): the administrator's.
pub const DEFAULT_LOCAL_CONFIG: &str = "/etc/rkt";

/// The subdirectory of each configuration directory holding `paths` files.
const PATHS_SUBDIR: &str = "paths.d";

const KIND_FIELD: &str = "rktKind";
const VERSION_FIELD: &str = "rktVersion";
const DATA_FIELD: &str = "data";
const STAGE1_IMAGES_FIELD: &str = "stage1-images";
const NET_CONF_FIELD: &str = "net-conf";
const NET_PLUGIN_FIELD: &str = "net-plugin";
pub(crate) const NET_OPERATIONS_FIELD: &str = "net-operations";

/// The configuration directories, lowest precedence first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigDirs {
    pub system: PathBuf,
    pub local: PathBuf,
    pub user: Option<PathBuf>,
}

impl Default for ConfigDirs {
    fn default() -> Self {
        ConfigDirs {
            system: PathBuf::from(DEFAULT_SYSTEM_CONFIG),
            local: PathBuf::from(DEFAULT_LOCAL_CONFIG),
            user: None,
        }
    }
}

impl ConfigDirs {
    /// The directories in the order their layers apply: system, local, user.
    pub fn layers(&self) -> impl Iterator<Item = &Path> {
        [
            Some(self.system.as_path()),
            Some(self.local.as_path()),
            self.user.as_deref(),
        ]
        .into_iter()
        .flatten()
    }

    /// The registry hosts directories (mirrors, containerd's `hosts.toml` layout):
    /// `certs.d` of each configuration directory, highest precedence first (user, local,
    /// system); the first that configures a registry is used for it.
    pub fn registry_hosts_dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self.layers().map(|d| d.join("certs.d")).collect();
        dirs.reverse();
        dirs
    }
}

/// The `paths` configuration after layering: a field is `None` when no file sets it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathsConfig {
    pub data: Option<Value<PathBuf>>,
    pub stage1_images: Option<Value<PathBuf>>,
    pub net_conf: Option<Value<PathBuf>>,
    pub net_plugin: Option<Value<Vec<PathBuf>>>,
    /// How many network operations may run at once on the host (see
    /// [`crate::networking::admission`]).
    pub net_operations: Option<Value<usize>>,
    /// Things worth telling the user under `--debug` (unknown fields).
    pub warnings: Vec<ConfigWarning>,
}

/// Something in a configuration file that rkt ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigWarning {
    UnknownField {
        file: PathBuf,
        field: String,
    },
    /// A file of a kind rkt does not read (see [`super::unused`]).
    NotUsed {
        file: PathBuf,
        why: String,
    },
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigWarning::UnknownField { file, field } => write!(
                f,
                "{}: unknown field \"{field}\" ignored (written for a newer rkt?)",
                file.display()
            ),
            ConfigWarning::NotUsed { file, why } => {
                write!(f, "{}: not used: {why}", file.display())
            }
        }
    }
}

impl PathsConfig {
    /// Takes every field `higher` sets (a later layer wins field by field).
    fn overlay(&mut self, higher: PathsConfig) {
        fn take<T>(low: &mut Option<T>, high: Option<T>) {
            if high.is_some() {
                *low = high;
            }
        }
        take(&mut self.data, higher.data);
        take(&mut self.stage1_images, higher.stage1_images);
        take(&mut self.net_conf, higher.net_conf);
        take(&mut self.net_plugin, higher.net_plugin);
        take(&mut self.net_operations, higher.net_operations);
        self.warnings.extend(higher.warnings);
    }

    /// Adds the fields of another file of the same directory; setting a field twice is
    /// an error naming both files.
    fn merge_same_layer(&mut self, other: PathsConfig) -> Result<(), ConfigError> {
        fn put<T>(
            field: &'static str,
            mine: &mut Option<Value<T>>,
            theirs: Option<Value<T>>,
        ) -> Result<(), ConfigError> {
            let Some(theirs) = theirs else { return Ok(()) };
            if let Some(mine) = mine {
                return Err(ConfigError::Duplicate {
                    field,
                    first: origin_path(&mine.origin),
                    second: origin_path(&theirs.origin),
                });
            }
            *mine = Some(theirs);
            Ok(())
        }
        put(DATA_FIELD, &mut self.data, other.data)?;
        put(
            STAGE1_IMAGES_FIELD,
            &mut self.stage1_images,
            other.stage1_images,
        )?;
        put(NET_CONF_FIELD, &mut self.net_conf, other.net_conf)?;
        put(NET_PLUGIN_FIELD, &mut self.net_plugin, other.net_plugin)?;
        put(
            NET_OPERATIONS_FIELD,
            &mut self.net_operations,
            other.net_operations,
        )?;
        self.warnings.extend(other.warnings);
        Ok(())
    }
}

fn origin_path(origin: &Origin) -> PathBuf {
    match origin {
        Origin::File(path) => path.clone(),
        other => PathBuf::from(other.to_string()),
    }
}

/// Loads and layers `paths.d/*.json` of every configuration directory. A directory (or
/// its `paths.d`) that does not exist contributes nothing.
pub fn load_paths(dirs: &ConfigDirs) -> Result<PathsConfig, ConfigError> {
    let mut merged = PathsConfig::default();
    for dir in dirs.layers() {
        merged.overlay(load_layer(&dir.join(PATHS_SUBDIR))?);
    }
    Ok(merged)
}

/// Reads one `paths.d` directory: its `.json` files, in file-name order, not recursively.
fn load_layer(paths_d: &Path) -> Result<PathsConfig, ConfigError> {
    let mut layer = PathsConfig::default();
    for file in json_files(paths_d)? {
        let bytes = fs::read(&file).map_err(|source| ConfigError::ReadFile {
            path: file.clone(),
            source,
        })?;
        layer.merge_same_layer(parse_paths_file(&file, &bytes)?)?;
    }
    Ok(layer)
}

fn json_files(dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let read_dir_error = |source| ConfigError::ReadDir {
        path: dir.to_path_buf(),
        source,
    };
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(read_dir_error(err)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(read_dir_error)?.path();
        // `metadata` follows symlinks: a link to a file counts, a subdirectory does not.
        if path.extension().is_some_and(|ext| ext == "json")
            && fs::metadata(&path).is_ok_and(|meta| meta.is_file())
        {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Parses one `paths` file; every value it sets has the origin `path`.
pub fn parse_paths_file(path: &Path, bytes: &[u8]) -> Result<PathsConfig, ConfigError> {
    let json: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|reason| ConfigError::Json {
            path: path.to_path_buf(),
            reason,
        })?;
    let serde_json::Value::Object(object) = json else {
        return Err(ConfigError::NotAnObject {
            path: path.to_path_buf(),
            found: json_type(&json),
        });
    };
    let file = FileFields {
        path,
        object: &object,
    };

    let kind = file.required_string(KIND_FIELD)?;
    let version = file.required_string(VERSION_FIELD)?;
    if (kind, version) != ("paths", "v1") {
        return Err(ConfigError::UnknownKind {
            path: path.to_path_buf(),
            kind: kind.to_owned(),
            version: version.to_owned(),
        });
    }

    let with_origin = |value| Value::new(value, Origin::File(path.to_path_buf()));
    let warnings = object
        .keys()
        .filter(|key| {
            ![
                KIND_FIELD,
                VERSION_FIELD,
                DATA_FIELD,
                STAGE1_IMAGES_FIELD,
                NET_CONF_FIELD,
                NET_PLUGIN_FIELD,
                NET_OPERATIONS_FIELD,
            ]
            .contains(&key.as_str())
        })
        .map(|key| ConfigWarning::UnknownField {
            file: path.to_path_buf(),
            field: key.clone(),
        })
        .collect();
    Ok(PathsConfig {
        data: file.dir(DATA_FIELD)?.map(with_origin),
        stage1_images: file.dir(STAGE1_IMAGES_FIELD)?.map(with_origin),
        net_conf: file.dir(NET_CONF_FIELD)?.map(with_origin),
        net_plugin: file
            .dir_list(NET_PLUGIN_FIELD)?
            .map(|dirs| Value::new(dirs, Origin::File(path.to_path_buf()))),
        net_operations: file
            .count(NET_OPERATIONS_FIELD)?
            .map(|n| Value::new(n, Origin::File(path.to_path_buf()))),
        warnings,
    })
}

/// The fields of one file, with errors that name the file and field.
struct FileFields<'a> {
    path: &'a Path,
    object: &'a Map<String, serde_json::Value>,
}

impl FileFields<'_> {
    fn required_string(&self, field: &'static str) -> Result<&str, ConfigError> {
        match self.object.get(field) {
            None => Err(ConfigError::MissingField {
                path: self.path.to_path_buf(),
                field,
            }),
            Some(serde_json::Value::String(s)) if s.is_empty() => Err(ConfigError::EmptyField {
                path: self.path.to_path_buf(),
                field,
            }),
            Some(serde_json::Value::String(s)) => Ok(s),
            Some(other) => Err(self.wrong_type(field, "a string", other)),
        }
    }

    /// An optional field holding a whole number of at least 1.
    fn count(&self, field: &'static str) -> Result<Option<usize>, ConfigError> {
        match self.object.get(field) {
            None => Ok(None),
            Some(serde_json::Value::Number(n)) => match n.as_u64() {
                Some(v) if v >= 1 => Ok(Some(v as usize)),
                _ => Err(self.wrong_type(field, "a whole number of at least 1", &n.clone().into())),
            },
            Some(other) => Err(self.wrong_type(field, "a whole number of at least 1", other)),
        }
    }

    /// An optional field holding one absolute directory.
    fn dir(&self, field: &'static str) -> Result<Option<PathBuf>, ConfigError> {
        match self.object.get(field) {
            None => Ok(None),
            Some(serde_json::Value::String(s)) => self.absolute(field, s).map(Some),
            Some(other) => Err(self.wrong_type(field, "a string", other)),
        }
    }

    /// An optional field holding one absolute directory or an array of them.
    fn dir_list(&self, field: &'static str) -> Result<Option<Vec<PathBuf>>, ConfigError> {
        const EXPECTED: &str = "a string or an array of strings";
        match self.object.get(field) {
            None => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(vec![self.absolute(field, s)?])),
            Some(serde_json::Value::Array(items)) if items.is_empty() => {
                Err(ConfigError::EmptyField {
                    path: self.path.to_path_buf(),
                    field,
                })
            }
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|item| match item {
                    serde_json::Value::String(s) => self.absolute(field, s),
                    other => Err(self.wrong_type(field, EXPECTED, other)),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(self.wrong_type(field, EXPECTED, other)),
        }
    }

    fn absolute(&self, field: &'static str, value: &str) -> Result<PathBuf, ConfigError> {
        let dir = PathBuf::from(value);
        if dir.is_absolute() {
            Ok(dir)
        } else {
            Err(ConfigError::RelativePath {
                path: self.path.to_path_buf(),
                field,
                value: dir,
            })
        }
    }

    fn wrong_type(
        &self,
        field: &'static str,
        expected: &'static str,
        found: &serde_json::Value,
    ) -> ConfigError {
        ConfigError::WrongType {
            path: self.path.to_path_buf(),
            field,
            expected,
            found: json_type(found),
        }
    }
}

fn json_type(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}
