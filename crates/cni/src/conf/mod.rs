//! Network configuration files: parsing `.conflist`, `.conf` and `.json` files into
//! [`NetworkConfigList`]s, loading a configuration directory, and building the request
//! body each plugin receives ([`inject`]).
//!
//! The raw JSON is the source of truth: every plugin object is kept as written, and the
//! typed fields (`type`, `capabilities`) are only a view of it, so unknown keys reach
//! the plugin unchanged (libcni `InjectConf`).
//!
//! One module per concern: [`ConfError`] and [`Origin`] (`error`), the typed view
//! (`network`), parsing bytes (`parse`), loading files and directories (`dir`) and
//! building requests (`inject`). This module only re-exports them; none of them imports
//! it.

mod dir;
mod error;
mod inject;
mod network;
mod parse;

pub use self::dir::{conf_files, load_dir, load_file};
pub use self::error::{ConfError, Origin};
pub use self::inject::{inject, runtime_config_for};
pub use self::network::{LoadedDir, NetworkConfig, NetworkConfigList, Shadowed};
pub use self::parse::{conf_list_from_conf, parse_list, parse_plugin, parse_single};
