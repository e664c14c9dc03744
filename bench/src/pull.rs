//! Scenario 7, pulling an image: `rkt fetch` plus the unpacking a pod's root filesystem
//! needs, against `skopeo copy` to an OCI layout plus `umoci unpack`, of the same multi-layer
//! busybox image from a local `docker-registry` on 127.0.0.1 (plain HTTP), cold (empty store
//! or layout) and warm (everything already fetched once), variants alternating.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::BenchError;
use crate::proc::run;
use crate::scenarios::tool;
use crate::stats::{alternate, Series, Variant};

/// Layers of pseudo-random files on top of the busybox layer, and their size each.
const FILLER_LAYERS: usize = 4;
const FILLER_LAYER_BYTES: usize = 12 << 20;
const FILE_BYTES: usize = 1 << 20;

/// What scenario 7 measured.
#[derive(Debug)]
pub struct PullResult {
    /// The image's compressed layer bytes and layer count.
    pub bytes: u64,
    pub layers: usize,
    /// Timed runs per variant, after one warm-up.
    pub runs: usize,
    /// rkt, then skopeo + umoci: into an empty store / layout.
    pub cold: Vec<Series>,
    /// The same with everything fetched before.
    pub warm: Vec<Series>,
}

/// The scenario this module's errors name.
const SCENARIO: &str = "image pull";

fn remove(path: &Path) -> Result<(), BenchError> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(BenchError::io(path, e)),
        _ => Ok(()),
    }
}

/// `docker-registry` on a free loopback port, killed on drop.
struct Registry {
    child: Child,
    addr: String,
}

impl Registry {
    fn start(program: &Path, dir: &Path) -> Result<Registry, BenchError> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| BenchError::io("127.0.0.1:0", e))?
            .port();
        let addr = format!("127.0.0.1:{port}");
        let config = dir.join("registry.yml");
        let text = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: {addr}\n",
            dir.join("registry").display()
        );
        std::fs::write(&config, text).map_err(|e| BenchError::io(&config, e))?;
        let child = Command::new(program)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| BenchError::Spawn {
                program: program.display().to_string(),
                source,
            })?;
        let mut reg = Registry { child, addr };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(&reg.addr).is_err() {
            if let Ok(Some(status)) = reg.child.try_wait() {
                return Err(BenchError::scenario(
                    SCENARIO,
                    format!("docker-registry exited: {status}"),
                ));
            }
            if Instant::now() > deadline {
                return Err(BenchError::scenario(
                    SCENARIO,
                    format!("docker-registry did not listen on {}", reg.addr),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(reg)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Deterministic incompressible bytes (xorshift), like the binaries and data real images
/// carry after gzip has had its go at them.
fn filler(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Builds the test image as an OCI layout at `<work>/layout:v1` with umoci: busybox, then
/// [`FILLER_LAYERS`] layers of pseudo-random files.
fn build_image(umoci: &Path, busybox: &Path, work: &Path) -> Result<PathBuf, BenchError> {
    let layout = work.join("layout");
    let bundle = work.join("bundle");
    let image = format!("{}:v1", layout.display());
    let u = |args: &[&str]| run(umoci, args, &[], None).map(|_| ());
    u(&["init", "--layout", &layout.display().to_string()])?;
    u(&["new", "--image", &image])?;
    u(&[
        "config",
        "--image",
        &image,
        "--config.entrypoint",
        "/bin/sh",
    ])?;
    u(&["unpack", "--image", &image, &bundle.display().to_string()])?;
    let rootfs = bundle.join("rootfs");
    let w = |path: PathBuf, bytes: &[u8]| -> Result<(), BenchError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| BenchError::io(dir, e))?;
        }
        std::fs::write(&path, bytes).map_err(|e| BenchError::io(&path, e))
    };
    let busybox_bytes = std::fs::read(busybox).map_err(|e| BenchError::io(busybox, e))?;
    w(rootfs.join("bin/busybox"), &busybox_bytes)?;
    let sh = rootfs.join("bin/sh");
    std::os::unix::fs::symlink("busybox", &sh).map_err(|e| BenchError::io(&sh, e))?;
    w(rootfs.join("etc/hostname"), b"bench\n")?;
    let repack = || {
        u(&[
            "repack",
            "--refresh-bundle",
            "--image",
            &image,
            &bundle.display().to_string(),
        ])
    };
    repack()?;
    for layer in 0..FILLER_LAYERS {
        for file in 0..FILLER_LAYER_BYTES / FILE_BYTES {
            let seed = (layer * 1000 + file + 1) as u64 * 0x9E37_79B9_7F4A_7C15;
            w(
                rootfs.join(format!("data/layer{layer}/file{file}")),
                &filler(seed, FILE_BYTES),
            )?;
        }
        repack()?;
    }
    remove(&bundle)?;
    Ok(layout)
}

/// The image's compressed layer bytes and count, from the layout's manifest.
fn layer_sizes(layout: &Path) -> Result<(u64, usize), BenchError> {
    let read_json = |path: PathBuf| -> Result<serde_json::Value, BenchError> {
        let text = std::fs::read(&path).map_err(|e| BenchError::io(&path, e))?;
        serde_json::from_slice(&text)
            .map_err(|e| BenchError::scenario(SCENARIO, format!("{}: {e}", path.display())))
    };
    let blob = |digest: &str| {
        let (alg, hex) = digest.split_once(':').unwrap_or(("sha256", digest));
        layout.join("blobs").join(alg).join(hex)
    };
    let index = read_json(layout.join("index.json"))?;
    let digest = index["manifests"][0]["digest"]
        .as_str()
        .ok_or_else(|| BenchError::scenario(SCENARIO, "the layout's index lists no manifest"))?
        .to_owned();
    let manifest = read_json(blob(&digest))?;
    let layers = manifest["layers"].as_array().cloned().unwrap_or_default();
    let bytes = layers.iter().filter_map(|l| l["size"].as_u64()).sum();
    Ok((bytes, layers.len()))
}

/// Runs scenario 7 with `rkt` and this benchmark's own `unpack-layers` (`self_exe`).
pub fn image_pull(
    rkt: &Path,
    self_exe: &Path,
    warmup: usize,
    iterations: usize,
) -> Result<PullResult, BenchError> {
    let umoci = tool("umoci", "install umoci")?;
    let skopeo = tool("skopeo", "install skopeo")?;
    let registry_bin = tool("docker-registry", "install docker-registry")?;
    let busybox = tool("busybox", "install busybox-static")?;
    let work = tempfile::tempdir().map_err(|e| BenchError::io("/tmp", e))?;
    let work = work.path();
    let layout = build_image(&umoci, &busybox, work)?;
    let (bytes, layers) = layer_sizes(&layout)?;
    let registry = Registry::start(&registry_bin, work)?;
    let reference = format!("docker://{}/bench/busybox:v1", registry.addr);
    run(
        &skopeo,
        &[
            "copy",
            "--quiet",
            "--dest-tls-verify=false",
            &format!("oci:{}:v1", layout.display()),
            &reference,
        ],
        &[],
        None,
    )?;

    let data = work.join("rkt-data");
    let oci = work.join("oci");
    let oci_image = format!("oci:{}:v1", oci.join("layout").display());
    let oci_ref = format!("{}:v1", oci.join("layout").display());
    let bundle = oci.join("bundle");

    // One pull each way; `cold` empties the store or layout first (untimed).
    let rkt_pull = |cold: bool| -> Result<Duration, BenchError> {
        if cold {
            remove(&data)?;
        }
        let dir = format!("--dir={}", data.display());
        let start = Instant::now();
        let out = run(
            rkt,
            &[
                dir.as_str(),
                "--insecure-options=http",
                "fetch",
                "--pull-policy=update",
                &reference,
            ],
            &[],
            None,
        )?;
        let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let store = data.join("images").display().to_string();
        let out = run(self_exe, &["unpack-layers", &store, &id], &[], None)?;
        let took = start.elapsed();
        let unpacked = String::from_utf8_lossy(&out.stdout).lines().count();
        if unpacked != layers {
            return Err(BenchError::scenario(
                SCENARIO,
                format!("rkt unpacked {unpacked} layers of {id}, the image has {layers}"),
            ));
        }
        Ok(took)
    };
    let oci_pull = |cold: bool| -> Result<Duration, BenchError> {
        if cold {
            remove(&oci)?;
        }
        remove(&bundle)?;
        std::fs::create_dir_all(&oci).map_err(|e| BenchError::io(&oci, e))?;
        let start = Instant::now();
        run(
            &skopeo,
            &[
                "copy",
                "--quiet",
                "--src-tls-verify=false",
                &reference,
                &oci_image,
            ],
            &[],
            None,
        )?;
        run(
            &umoci,
            &["unpack", "--image", &oci_ref, &bundle.display().to_string()],
            &[],
            None,
        )?;
        Ok(start.elapsed())
    };
    let cold = {
        let mut variants: Vec<Variant<'_>> = vec![
            ("rkt fetch + unpack", Box::new(|| rkt_pull(true))),
            ("skopeo copy + umoci unpack", Box::new(|| oci_pull(true))),
        ];
        alternate(&mut variants, warmup, iterations)?
    };
    // Warm: both have the image from the last cold run; one untimed pull makes sure.
    rkt_pull(false)?;
    oci_pull(false)?;
    let warm = {
        let mut variants: Vec<Variant<'_>> = vec![
            ("rkt fetch + unpack", Box::new(|| rkt_pull(false))),
            ("skopeo copy + umoci unpack", Box::new(|| oci_pull(false))),
        ];
        alternate(&mut variants, warmup, iterations)?
    };
    remove(&oci)?;
    remove(&data)?;
    drop(registry);
    Ok(PullResult {
        bytes,
        layers,
        runs: iterations,
        cold,
        warm,
    })
}

/// `rkt-bench unpack-layers STORE ID`: unpacks every layer of image `ID` in the image store
/// at `STORE` the way a pod's root filesystem needs them (each once, into the store; the
/// overlay mount over them is left out), printing the layer directories.
pub fn unpack_layers_command(store: &Path, id: &str) -> Result<String, String> {
    let store = image::Store::open(store).map_err(|e| image::error::chain(&e))?;
    let record = store.resolve(id).map_err(|e| image::error::chain(&e))?;
    let dirs = image::layers::layer_dirs(&store, &record).map_err(|e| image::error::chain(&e))?;
    Ok(dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join("\n"))
}
