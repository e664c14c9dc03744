//! The bodies of the fuzz targets: each takes arbitrary bytes, feeds them to one of rkt's
//! parsers, and panics only when a property fails (a crash is a panic too). The cargo-fuzz
//! binaries in `fuzz_targets/` call these, and so does the stable-Rust smoke loop in
//! `crates/rkt/tests/reliability/fuzz.rs` (which includes this file), so CI runs them
//! without nightly.
//!
//! Properties checked beyond "does not panic":
//! - `paths_config`: a file that parses parses to the same thing again.
//! - `net_conf`: a parsed list has a valid name and at least one plugin; its raw bytes
//!   parse again to the same name and plugin types.
//! - `cni_result`: a result converted to any supported version serialises to bytes that
//!   parse back as a result of that version.
//! - `net_selection`: an accepted selection is accepted again when given the same flags
//!   twice in a row only if it named no network (duplicates are errors).

use std::path::Path;

/// `paths.d` files (`rkt::config::parse_paths_file`).
pub fn paths_config(data: &[u8]) {
    let path = Path::new("/fuzz/paths.d/paths.json");
    if let Ok(first) = rkt::config::parse_paths_file(path, data) {
        let again = rkt::config::parse_paths_file(path, data).expect("parses twice");
        assert_eq!(format!("{first:?}"), format!("{again:?}"));
    }
}

/// Network configuration files: `.conflist` and `.conf` parsing.
pub fn net_conf(data: &[u8]) {
    for (kind, parsed) in [
        ("list", cni::conf::parse_list(data, None)),
        ("single", cni::conf::parse_single(data, None)),
    ] {
        let Ok(list) = parsed else {
            continue;
        };
        assert!(!list.plugins.is_empty(), "{kind}: a list without plugins");
        assert!(!list.name.is_empty(), "{kind}: a list without a name");
        if kind == "list" {
            let again = cni::conf::parse_list(&list.bytes, None).expect("its own bytes parse");
            assert_eq!(again.name, list.name);
            let types = |l: &cni::conf::NetworkConfigList| {
                l.plugins
                    .iter()
                    .map(|p| p.plugin_type.clone())
                    .collect::<Vec<_>>()
            };
            assert_eq!(types(&again), types(&list));
        }
    }
}

/// Plugin results: parsing (the first byte picks the configuration's version) and
/// conversion to every supported version.
pub fn cni_result(data: &[u8]) {
    let versions = cni::version::SUPPORTED;
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let config_version = versions[pick as usize % versions.len()];
    let Ok(result) = cni::result::CniResult::from_slice(rest, config_version) else {
        return;
    };
    let _ = result.to_bytes();
    for target in versions {
        if let Ok(converted) = result.convert_to(target) {
            let bytes = converted.to_bytes();
            if let Err(e) = cni::result::CniResult::from_slice(&bytes, target) {
                panic!(
                    "result converted from {config_version} to {target} does not parse back: {e}\n{}",
                    String::from_utf8_lossy(&bytes)
                );
            }
        }
    }
}

/// `--net` values: the bytes, split on newlines, are the flags.
pub fn net_selection(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let flags: Vec<String> = text.split('\n').map(str::to_string).collect();
    let Ok(selection) = rkt::networking::NetSelection::parse(&flags) else {
        return;
    };
    let _ = format!("{selection:?}");
}
