//! `rkt fetch`: store images from registries, OCI layouts and archives, printing their IDs.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::on_off::OnOff;

use ::image::transport::registry::{Credentials, RegistryOptions};
use ::image::{FetchOptions, ImageRef, Platform, PullPolicy};
use rkt::config::auth::load_docker_auth;

use super::{GlobalArgs, Insecure};

/// When `rkt fetch` goes to an image's source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PullPolicyArg {
    /// Only the store: an image not stored is an error.
    Never,
    /// Fetch only when the image is not stored under this name.
    New,
    /// Always ask the source (blobs already stored are not fetched again).
    Update,
}

/// rkt 1.30's older spellings of `--pull-policy` (`run`, `prepare`, `fetch`): each is
/// refused together with the other or with `--pull-policy`.
#[derive(Debug, Clone, Default, Args)]
pub struct StoreArgs {
    /// Only use images already in the store, never their source: `--pull-policy=never`
    /// (rkt 1.30's older flag).
    #[arg(long, on_off = false, conflicts_with_all = ["no_store", "pull_policy"])]
    pub store_only: bool,

    /// Always ask the image's source, whatever the store holds under that name (blobs
    /// already stored are not downloaded again): `--pull-policy=update` (rkt 1.30's older
    /// flag).
    #[arg(long, on_off = false, conflicts_with = "pull_policy")]
    pub no_store: bool,
}

impl StoreArgs {
    /// The pull policy in effect: `--store-only` or `--no-store` when given (clap refuses
    /// them with an explicit `--pull-policy`), else `pull_policy`.
    pub fn policy(&self, pull_policy: PullPolicyArg) -> PullPolicyArg {
        match (self.store_only, self.no_store) {
            (true, _) => PullPolicyArg::Never,
            (_, true) => PullPolicyArg::Update,
            _ => pull_policy,
        }
    }
}

/// Fetch images into the store and print the ID (sha256 of the config) of each, one per
/// line. IMAGE is docker://[HOST[:PORT]/]NAME[:TAG|@sha256:DIGEST], oci:PATH[:TAG],
/// oci-archive:PATH[:TAG], docker-archive:PATH, an image ID (12+ hex digits) or a name
/// already in the store. Registry credentials come from auth.d/*.json ("dockerAuth") in the
/// configuration directories.
#[derive(Debug, Args)]
pub struct FetchArgs {
    /// When to go to the image's source.
    #[arg(long, value_enum, default_value_t = PullPolicyArg::New)]
    pub pull_policy: PullPolicyArg,

    #[command(flatten)]
    pub store: StoreArgs,

    /// Print each image's whole ID (what this rkt prints anyway; rkt 1.30 shortened it
    /// without --full). `--full=false`: its first 12 hex digits, as `rkt image
    /// list` shows it (an image ID every command takes).
    #[arg(long, on_off = true)]
    pub full: bool,

    /// The images.
    #[arg(required = true, value_name = "IMAGE")]
    pub images: Vec<String>,
}

/// The fetch options that `--pull-policy` and the global `--insecure-options` (`http`: plain
/// HTTP instead of HTTPS; `tls`: any certificate) ask for. Registry CA files are Docker's,
/// `/etc/docker/certs.d/HOST[:PORT]/*.crt`, beside the system's trust store.
pub fn fetch_options(policy: PullPolicyArg, insecure: &Insecure) -> anyhow::Result<FetchOptions> {
    Ok(FetchOptions {
        policy: match policy {
            PullPolicyArg::Never => PullPolicy::Never,
            PullPolicyArg::New => PullPolicy::New,
            PullPolicyArg::Update => PullPolicy::Update,
        },
        registry: RegistryOptions {
            plain_http: insecure.http,
            insecure_tls: insecure.tls,
            ..RegistryOptions::default()
        },
        platform: Platform::host(),
    })
}

pub fn run(global: &GlobalArgs, args: &FetchArgs) -> anyhow::Result<ExitCode> {
    let options = fetch_options(args.store.policy(args.pull_policy), &global.insecure()?)?;
    // Every reference is checked before anything is fetched.
    let refs = args
        .images
        .iter()
        .map(|text| ImageRef::parse(text).map(|r| (r, text)))
        .collect::<Result<Vec<_>, _>>()?;
    let store = image_store(global)?;
    for (reference, text) in refs {
        let record = fetch_image(global, &store, &reference, text, &options)?;
        match args.full {
            true => println!("{}", record.id),
            false => println!("{}", record.id.short()),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Fetches one image (subject to the pull policy), with the registry credentials that
/// auth.d has for its host, and a progress line when stderr is a terminal.
pub fn fetch_image(
    global: &GlobalArgs,
    store: &::image::Store,
    reference: &ImageRef,
    text: &str,
    options: &FetchOptions,
) -> anyhow::Result<::image::ImageRecord> {
    let mut options = options.clone();
    // Mirrors: `<config dir>/certs.d/HOST/hosts.toml` (containerd's layout).
    options.registry.hosts_dirs = global.config_dirs()?.registry_hosts_dirs();
    if let ImageRef::Docker(d) = reference {
        let auth = load_docker_auth(&global.config_dirs()?)?;
        if let Some(a) = auth.get(&d.host).or_else(|| auth.get(d.api_host())) {
            global.debug(format_args!(
                "credentials for {} from {}",
                d.host,
                a.origin.display()
            ));
            options.registry.credentials = Some(Credentials {
                user: a.user.clone(),
                password: a.password.clone(),
            });
        }
    }
    // A progress line only on a terminal; the line is erased before any error is shown.
    let result = match super::progress::TermProgress::on_stderr() {
        Some(mut progress) => {
            ::image::fetch::fetch_with_progress(store, reference, text, &options, &mut progress)
        }
        None => ::image::fetch(store, reference, text, &options),
    };
    result.with_context(|| format!("fetching {text}"))
}

/// The image store of the data directory in effect: `<data dir>/images`.
pub fn image_store(global: &GlobalArgs) -> anyhow::Result<::image::store::Store> {
    let dirs = global.effective_dirs(&super::NetDirArgs::default())?;
    image_store_in(&dirs.data.value)
}

/// The image store of the data directory `data`.
pub fn image_store_in(data: &std::path::Path) -> anyhow::Result<::image::store::Store> {
    Ok(rkt::image_pod::app::open_store(data)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--insecure-options=http` and `tls` reach the registry client, each on its own;
    /// without them the client speaks HTTPS with certificate checks.
    #[test]
    fn insecure_options_reach_the_registry_client() {
        let reg = |insecure: Insecure| {
            fetch_options(PullPolicyArg::New, &insecure)
                .unwrap()
                .registry
        };
        let secure = reg(Insecure::default());
        assert!(!secure.plain_http && !secure.insecure_tls);
        assert_eq!(
            secure.certs_dirs,
            vec![std::path::PathBuf::from("/etc/docker/certs.d")]
        );
        let http = reg(Insecure {
            http: true,
            ..Insecure::default()
        });
        assert!(http.plain_http && !http.insecure_tls);
        let tls = reg(Insecure {
            tls: true,
            ..Insecure::default()
        });
        assert!(!tls.plain_http && tls.insecure_tls);
    }
}
