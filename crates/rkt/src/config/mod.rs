//! rkt's configuration: the layered `paths` configuration and the effective directories.
//!
//! - [`auth`]: registry credentials from `auth.d/*.json`.
//! - [`origin`]: where a value came from (a default, a file, a flag).
//! - [`paths`]: loading `paths.d/*.json` from the system, local and user directories.
//! - [`dirs`]: the one function, [`resolve`], that turns flags, configuration and
//!   defaults into the directories every command uses.
//! - [`show`]: the JSON that `rkt config` prints.
//! - [`unused`]: what rkt does not read (`stage1.d`, `auth.d` files of kind `auth`),
//!   reported, never silently ignored.
//! - [`error`]: what can go wrong, naming the file, field or flag involved.
//!
//! May not touch: pods, networks or anything they use; it only reads configuration files
//! and says which directories are in effect, and the command line hands them on.

pub mod auth;
pub mod dirs;
pub mod error;
pub mod origin;
pub mod paths;
pub mod show;
pub mod unused;

pub use dirs::{
    absolutize, data_dir, default_net_operations, require_dir, resolve, resolve_with_builtin,
    DirOverrides, EffectiveDirs, BUILTIN_PLUGIN_DIRS, DEFAULT_DATA_DIR, DEFAULT_STAGE1_IMAGES_DIR,
    NET_OPERATIONS_ENV, STAGE1_PLUGIN_DIR,
};
pub use error::{ConfigError, DirProblem};
pub use origin::{Origin, Value};
pub use paths::{
    load_paths, parse_paths_file, ConfigDirs, ConfigWarning, PathsConfig, DEFAULT_LOCAL_CONFIG,
    DEFAULT_SYSTEM_CONFIG,
};
pub use show::stage0_json;

#[cfg(test)]
mod tests;
