//! `rkt image`: list, remove, garbage-collect and show the images in the store.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};

use ::image::store::now_secs;
use ::image::{ImageRecord, Removed, Store, StoreError};

use super::fetch::image_store;
use super::on_off::OnOff;
use super::status::Format;
use super::GlobalArgs;

fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("{e} (expected e.g. 30m, 24h, 0s)"))
}

/// Manage the images in the store.
#[derive(Debug, Args)]
pub struct ImageArgs {
    #[command(subcommand)]
    pub command: ImageCommand,
}

#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// List images: ID, NAME, SIZE, IMPORT TIME, LAST USED.
    List(ListArgs),
    /// Remove a name (untag), or an image by ID, ID prefix or its last name; blobs go at the
    /// next `rkt image gc`.
    Rm(RmArgs),
    /// Remove images unused for longer than the grace period, blobs no image refers to, and
    /// partial downloads.
    Gc(GcArgs),
    /// Print an image's stored manifest.
    CatManifest(ShowArgs),
    /// Print an image's record and config as JSON.
    Inspect(ShowArgs),
}

/// A column of `rkt image list`, by rkt 1.30's name for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Field {
    /// The image's ID.
    Id,
    /// Its names, comma-separated (`-` when it has none).
    Name,
    /// What it takes in the store.
    Size,
    /// When it was stored.
    #[value(name = "importtime")]
    ImportTime,
    /// When a pod last used it.
    #[value(name = "lastused")]
    LastUsed,
}

impl Field {
    fn header(self) -> &'static str {
        match self {
            Field::Id => "ID",
            Field::Name => "NAME",
            Field::Size => "SIZE",
            Field::ImportTime => "IMPORT TIME",
            Field::LastUsed => "LAST USED",
        }
    }
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Do not print the header line.
    #[arg(long, on_off = false)]
    pub no_legend: bool,
    /// The columns to print, in this order (comma-separated; text output only).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "FIELD[,FIELD...]",
        default_value = "id,name,size,importtime,lastused"
    )]
    pub fields: Vec<Field>,
    /// The long form of each column: the whole ID, the size in bytes, the times as dates
    /// (rkt 1.30's `2006-01-02 15:04:05.999 -0700 MST` layout, local time) instead of "3
    /// minutes ago".
    #[arg(long, on_off = false)]
    pub full: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    /// IDs, ID prefixes (12+ hex digits) or names.
    #[arg(required = true, value_name = "IMAGE")]
    pub images: Vec<String>,
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Keep images used within this time.
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = duration)]
    pub grace_period: Duration,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// ID, ID prefix (12+ hex digits) or name.
    #[arg(value_name = "IMAGE")]
    pub image: String,
}

pub fn run(global: &GlobalArgs, args: &ImageArgs) -> anyhow::Result<ExitCode> {
    let store = image_store(global)?;
    match &args.command {
        ImageCommand::List(a) => list(&store, a),
        ImageCommand::Rm(a) => rm(global, &store, a),
        ImageCommand::Gc(a) => gc(global, &store, a),
        ImageCommand::CatManifest(a) => {
            let record = store.resolve(&a.image)?;
            let manifest: serde_json::Value =
                serde_json::from_slice(&store.read_blob(&record.manifest)?)?;
            println!("{}", serde_json::to_string_pretty(&manifest)?);
            Ok(ExitCode::SUCCESS)
        }
        ImageCommand::Inspect(a) => {
            let record = store.resolve(&a.image)?;
            let config: serde_json::Value = serde_json::from_slice(&store.read_blob(&record.id)?)?;
            let mut out = record_json(&record);
            out["config"] = config;
            println!("{}", serde_json::to_string_pretty(&out)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn record_json(r: &ImageRecord) -> serde_json::Value {
    serde_json::json!({
        "id": r.id.to_string(),
        "names": r.names,
        "manifest": r.manifest.to_string(),
        "size": r.size,
        "importTime": r.imported,
        "lastUsed": r.last_used,
    })
}

fn ago(secs: u64) -> String {
    let age = humantime::format_duration(Duration::from_secs(now_secs().saturating_sub(secs)));
    format!("{} ago", age.to_string().split(' ').next().unwrap_or("0s"))
}

fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn list(store: &Store, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let mut images = store.images()?;
    images.sort_by_key(|r| r.imported);
    if args.format != Format::Text {
        let all: Vec<_> = images.iter().map(record_json).collect();
        args.format.print_json(&all)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    if !args.no_legend {
        rows.push(args.fields.iter().map(|f| f.header().to_string()).collect());
    }
    let when = |secs: u64| match args.full {
        true => rkt::podstore::time::Timestamp(std::time::UNIX_EPOCH + Duration::from_secs(secs))
            .go_layout(),
        false => ago(secs),
    };
    for r in &images {
        let cell = |field: Field| match field {
            Field::Id if args.full => r.id.to_string(),
            Field::Id => r.id.short().to_string(),
            Field::Name if r.names.is_empty() => "-".into(),
            Field::Name => r.names.join(","),
            Field::Size if args.full => r.size.to_string(),
            Field::Size => size(r.size),
            Field::ImportTime => when(r.imported),
            Field::LastUsed => when(r.last_used),
        };
        rows.push(args.fields.iter().map(|f| cell(*f)).collect());
    }
    let mut widths = vec![0usize; args.fields.len()];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
    Ok(ExitCode::SUCCESS)
}

/// The IDs of the images pods of this data directory use, each with their pods' UUIDs.
fn in_use(global: &GlobalArgs) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    let pods = super::pod_args::store(global)?;
    rkt::image_pod::images_in_use(&pods)
        .with_context(|| format!("finding the images pods in {} use", pods.dir().display()))
}

fn rm(global: &GlobalArgs, store: &Store, args: &RmArgs) -> anyhow::Result<ExitCode> {
    let used = in_use(global)?;
    // As rkt did: an image a pod uses stays until the pod is removed (its other names
    // can still be untagged).
    let used_ids: BTreeSet<::image::Digest> =
        used.keys().filter_map(|id| id.parse().ok()).collect();
    let mut failed = 0;
    for query in &args.images {
        match store.remove(query, &used_ids) {
            Ok(Removed::Untagged { name, .. }) => println!("untagged {name}"),
            Ok(Removed::Image(record)) => {
                for name in &record.names {
                    println!("untagged {name}");
                }
                println!("removed image {}", record.id);
            }
            Err(StoreError::InUse { image }) => {
                let pods = used.get(&image.to_string()).cloned().unwrap_or_default();
                eprintln!(
                    "rkt: image rm: image {image} is used by pod(s) {}; remove them first (`rkt rm`, or `rkt gc` once they exited)",
                    pods.join(", ")
                );
                failed += 1;
            }
            Err(e) => {
                eprintln!("rkt: image rm: {}", rkt::error::chain(&e));
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!("image rm: {failed} image(s) not removed, see above");
    }
    Ok(ExitCode::SUCCESS)
}

fn gc(global: &GlobalArgs, store: &Store, args: &GcArgs) -> anyhow::Result<ExitCode> {
    // Images that pods use (prepared, running, exited and not yet removed) stay, with
    // their blobs and unpacked layers.
    let used: BTreeSet<::image::Digest> = in_use(global)?
        .keys()
        .filter_map(|id| id.parse().ok())
        .collect();
    let report = store.gc(args.grace_period, &used);
    for id in &report.images {
        println!("removed image {id}");
    }
    if !report.blobs.is_empty() || report.partials > 0 {
        println!(
            "removed {} unreferenced blob(s) and {} partial download(s)",
            report.blobs.len(),
            report.partials
        );
    }
    if report.layers > 0 {
        println!("removed {} unpacked layer(s)", report.layers);
    }
    for err in &report.errors {
        eprintln!("rkt: image gc: {}", rkt::error::chain(err));
    }
    if !report.errors.is_empty() {
        bail!(
            "image gc: {} failure(s), see above; run it again to retry",
            report.errors.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}
