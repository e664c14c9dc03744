//! The fuzz targets on stable Rust: the bodies in `fuzz/src/lib.rs` (the same functions
//! the cargo-fuzz binaries call) fed 20,000 inputs each from a seeded generator: mutations
//! of valid seeds (byte flips, JSON tokens, cuts, splices, invalid UTF-8) and random JSON
//! documents made of the keys the parsers know. A panic anywhere fails the test and prints
//! the seed and the input; `RKT_FUZZ_SEED` and `RKT_FUZZ_ITERATIONS` reproduce or extend a
//! run. Every crash found becomes a case in `regressions` below.

#[path = "../../../../fuzz/src/lib.rs"]
mod targets;

use std::panic::{catch_unwind, AssertUnwindSafe};

/// A fuzz target body.
type Target = fn(&[u8]);

/// xorshift64*: seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\"",
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1e999",
    "18446744073709551616",
    "\"\"",
    "\\u0000",
    "\\ud800",
    "\u{0}",
    "\u{feff}",
    "0.1.0",
    "0.2.0",
    "0.3.0",
    "0.3.1",
    "0.4.0",
    "1.0.0",
    "1.1.0",
    "9.9.9",
    "\"cniVersion\"",
    "\"name\"",
    "\"plugins\"",
    "\"type\"",
    "\"ips\"",
    "\"ip4\"",
    "\"ip6\"",
    "\"interfaces\"",
    "\"interface\"",
    "\"address\"",
    "\"gateway\"",
    "\"routes\"",
    "\"dst\"",
    "\"gw\"",
    "\"dns\"",
    "\"version\"",
    "\"4\"",
    "\"6\"",
    "\"10.0.0.1/24\"",
    "\"fd00::1/64\"",
    "\"::\"",
    "\"0.0.0.0/0\"",
    "\"10.0.0.1/99\"",
    "\"data\"",
    "\"net-conf\"",
    "\"net-plugin\"",
    "\"rktKind\"",
    "\"rktVersion\"",
    "\"paths\"",
    "\"v1\"",
    "\"capabilities\"",
    "\"runtimeConfig\"",
    "\"prevResult\"",
    "\"cniVersions\"",
];

const NET_TOKENS: &[&str] = &[
    "default",
    "default-restricted",
    "host",
    "none",
    "all",
    ",",
    ":",
    ";",
    "=",
    "IP=10.0.0.1",
    "IP=fd00::1",
    "\n",
    "",
    "a",
    "a:b",
    "K=V;K2=V2",
    "::",
    "é",
    "\u{0}",
    "-",
    "_",
    ".",
];

fn seeds_paths() -> Vec<Vec<u8>> {
    [
        r#"{"rktKind":"paths","rktVersion":"v1","data":"/var/lib/rkt"}"#,
        r#"{"rktKind":"paths","rktVersion":"v1","net-conf":"/etc/rkt/net.d","net-plugin":["/a","/b"]}"#,
        r#"{"rktKind":"paths","rktVersion":"v1","net-plugin":"/opt/cni/bin"}"#,
        r#"{"rktKind":"paths","rktVersion":"v2"}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

fn seeds_conf() -> Vec<Vec<u8>> {
    [
        r#"{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge","ipam":{"type":"host-local","subnet":"10.1.0.0/16"}},{"type":"portmap","capabilities":{"portMappings":true}}]}"#,
        r#"{"cniVersion":"0.4.0","name":"n","type":"ptp","ipMasq":true,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.0.0.0/24"}]]}}"#,
        r#"{"cniVersions":["0.3.1","1.1.0"],"name":"x","disableCheck":true,"disableGC":"true","plugins":[{"type":"a"}]}"#,
        r#"{"name":"old","type":"loopback"}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

fn seeds_result() -> Vec<Vec<u8>> {
    [
        "\x05{\"cniVersion\":\"1.0.0\",\"interfaces\":[{\"name\":\"eth0\",\"mac\":\"0a:58:0a:00:00:02\",\"sandbox\":\"/run/netns/x\"}],\"ips\":[{\"address\":\"10.0.0.2/24\",\"gateway\":\"10.0.0.1\",\"interface\":0}],\"routes\":[{\"dst\":\"0.0.0.0/0\"}],\"dns\":{\"nameservers\":[\"10.0.0.53\"]}}",
        "\x04{\"cniVersion\":\"0.4.0\",\"ips\":[{\"version\":\"6\",\"address\":\"fd00::2/64\",\"gateway\":\"fd00::1\"}]}",
        "\x00{\"cniVersion\":\"0.2.0\",\"ip4\":{\"ip\":\"10.0.0.2/24\",\"gateway\":\"10.0.0.1\",\"routes\":[{\"dst\":\"0.0.0.0/0\"}]},\"dns\":{}}",
        "\x06{\"cniVersion\":\"1.1.0\",\"ips\":[{\"address\":\"10.0.0.2/24\",\"interface\":5}]}",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

fn seeds_net() -> Vec<Vec<u8>> {
    [
        "default",
        "a,b:IP=10.0.0.1,c",
        "all",
        "default:IP=fd00::5\nx",
        "host",
        "",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

/// A mutation of one of `seeds`.
fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], tokens: &[&str]) -> Vec<u8> {
    let mut d = rng.pick(seeds).clone();
    for _ in 0..1 + rng.below(6) {
        let at = rng.below(d.len() + 1);
        match rng.below(8) {
            0 if !d.is_empty() => {
                let i = rng.below(d.len());
                d[i] ^= 1 << rng.below(8);
            }
            1 => d.insert(at, rng.next() as u8),
            2 | 3 => {
                let t = rng.pick(tokens).as_bytes().to_vec();
                d.splice(at..at, t);
            }
            4 => {
                let end = (at + rng.below(16)).min(d.len());
                d.drain(at..end);
            }
            5 => d.truncate(at),
            6 => {
                let other = rng.pick(seeds);
                let from = rng.below(other.len() + 1);
                d.splice(at..at, other[from..].iter().copied());
            }
            _ => d.insert(at, 0xff),
        }
    }
    d
}

/// A random JSON document over the parsers' vocabulary.
fn random_json(rng: &mut Rng, depth: usize) -> String {
    let scalar = |rng: &mut Rng| -> String {
        match rng.below(4) {
            0 => rng.pick(TOKENS).trim_matches('"').to_string(),
            1 => format!("{}", rng.next() as i64 % 1000),
            2 => format!("{:?}", rng.pick(TOKENS).trim_matches('"')),
            _ => rng.pick(&["null", "true", "false", "[]", "{}"]).to_string(),
        }
    };
    if depth == 0 {
        let s = scalar(rng);
        return if serde_json_like(&s) {
            s
        } else {
            format!("{s:?}")
        };
    }
    match rng.below(3) {
        0 => {
            let n = rng.below(5);
            let fields: Vec<String> = (0..n)
                .map(|_| {
                    let key = rng.pick(TOKENS).trim_matches('"');
                    format!("{key:?}:{}", random_json(rng, depth - 1))
                })
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        1 => {
            let n = rng.below(4);
            let items: Vec<String> = (0..n).map(|_| random_json(rng, depth - 1)).collect();
            format!("[{}]", items.join(","))
        }
        _ => random_json(rng, 0),
    }
}

fn serde_json_like(s: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(s).is_ok()
}

fn iterations() -> usize {
    std::env::var("RKT_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

fn seed() -> u64 {
    std::env::var("RKT_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_f022_2026)
}

/// Feeds `target` `iterations()` generated inputs; on a panic, fails naming the input.
fn smoke(
    name: &str,
    (target, accepts): (Target, fn(&[u8]) -> bool),
    seeds: Vec<Vec<u8>>,
    tokens: &[&str],
    json_prefix: Option<u8>,
) {
    let mut accepted = 0;
    let base = seed();
    let json = tokens.len() == TOKENS.len();
    let mut rng = Rng((base ^ name.len() as u64) | 1);
    let mut failure = None;
    for i in 0..iterations() {
        let input = if i % 3 == 0 && json {
            let mut d = Vec::new();
            if json_prefix.is_some() {
                d.push(rng.next() as u8);
            }
            let depth = 1 + rng.below(5);
            d.extend(random_json(&mut rng, depth).into_bytes());
            d
        } else {
            mutate(&mut rng, &seeds, tokens)
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            target(&input);
            accepts(&input)
        }));
        if let Ok(ok) = outcome {
            accepted += usize::from(ok);
        } else {
            failure = Some((i, input));
            break;
        }
    }
    if let Some((i, input)) = failure {
        // Run it again with the panic message shown.
        eprintln!(
            "{name}: input {i} (RKT_FUZZ_SEED={base}) panicked: {:?}",
            String::from_utf8_lossy(&input)
        );
        target(&input);
        panic!("{name}: input {i} panicked only the first time");
    }
    // The generator is not just noise: some of what it makes gets past the parser, so the
    // code behind the first error is exercised too.
    assert!(
        accepted * 100 >= iterations(),
        "{name}: only {accepted} of {} inputs were accepted",
        iterations()
    );
    // Every seed is accepted by the parser it seeds (the generator starts from valid input).
    for s in &seeds {
        target(s);
    }
}

#[test]
fn fuzz_smoke_paths_config() {
    smoke(
        "paths_config",
        (targets::paths_config, |d| {
            rkt::config::parse_paths_file(std::path::Path::new("/p"), d).is_ok()
        }),
        seeds_paths(),
        TOKENS,
        None,
    );
}

#[test]
fn fuzz_smoke_net_conf() {
    smoke(
        "net_conf",
        (targets::net_conf, |d| {
            cni::conf::parse_list(d, None).is_ok() || cni::conf::parse_single(d, None).is_ok()
        }),
        seeds_conf(),
        TOKENS,
        None,
    );
}

#[test]
fn fuzz_smoke_cni_result() {
    smoke(
        "cni_result",
        (targets::cni_result, |d| {
            let Some((&v, rest)) = d.split_first() else {
                return false;
            };
            let v = cni::version::SUPPORTED[v as usize % cni::version::SUPPORTED.len()];
            cni::result::CniResult::from_slice(rest, v).is_ok()
        }),
        seeds_result(),
        TOKENS,
        Some(0),
    );
}

#[test]
fn fuzz_smoke_net_selection() {
    smoke(
        "net_selection",
        (targets::net_selection, |d| {
            let text = String::from_utf8_lossy(d);
            let flags: Vec<String> = text.split('\n').map(str::to_string).collect();
            rkt::networking::NetSelection::parse(&flags).is_ok()
        }),
        seeds_net(),
        NET_TOKENS,
        None,
    );
}

/// The seeds are valid: each parser accepts its own (so the loops above start from
/// accepted input and reach the code past the first error).
#[test]
fn seeds_are_accepted() {
    for s in seeds_paths().iter().take(3) {
        rkt::config::parse_paths_file(std::path::Path::new("/s"), s).unwrap();
    }
    let conf = seeds_conf();
    cni::conf::parse_list(&conf[0], None).unwrap();
    cni::conf::parse_list(&conf[2], None).unwrap();
    cni::conf::parse_single(&conf[1], None).unwrap();
    cni::conf::parse_single(&conf[3], None).unwrap();
    for s in seeds_result() {
        let v = cni::version::SUPPORTED[s[0] as usize % cni::version::SUPPORTED.len()];
        cni::result::CniResult::from_slice(&s[1..], v).unwrap();
    }
    rkt::networking::NetSelection::parse(&["a,b:IP=10.0.0.1,c".to_string()]).unwrap();
}

/// Inputs the fuzzers found crashing, kept as regression cases (none so far; a crash found
/// by `cargo fuzz` or the loops above is added here with the bytes that caused it).
#[test]
fn regressions() {
    let cases: &[(&str, Target, &[u8])] = &[
        (
            "cni_result",
            targets::cni_result,
            b"\x05{\"ips\":[{\"address\":\"10.0.0.1/99\"}]}",
        ),
        (
            "cni_result",
            targets::cni_result,
            b"\x00{\"ip4\":{\"ip\":\"::/0\"}}",
        ),
        (
            "net_conf",
            targets::net_conf,
            b"{\"name\":\"n\",\"plugins\":[]}",
        ),
        ("net_selection", targets::net_selection, b"default:\n:\n"),
    ];
    for (name, target, input) in cases {
        eprintln!("{name}: {:?}", String::from_utf8_lossy(input));
        target(input);
    }
}
