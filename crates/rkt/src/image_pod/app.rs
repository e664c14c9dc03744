//! An app from a stored image, the one way `rkt run`, `rkt prepare` (and the app API and the
//! CRI after them) build one: where a data directory keeps its image store ([`open_store`]),
//! whether a word names an image ([`is_image`]), and the app an image's config makes
//! ([`app_from_image`]): its Entrypoint + Cmd (an `exec` replaces the Entrypoint and drops
//! the Cmd, `args` replace the Cmd), its Env under the caller's, its WorkingDir and User,
//! `HOME` from the user when nobody sets it, and the ports it exposes. Fetching the image is
//! the caller's (it shows progress and finds credentials); this reads the store only.

use std::path::{Path, PathBuf};

use image::{ImageRecord, ImageRef, Store, StoreError};

use super::user::AppRoot;
use super::AppImage;
use crate::podstore::App;

/// Building an app from an image failed.
#[derive(Debug, thiserror::Error)]
pub enum ImageAppError {
    /// The data directory's image store could not be opened.
    #[error("opening the image store {}", path.display())]
    OpenStore {
        path: PathBuf,
        #[source]
        source: StoreError,
    },
    /// The image's config could not be read from the store.
    #[error("reading the config of image {id}")]
    Config {
        id: String,
        #[source]
        source: StoreError,
    },
    /// Neither the image nor the caller says what to run.
    #[error("image {image} ({id}) has no Entrypoint or Cmd: give the program with --exec=PATH")]
    NoProgram { image: String, id: String },
}

/// What the caller says over the image's config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// The program, in place of the Entrypoint (and the Cmd is dropped).
    pub exec: Option<String>,
    /// The arguments, in place of the Cmd.
    pub args: Option<Vec<String>>,
    /// Whether the caller named the app; else the name is the image's ([`default_name`]).
    pub named: bool,
    /// Unpack the image's layers into the pod instead of mounting an overlay of them.
    pub no_overlay: bool,
}

/// The image store of the data directory `data`.
pub fn store_dir(data: &Path) -> PathBuf {
    data.join("images")
}

/// Opens (creating it when missing) the image store of the data directory `data`.
pub fn open_store(data: &Path) -> Result<Store, ImageAppError> {
    let root = store_dir(data);
    Store::open(&root).map_err(|source| ImageAppError::OpenStore { path: root, source })
}

/// Whether `first` (the first word of an app) names an image: a transport, an ID, or a name
/// the store of the data directory `data` holds (a stored name wins over a host program of
/// the same name: the host's is then run by its path). A path (`/…`, `./…`, `../…`) never
/// is. A store is never created just to look.
pub fn is_image(data: &Path, first: &str) -> Result<bool, ImageAppError> {
    // A transport prefix makes it an image even when the rest is bad: the reference's
    // error then names it, instead of a host command "docker://…" not being found.
    const PREFIXES: [&str; 5] = [
        "docker://",
        "oci:",
        "oci-archive:",
        "docker-archive:",
        "sha256:",
    ];
    if ImageRef::is_explicit(first) || PREFIXES.iter().any(|p| first.starts_with(p)) {
        return Ok(true);
    }
    if first.starts_with(['/', '.']) {
        return Ok(false);
    }
    // Never create a store just to look: a host command stays one when there is none.
    if !store_dir(data).join("images.json").is_file() {
        return Ok(false);
    }
    Ok(open_store(data)?.resolve(first).is_ok())
}

/// The app of the stored image `record`, which `text` (parsed as `reference`) names: its
/// program and arguments per `overrides`, then `base` builds the app the caller's options
/// describe (names, environment, annotations, isolators; `--user` names looked up in the
/// image's root, which it is given) for that command line, and the image's Env, WorkingDir,
/// User and exposed ports are added to it. An error of `base` is returned as it is.
pub fn app_from_image<E: From<ImageAppError>>(
    store: &Store,
    record: &ImageRecord,
    reference: &ImageRef,
    text: &str,
    overrides: &Overrides,
    base: impl FnOnce(Vec<String>, AppRoot<'_>) -> Result<App, E>,
) -> Result<App, E> {
    let config = store
        .config(record)
        .map_err(|source| ImageAppError::Config {
            id: record.id.to_string(),
            source,
        })?;
    let config = config.config().clone().unwrap_or_default();

    let exec = &overrides.exec;
    let mut argv: Vec<String> = match exec {
        Some(path) => vec![path.clone()],
        None => config.entrypoint().clone().unwrap_or_default(),
    };
    match &overrides.args {
        Some(given) => argv.extend(given.iter().cloned()),
        None if exec.is_none() => argv.extend(config.cmd().clone().unwrap_or_default()),
        None => {}
    }
    if argv.is_empty() {
        return Err(ImageAppError::NoProgram {
            image: text.to_string(),
            id: record.id.to_string(),
        }
        .into());
    }
    // The base app (names, the caller's environment, annotations) as for a host command,
    // then the image's.
    let mut app = base(
        argv.clone(),
        AppRoot::Image {
            store,
            record,
            name: text,
        },
    )?;
    let mut env: Vec<(String, String)> = config
        .env()
        .clone()
        .unwrap_or_default()
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.append(&mut app.env);
    app.env = env;
    let home_from_user = !app.inherit_env && !app.env.iter().any(|(k, _)| k == "HOME");
    app.exec = argv;
    let name = display_name(record, reference, text);
    if !overrides.named {
        app.name = default_name(&name);
    }
    app.image = Some(AppImage {
        id: record.id.to_string(),
        name,
        store: store.root().to_path_buf(),
        working_dir: config.working_dir().clone().filter(|d| !d.is_empty()),
        user: config.user().clone().filter(|u| !u.is_empty()),
        no_overlay: overrides.no_overlay,
        home_from_user,
        exposed_ports: config.exposed_ports().clone().unwrap_or_default(),
    });
    Ok(app)
}

/// The image's name as status and list show it.
fn display_name(record: &ImageRecord, reference: &ImageRef, text: &str) -> String {
    image::fetch::store_name(reference)
        .or_else(|| record.names.first().cloned())
        .unwrap_or_else(|| text.to_string())
}

/// The default app name: the last component of the image's repository or path, without a
/// tag or digest (`host/lib/busybox:v1` → `busybox`).
pub fn default_name(name: &str) -> String {
    let base = name
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(name);
    let base = base.split(['@', ':']).next().unwrap_or(base);
    if base.is_empty() || base.contains(['=', ' ']) {
        "app".to_string()
    } else {
        base.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_app_name_is_the_repository_or_directory() {
        assert_eq!(default_name("127.0.0.1:5000/test/busybox:v1"), "busybox");
        assert_eq!(
            default_name("docker.io/library/alpine@sha256:abc"),
            "alpine"
        );
        assert_eq!(default_name("oci:/tmp/layout:v1"), "layout");
    }
}
