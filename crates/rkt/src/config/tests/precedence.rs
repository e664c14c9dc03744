//! The precedence table of [`resolve`](crate::config::resolve): for each of data, net-conf
//! and net-plugin, every row (flag > user > local > system > default), then relative flags,
//! missing directories and the built-in plugin directories.

use std::fs;
use std::path::{Path, PathBuf};

use super::{paths_file, Tree};
use crate::config::{
    load_paths, resolve_with_builtin, ConfigDirs, DirOverrides, EffectiveDirs, Origin, PathsConfig,
    Value, DEFAULT_DATA_DIR, DEFAULT_STAGE1_IMAGES_DIR, STAGE1_PLUGIN_DIR,
};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Field {
    Data,
    NetConf,
    NetPlugin,
}

impl Field {
    fn key(self) -> &'static str {
        match self {
            Field::Data => "data",
            Field::NetConf => "net-conf",
            Field::NetPlugin => "net-plugin",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Field::Data => "--dir",
            Field::NetConf => "--net-conf-dir",
            Field::NetPlugin => "--net-plugin-dir",
        }
    }

    /// The field's effective value(s), one element for data and net-conf.
    fn effective(self, dirs: &EffectiveDirs) -> Vec<Value<PathBuf>> {
        match self {
            Field::Data => vec![dirs.data.clone()],
            Field::NetConf => vec![dirs.net_conf.clone()],
            Field::NetPlugin => dirs.net_plugin.clone(),
        }
    }

    fn defaults(self, config: &ConfigDirs) -> Vec<PathBuf> {
        match self {
            Field::Data => vec![PathBuf::from(DEFAULT_DATA_DIR)],
            Field::NetConf => vec![config.local.join("net.d")],
            Field::NetPlugin => vec![config.local.join("net.d"), PathBuf::from(STAGE1_PLUGIN_DIR)],
        }
    }
}

/// Rows of the precedence table, highest first.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
enum Source {
    Flag,
    User,
    Local,
    System,
    Default,
}

const SOURCES: [Source; 5] = [
    Source::Flag,
    Source::User,
    Source::Local,
    Source::System,
    Source::Default,
];

fn resolve_in(
    tree: &Tree,
    dirs: &ConfigDirs,
    paths: &PathsConfig,
    overrides: &DirOverrides,
) -> Result<EffectiveDirs, crate::config::ConfigError> {
    resolve_with_builtin(dirs, paths, overrides, tree.root(), &[])
}

/// Sets `field` in every source from `highest` down (each to its own existing
/// directories) and checks that `highest` wins, with its origin.
fn check_row(field: Field, highest: Source) {
    let tree = Tree::new();
    let dirs = tree.dirs();
    let mut overrides = DirOverrides::default();
    let mut expected: Option<Vec<Value<PathBuf>>> = None;

    for source in SOURCES.into_iter().filter(|source| *source >= highest) {
        let label = format!("{source:?}").to_lowercase();
        // Two directories for net-plugin, to check that order is kept.
        let count = if field == Field::NetPlugin { 2 } else { 1 };
        let values: Vec<PathBuf> = (0..count)
            .map(|i| tree.mkdir(&format!("{label}-{}-{i}", field.key())))
            .collect();
        let origin = match source {
            Source::Flag => {
                match field {
                    Field::Data => overrides.data = Some(values[0].clone()),
                    Field::NetConf => overrides.net_conf_dir = Some(values[0].clone()),
                    Field::NetPlugin => overrides.net_plugin_dirs = values.clone(),
                }
                Origin::Flag(field.flag())
            }
            Source::User | Source::Local | Source::System => {
                let json = serde_json::to_string(&values).unwrap();
                let json = if field == Field::NetPlugin {
                    json
                } else {
                    serde_json::to_string(&values[0]).unwrap()
                };
                let file = tree.write(
                    &label,
                    "paths.json",
                    &paths_file(&format!(r#""{}":{json}"#, field.key())),
                );
                Origin::File(file)
            }
            Source::Default => Origin::Default,
        };
        let values = if source == Source::Default {
            field.defaults(&dirs)
        } else {
            values
        };
        expected.get_or_insert_with(|| {
            values
                .into_iter()
                .map(|value| Value::new(value, origin.clone()))
                .collect()
        });
    }

    let paths = load_paths(&dirs).unwrap();
    let effective = resolve_in(&tree, &dirs, &paths, &overrides)
        .unwrap_or_else(|err| panic!("{field:?} from {highest:?}: {err}"));
    assert_eq!(
        field.effective(&effective),
        expected.unwrap(),
        "{field:?} from {highest:?}"
    );
}

#[test]
fn data_dir_precedence_table() {
    for source in SOURCES {
        check_row(Field::Data, source);
    }
}

#[test]
fn net_conf_dir_precedence_table() {
    for source in SOURCES {
        check_row(Field::NetConf, source);
    }
}

#[test]
fn net_plugin_path_precedence_table() {
    for source in SOURCES {
        check_row(Field::NetPlugin, source);
    }
}

#[test]
fn all_defaults() {
    let tree = Tree::new();
    let dirs = tree.dirs();
    let effective = resolve_in(
        &tree,
        &dirs,
        &PathsConfig::default(),
        &DirOverrides::default(),
    )
    .unwrap();
    assert_eq!(
        effective.data,
        Value::defaulted(PathBuf::from("/var/lib/rkt"))
    );
    assert_eq!(
        effective.stage1_images,
        Value::defaulted(PathBuf::from(DEFAULT_STAGE1_IMAGES_DIR))
    );
    assert_eq!(
        effective.net_conf,
        Value::defaulted(dirs.local.join("net.d"))
    );
    assert_eq!(
        effective.plugin_path(),
        vec![
            dirs.local.join("net.d"),
            PathBuf::from("/usr/lib/rkt/plugins/net")
        ]
    );
    assert_eq!(effective.cni_cache_dir(), PathBuf::from("/var/lib/rkt/cni"));
    assert_eq!(effective.pods_dir(), PathBuf::from("/var/lib/rkt/pods"));
}

#[test]
fn stage1_images_comes_from_the_configuration() {
    let tree = Tree::new();
    let images = tree.mkdir("images");
    let file = tree.write(
        "local",
        "s.json",
        &paths_file(&format!(r#""stage1-images":"{}""#, images.display())),
    );
    let dirs = tree.dirs();
    let paths = load_paths(&dirs).unwrap();
    let effective = resolve_in(&tree, &dirs, &paths, &DirOverrides::default()).unwrap();
    assert_eq!(
        effective.stage1_images,
        Value::new(images, Origin::File(file))
    );
}

#[test]
fn relative_flag_paths_are_resolved_against_the_current_directory() {
    let tree = Tree::new();
    let conf = tree.mkdir("work/conf");
    let p1 = tree.mkdir("work/p1");
    let p2 = tree.mkdir("p2");
    let cwd = tree.root().join("work");
    let overrides = DirOverrides {
        data: Some(PathBuf::from("./data")),
        net_conf_dir: Some(PathBuf::from("conf")),
        net_plugin_dirs: vec![PathBuf::from("p1"), PathBuf::from("../p2")],
    };
    let effective =
        resolve_with_builtin(&tree.dirs(), &PathsConfig::default(), &overrides, &cwd, &[]).unwrap();
    assert_eq!(effective.data.value, cwd.join("data"));
    assert_eq!(effective.net_conf.value, conf);
    assert!(effective.net_plugin[1].value.ends_with("work/../p2"));
    assert!(effective.net_plugin[1].value.is_dir());
    assert_eq!(effective.net_plugin[0].value, p1);
    assert_eq!(
        fs::canonicalize(&effective.net_plugin[1].value).unwrap(),
        fs::canonicalize(p2).unwrap()
    );
}

fn resolve_err(tree: &Tree, paths: &PathsConfig, overrides: &DirOverrides) -> String {
    match resolve_in(tree, &tree.dirs(), paths, overrides) {
        Ok(dirs) => panic!("expected an error, got {dirs:?}"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn a_missing_flag_directory_names_the_flag() {
    let tree = Tree::new();
    let missing = tree.root().join("nope");
    let overrides = DirOverrides {
        net_conf_dir: Some(missing.clone()),
        ..DirOverrides::default()
    };
    assert_eq!(
        resolve_err(&tree, &PathsConfig::default(), &overrides),
        format!("--net-conf-dir {}: no such directory", missing.display())
    );

    let present = tree.mkdir("present");
    let overrides = DirOverrides {
        net_plugin_dirs: vec![present, missing.clone()],
        ..DirOverrides::default()
    };
    assert_eq!(
        resolve_err(&tree, &PathsConfig::default(), &overrides),
        format!("--net-plugin-dir {}: no such directory", missing.display())
    );
}

#[test]
fn a_missing_configured_directory_names_the_field_and_file() {
    for field in ["net-conf", "net-plugin", "stage1-images"] {
        let tree = Tree::new();
        let missing = tree.root().join("nope");
        let file = tree.write(
            "user",
            "u.json",
            &paths_file(&format!(r#""{field}":"{}""#, missing.display())),
        );
        let paths = load_paths(&tree.dirs()).unwrap();
        assert_eq!(
            resolve_err(&tree, &paths, &DirOverrides::default()),
            format!(
                "{field} {} (set in {}): no such directory",
                missing.display(),
                file.display()
            )
        );
    }
}

#[test]
fn a_file_where_a_directory_is_expected_is_an_error() {
    let tree = Tree::new();
    let file = tree.root().join("plain-file");
    fs::write(&file, "").unwrap();
    let overrides = DirOverrides {
        net_conf_dir: Some(file.clone()),
        ..DirOverrides::default()
    };
    assert_eq!(
        resolve_err(&tree, &PathsConfig::default(), &overrides),
        format!("--net-conf-dir {}: not a directory", file.display())
    );
}

#[test]
fn missing_default_directories_and_an_explicit_missing_data_dir_are_fine() {
    let tree = Tree::new();
    let data = tree.root().join("data-not-yet-created");
    let file = tree.write(
        "system",
        "s.json",
        &paths_file(&format!(r#""data":"{}""#, data.display())),
    );
    let dirs = tree.dirs();
    assert!(!dirs.local.join("net.d").exists());
    let paths = load_paths(&dirs).unwrap();
    let effective = resolve_in(&tree, &dirs, &paths, &DirOverrides::default()).unwrap();
    assert_eq!(effective.data, Value::new(data.clone(), Origin::File(file)));

    let overrides = DirOverrides {
        data: Some(data.clone()),
        ..DirOverrides::default()
    };
    let effective = resolve_in(&tree, &dirs, &paths, &overrides).unwrap();
    assert_eq!(effective.data, Value::new(data, Origin::Flag("--dir")));
}

#[test]
fn builtin_plugin_dirs_that_exist_come_last_and_the_path_has_no_duplicates() {
    let tree = Tree::new();
    let configured = tree.mkdir("configured");
    let builtin_a = tree.mkdir("builtin-a");
    let builtin_missing = tree.root().join("builtin-missing");
    let overrides = DirOverrides {
        // The same directory twice, and one that is also built in.
        net_plugin_dirs: vec![configured.clone(), builtin_a.clone(), configured.clone()],
        ..DirOverrides::default()
    };
    let effective = resolve_with_builtin(
        &tree.dirs(),
        &PathsConfig::default(),
        &overrides,
        tree.root(),
        &[builtin_missing, builtin_a.clone()],
    )
    .unwrap();
    assert_eq!(effective.builtin_plugin_dirs, vec![builtin_a.clone()]);
    assert_eq!(effective.net_plugin.len(), 3);
    assert_eq!(effective.plugin_path(), vec![configured, builtin_a]);
}

#[test]
fn builtin_plugin_dirs_stay_when_net_plugin_is_configured() {
    let tree = Tree::new();
    let mine = tree.mkdir("mine");
    let builtin = tree.mkdir("builtin");
    tree.write(
        "local",
        "p.json",
        &paths_file(&format!(r#""net-plugin":"{}""#, mine.display())),
    );
    let dirs = tree.dirs();
    let paths = load_paths(&dirs).unwrap();
    let effective = resolve_with_builtin(
        &dirs,
        &paths,
        &DirOverrides::default(),
        Path::new("/"),
        std::slice::from_ref(&builtin),
    )
    .unwrap();
    assert_eq!(effective.plugin_path(), vec![mine, builtin]);
}
