//! The documentation's examples, run: every fenced block of README.md and docs/*.md whose
//! info string is `sh runnable` (or `sh runnable root`, for blocks that run pods: skipped
//! without root) runs with `bash -euo pipefail`, the blocks of one file in order in one
//! scratch environment, as a reader following the page would. A block whose next fenced
//! block is marked `output` (```` ```json output ```` or ```` ```text output ````) must print
//! exactly that (JSON compared as values).
//!
//! The scratch environment keeps the examples off the host: the directories the docs name
//! (`/etc/rkt`, `/usr/lib/rkt`, `/var/lib/rkt`, `/srv/rkt`, `/etc/cni`) are rewritten into a
//! temporary directory in the block's text and back in its output, and `rkt` on PATH is the
//! binary under test with `--system-config` and `--local-config` (and `--dir`, unless the
//! block or a `paths.d` file sets the data directory) pointing there. HOME and the current
//! directory are temporary too.

mod leaks;
mod pod_support;
mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Host directories the docs name, moved into the scratch directory.
const ROOTS: &[&str] = &[
    "/etc/rkt",
    "/usr/lib/rkt",
    "/var/lib/rkt",
    "/srv/rkt",
    "/etc/cni",
];

/// One runnable example.
#[derive(Debug)]
struct Example {
    file: String,
    line: usize,
    script: String,
    needs_root: bool,
    /// (language, text) of the output block that follows, if any.
    expected: Option<(String, String)>,
}

/// The fenced blocks of a Markdown text: (line of the opening fence, info string, body).
fn fenced_blocks(text: &str) -> Vec<(usize, String, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String, String, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        match &mut open {
            None if ticks >= 3 => {
                open = Some((
                    i + 1,
                    trimmed[ticks..].trim().to_string(),
                    String::new(),
                    ticks,
                ));
            }
            Some((_, _, _, n)) if ticks >= *n && trimmed[ticks..].trim().is_empty() => {
                let (start, info, body, _) = open.take().unwrap();
                blocks.push((start, info, body));
            }
            Some((_, _, body, _)) => {
                body.push_str(line);
                body.push('\n');
            }
            None => {}
        }
    }
    blocks
}

fn examples_of(file: &Path) -> Vec<Example> {
    let text = fs::read_to_string(file).unwrap();
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let blocks = fenced_blocks(&text);
    let mut out = Vec::new();
    for (i, (line, info, body)) in blocks.iter().enumerate() {
        let words: Vec<&str> = info.split_whitespace().collect();
        if words.first() != Some(&"sh") || !words.contains(&"runnable") {
            continue;
        }
        let expected = blocks.get(i + 1).and_then(|(_, info, body)| {
            let words: Vec<&str> = info.split_whitespace().collect();
            (words.len() == 2 && words[1] == "output").then(|| (words[0].to_string(), body.clone()))
        });
        out.push(Example {
            file: name.clone(),
            line: *line,
            script: body.clone(),
            needs_root: words.contains(&"root"),
            expected,
        });
    }
    out
}

fn doc_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// A scratch environment for one file's examples.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let s = Scratch { dir };
        for sub in ["bin", "home", "work", "etc/rkt", "usr/lib/rkt"] {
            fs::create_dir_all(s.root().join(sub)).unwrap();
        }
        let real = env!("CARGO_BIN_EXE_rkt");
        let root = s.root().display().to_string();
        let wrapper = format!(
            r#"#!/bin/sh
# rkt as the docs' examples run it: the binary under test, configured inside the scratch.
S='{root}'
for a in "$@"; do
    case "$a" in
        --system-config|--system-config=*) sc=1 ;;
        --local-config|--local-config=*) lc=1 ;;
        --dir|--dir=*) d=1 ;;
    esac
done
if [ -z "$d" ] && ! grep -qs '"data"' "$S"/etc/rkt/paths.d/*.json "$S"/usr/lib/rkt/paths.d/*.json; then
    set -- --dir="$S/var/lib/rkt" "$@"
fi
[ -n "$lc" ] || set -- --local-config="$S/etc/rkt" "$@"
[ -n "$sc" ] || set -- --system-config="$S/usr/lib/rkt" "$@"
exec '{real}' "$@"
"#
        );
        let bin = s.root().join("bin/rkt");
        fs::write(&bin, wrapper).unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
        s
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The docs' host paths moved into the scratch directory.
    fn moved_to_scratch(&self, text: &str) -> String {
        let mut out = text.to_string();
        for root in ROOTS {
            out = out.replace(root, &format!("{}{root}", self.root().display()));
        }
        out
    }

    /// The scratch paths in rkt's output shown as the host paths the docs name.
    fn shown_as_host(&self, text: &str) -> String {
        let mut out = text.to_string();
        for root in ROOTS {
            out = out.replace(&format!("{}{root}", self.root().display()), root);
        }
        out
    }

    /// Runs one example; returns a description of what went wrong.
    fn run(&self, ex: &Example) -> Result<(), String> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![self.root().join("bin")];
        paths.extend(std::env::split_paths(&path));
        let out = Command::new("timeout")
            .args(["120", "bash", "-euo", "pipefail", "-c"])
            .arg(self.moved_to_scratch(&ex.script))
            .current_dir(self.root().join("work"))
            .env("PATH", std::env::join_paths(paths).unwrap())
            .env("HOME", self.root().join("home"))
            .env("TZ", "UTC0")
            .output()
            .unwrap();
        let stdout = self.shown_as_host(&String::from_utf8_lossy(&out.stdout));
        let stderr = self.shown_as_host(&String::from_utf8_lossy(&out.stderr));
        let at = format!("{}:{}", ex.file, ex.line);
        if !out.status.success() {
            return Err(format!(
                "{at}: exited with {}\n--- script\n{}--- stdout\n{stdout}--- stderr\n{stderr}",
                out.status, ex.script
            ));
        }
        let Some((lang, expected)) = &ex.expected else {
            return Ok(());
        };
        let same = if lang == "json" {
            let parse = |t: &str| serde_json::from_str::<serde_json::Value>(t);
            match (parse(&stdout), parse(expected)) {
                (Ok(a), Ok(b)) => a == b,
                (a, b) => return Err(format!("{at}: not JSON: output {a:?}, docs {b:?}")),
            }
        } else {
            stdout.trim_end() == expected.trim_end()
        };
        if same {
            Ok(())
        } else {
            Err(format!(
                "{at}: the output differs from the docs\n--- docs\n{expected}--- actual\n{stdout}"
            ))
        }
    }
}

#[test]
fn fenced_blocks_and_their_markers_are_found() {
    let md = "text\n```sh runnable\necho hi\n```\n\n```text output\nhi\n```\n````sh\n```\n````\n";
    let blocks = fenced_blocks(md);
    assert_eq!(blocks.len(), 3);
    assert_eq!(blocks[0], (2, "sh runnable".into(), "echo hi\n".into()));
    assert_eq!(blocks[2].2, "```\n", "a longer fence holds a shorter one");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("x.md");
    fs::write(&file, md).unwrap();
    let ex = examples_of(&file);
    assert_eq!(ex.len(), 1);
    assert_eq!(ex[0].expected, Some(("text".into(), "hi\n".into())));
}

/// The harness itself fails a wrong example: a failing command, and output that is not
/// what the docs show.
#[test]
fn a_wrong_example_fails() {
    let s = Scratch::new();
    let ex = |script: &str, expected: Option<(&str, &str)>| Example {
        file: "t.md".into(),
        line: 1,
        script: script.into(),
        needs_root: false,
        expected: expected.map(|(l, t)| (l.into(), t.into())),
    };
    assert!(s.run(&ex("false\n", None)).is_err());
    assert!(s.run(&ex("echo a\n", Some(("text", "b\n")))).is_err());
    assert!(s.run(&ex("echo a\n", Some(("text", "a\n")))).is_ok());
    // Paths the docs name are the scratch's, in both directions.
    let config = ex("rkt config | grep '/etc/rkt/net.d' > /dev/null\n", None);
    assert!(s.run(&config).is_ok(), "{:?}", s.run(&config));
    assert!(s.root().join("etc/rkt").is_dir());
}

#[test]
fn the_docs_runnable_examples_work() {
    let root = test_kit::is_root();
    let mut failures = Vec::new();
    let mut ran = 0;
    for file in doc_files() {
        let examples = examples_of(&file);
        if examples.is_empty() {
            continue;
        }
        let scratch = Scratch::new();
        let guard = root.then(|| {
            leaks::Guard::new(
                leaks::Ctx::new(scratch.root().join("var/lib/rkt")).shared_network("default"),
            )
        });
        for ex in &examples {
            if ex.needs_root && !root {
                eprintln!("skipping {}:{} (needs root)", ex.file, ex.line);
                continue;
            }
            ran += 1;
            if let Err(e) = scratch.run(ex) {
                failures.push(e);
                break; // Later blocks of the file build on this one.
            }
        }
        // Whatever the examples left running or prepared goes, before the leak check.
        let _ = Command::new(scratch.root().join("bin/rkt"))
            .args(["gc", "--grace-period=0s", "--expire-prepared=0s"])
            .output();
        drop(guard);
    }
    assert!(ran > 0, "no runnable example found");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
