//! Regenerates the Rust code of CRI `runtime.v1` that `rkt-cri` compiles
//! (`crates/cri/src/proto/runtime.v1.rs`) from `crates/cri/proto/runtime/v1/api.proto`, with
//! protox (a protobuf compiler in Rust, so no `protoc` is needed) and tonic-prost-build.
//!
//! The generated file is committed: building `rkt-cri` needs neither this tool nor protoc.
//! Run it after changing the `.proto` (`cargo run -p rkt-cri-codegen`), then `cargo fmt`.
//! The `.proto` is Kubernetes 1.26's `api.proto` (cri-tools 1.26.1's vendored copy) with its
//! gogoproto import and options removed, which only Go's generator reads.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let proto_dir = crate_dir.join("proto");
    let out_dir = crate_dir.join("src/proto");
    let files = protox::compile(["runtime/v1/api.proto"], [&proto_dir])?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .out_dir(&out_dir)
        .compile_fds(files)?;
    println!("wrote {}", out_dir.join("runtime.v1.rs").display());
    Ok(())
}
