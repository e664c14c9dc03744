//! `rkt trust`: keep a public key in rkt 1.30's keystore ([`rkt::trust`]), and say plainly
//! that this rkt verifies no image signatures with it.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;

use rkt::trust::{PublicKey, Scope};

use super::on_off::OnOff;
use super::GlobalArgs;

/// What `rkt trust` says after storing a key: the key verifies nothing here.
pub const NOT_VERIFIED: &str = "\
note: this rkt verifies no image signatures: it runs OCI and Docker images, which it fetches \
by digest (over TLS unless --insecure-options=http or tls) and checks against that digest; \
the key is kept in rkt 1.30's keystore, and nothing reads it. --insecure-options=image \
changes nothing either.";

/// Keep an OpenPGP public key where rkt 1.30 kept it, for scripts written for rkt 1.30; this
/// rkt verifies no image signatures with it.
///
/// The key goes to <local-config>/trustedkeys/prefix.d/PREFIX/FINGERPRINT, or
/// root.d/FINGERPRINT with --root.
///
/// This rkt verifies no image signatures: OCI and Docker images are fetched by digest and
/// checked against it, and carry no appc signature. Nothing reads the keystore; `rkt trust`
/// says so each time. Keys come from files (armored or binary, OpenPGP version 4); rkt
/// 1.30's key discovery (`--prefix` without a key, from the prefix's ac-discovery-pubkeys
/// meta tags) and keys from URLs are refused with the reason: there is nothing a fetched key
/// would be used for.
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The image name prefix the key is for (an appc identifier such as example.com/app).
    #[arg(long, value_name = "PREFIX")]
    pub prefix: Option<String>,

    /// The key is for every image (rkt's root keys). Excludes --prefix.
    #[arg(long, on_off = false, conflicts_with = "prefix")]
    pub root: bool,

    /// Store each key without showing its fingerprint and asking to confirm it on stdin.
    #[arg(long, on_off = false)]
    pub skip_fingerprint_review: bool,

    /// rkt 1.30 let keys be fetched from http:// URLs with it; accepted, and keys are read
    /// from files only.
    #[arg(long, on_off = false)]
    pub insecure_allow_http: bool,

    /// The keys: files holding an OpenPGP public key (ASCII-armored or binary).
    #[arg(value_name = "KEYFILE")]
    pub keys: Vec<String>,
}

pub fn run(global: &GlobalArgs, args: &TrustArgs) -> anyhow::Result<ExitCode> {
    let scope = match (&args.prefix, args.root) {
        (Some(prefix), _) => Scope::prefix(prefix)?,
        (None, true) => Scope::Root,
        (None, false) if args.keys.is_empty() => {
            bail!("rkt trust needs --prefix=PREFIX (a key for images named PREFIX...) or --root (a key for every image), and a KEYFILE")
        }
        (None, false) => bail!(
            "--root is needed to trust {} for every image, or --prefix=PREFIX for images named PREFIX...",
            args.keys[0]
        ),
    };
    if args.keys.is_empty() {
        match &scope {
            Scope::Prefix(prefix) => bail!(
                "--prefix={prefix}: no KEYFILE given, and this rkt does not discover keys (rkt \
                 1.30 fetched them from the ac-discovery-pubkeys meta tags at https://{prefix}): \
                 it verifies no image signatures, so a discovered key would not be used; images \
                 are checked against their digest only. Pass the key as a file to keep it in \
                 rkt 1.30's keystore anyway"
            ),
            Scope::Root => bail!("--root needs a KEYFILE"),
        }
    }
    let local_config = global.config_dirs()?.local;
    for given in &args.keys {
        if given.contains("://") {
            bail!(
                "{given}: keys from URLs are not fetched by this rkt, which verifies no image \
                 signatures; download the key, check its fingerprint and pass the file"
            );
        }
        let path = PathBuf::from(given);
        let bytes = std::fs::read(&path).with_context(|| format!("cannot read key {given}"))?;
        let key = PublicKey::parse(given, &bytes)?;
        if !args.skip_fingerprint_review {
            review(given, &scope, &key)?;
        }
        let stored = rkt::trust::store(&local_config, &scope, &key)?;
        match &scope {
            Scope::Prefix(prefix) => println!(
                "Added key for prefix {prefix:?} at {:?}",
                stored.display().to_string()
            ),
            Scope::Root => println!("Added root key at {:?}", stored.display().to_string()),
        }
    }
    eprintln!("{NOT_VERIFIED}");
    Ok(ExitCode::SUCCESS)
}

/// Shows the key's fingerprint and user IDs on stderr and asks on stdin whether to keep it,
/// as rkt 1.30 did; only `yes` (or `y`) keeps it.
fn review(given: &str, scope: &Scope, key: &PublicKey) -> anyhow::Result<()> {
    let mut err = std::io::stderr().lock();
    writeln!(err, "Key {given} for {scope}:")?;
    writeln!(err, "  fingerprint {}", key.fingerprint.to_uppercase())?;
    for uid in &key.user_ids {
        writeln!(err, "  user ID {uid}")?;
    }
    write!(err, "Are you sure you want to trust this key (yes/no)? ")?;
    err.flush()?;
    let stdin = std::io::stdin();
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer)?;
    if !stdin.is_terminal() {
        writeln!(err, "{}", answer.trim_end())?;
    }
    match answer.trim().to_ascii_lowercase().as_str() {
        "yes" | "y" => Ok(()),
        _ => bail!(
            "key {given} not trusted (the answer was not yes; --skip-fingerprint-review stores it without asking)"
        ),
    }
}
