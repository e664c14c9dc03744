//! Scenario 8, starting a pod from a stored image: `rkt run IMAGE` (the image already in the
//! store, its layers already unpacked: an overlay mount over them per pod) against the same
//! pod with `--rootfs` of the same tree unpacked by `umoci unpack`, both `--net=none` and
//! running `busybox true`, variants alternating in one run. The difference of the medians is
//! what a pod pays for coming from an image (target: at most 3 ms).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::BenchError;
use crate::proc::run;
use crate::scenarios::tool;
use crate::stats::{alternate, Series, Variant};

/// The labels of the two variants, in order.
pub const FROM_IMAGE: &str = "rkt run IMAGE (stored)";
pub const FROM_ROOTFS: &str = "rkt run --rootfs (the unpacked tree)";

/// What scenario 8 measured: the image-pod series first, then the `--rootfs` one.
#[derive(Debug)]
pub struct ImageStartResult {
    pub layers: usize,
    pub series: Vec<Series>,
}

/// The scenario this module's errors name.
const SCENARIO: &str = "image pod start";

/// An OCI layout `<work>/layout:v1` of two layers: busybox (`/bin/busybox`, `/bin/sh`),
/// then a small layer with `/etc/second`.
fn build_image(umoci: &Path, busybox: &Path, work: &Path) -> Result<PathBuf, BenchError> {
    let layout = work.join("layout");
    let bundle = work.join("build");
    let image = format!("{}:v1", layout.display());
    let bundle_s = bundle.display().to_string();
    let u = |args: &[&str]| run(umoci, args, &[], None).map(|_| ());
    u(&["init", "--layout", &layout.display().to_string()])?;
    u(&["new", "--image", &image])?;
    u(&["unpack", "--image", &image, &bundle_s])?;
    let rootfs = bundle.join("rootfs");
    let bin = rootfs.join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| BenchError::io(&bin, e))?;
    let etc = rootfs.join("etc");
    std::fs::create_dir_all(&etc).map_err(|e| BenchError::io(&etc, e))?;
    std::fs::copy(busybox, bin.join("busybox")).map_err(|e| BenchError::io(busybox, e))?;
    std::os::unix::fs::symlink("busybox", bin.join("sh"))
        .map_err(|e| BenchError::io(bin.join("sh"), e))?;
    u(&["repack", "--refresh-bundle", "--image", &image, &bundle_s])?;
    let second = etc.join("second");
    std::fs::write(&second, b"layer 2\n").map_err(|e| BenchError::io(&second, e))?;
    u(&["repack", "--image", &image, &bundle_s])?;
    std::fs::remove_dir_all(&bundle).map_err(|e| BenchError::io(&bundle, e))?;
    Ok(layout)
}

/// `rkt --dir=DATA fetch oci:LAYOUT:v1`: the image's ID.
fn fetch(rkt: &Path, data: &Path, layout: &Path) -> Result<String, BenchError> {
    let dir = format!("--dir={}", data.display());
    let image = format!("oci:{}:v1", layout.display());
    let out = run(rkt, &[dir.as_str(), "fetch", &image], &[], None)?;
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !id.starts_with("sha256:") {
        return Err(BenchError::scenario(
            SCENARIO,
            format!("rkt fetch {image} printed {id:?}"),
        ));
    }
    Ok(id)
}

/// Scenario 8's two-layer busybox image, built in `work` and stored in the data directory
/// `data` (scenario 9's image app): its ID. Needs umoci and busybox-static.
pub fn stored_image(rkt: &Path, data: &Path, work: &Path) -> Result<String, BenchError> {
    let umoci = tool("umoci", "install umoci")?;
    let busybox = tool("busybox", "install busybox-static")?;
    let layout = build_image(&umoci, &busybox, work)?;
    fetch(rkt, data, &layout)
}

/// Runs scenario 8 with `rkt`.
pub fn image_start(
    rkt: &Path,
    warmup: usize,
    iterations: usize,
) -> Result<ImageStartResult, BenchError> {
    let umoci = tool("umoci", "install umoci")?;
    let busybox = tool("busybox", "install busybox-static")?;
    let work = tempfile::tempdir().map_err(|e| BenchError::io("/tmp", e))?;
    let work = work.path();
    let layout = build_image(&umoci, &busybox, work)?;
    let data = work.join("data");
    let dir = format!("--dir={}", data.display());

    // The image in the store, and the same tree unpacked by umoci for --rootfs (untimed).
    let id = fetch(rkt, &data, &layout)?;
    let bundle = work.join("bundle");
    run(
        &umoci,
        &[
            "unpack",
            "--image",
            &format!("{}:v1", layout.display()),
            &bundle.display().to_string(),
        ],
        &[],
        None,
    )?;
    let rootfs = format!("--rootfs={}", bundle.join("rootfs").display());

    let timed = |args: &[&str]| -> Result<Duration, BenchError> {
        let start = Instant::now();
        run(rkt, args, &[], None)?;
        Ok(start.elapsed())
    };
    let series = {
        let mut variants: Vec<Variant<'_>> = vec![
            (
                FROM_IMAGE,
                Box::new(|| {
                    timed(&[
                        dir.as_str(),
                        "run",
                        "--net=none",
                        &id,
                        "--exec=/bin/busybox",
                        "--",
                        "true",
                    ])
                }),
            ),
            (
                FROM_ROOTFS,
                Box::new(|| {
                    timed(&[
                        dir.as_str(),
                        "run",
                        "--net=none",
                        &rootfs,
                        "--",
                        "/bin/busybox",
                        "true",
                    ])
                }),
            ),
        ];
        alternate(&mut variants, warmup, iterations)?
    };
    // The exited pods go (untimed), unmounting nothing: runs unmount their own overlays.
    run(
        rkt,
        &[
            dir.as_str(),
            "gc",
            "--grace-period=0s",
            "--expire-prepared=0s",
        ],
        &[],
        None,
    )?;
    Ok(ImageStartResult { layers: 2, series })
}
