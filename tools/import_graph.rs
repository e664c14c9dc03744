//! The import graph of a crate (library or binary), and its cycles, at two levels: between
//! rooms (the crate root's modules: `pod`, `networking`, …) and between module files.
//!
//! An edge is a path that goes up or across: `crate::…`, `super::…` or `self::…`, in a `use`
//! declaration or inline, in code and in test code (comments and strings are skipped). It
//! points at the module file that defines the named item, following `use` re-exports (so
//! `super::NetError` from a `networking` file points at `networking/error.rs`, where
//! `networking/mod.rs` takes it from). A module calling into or re-exporting from its own
//! submodules (by their bare names or through `self::`) is how a room is built from its
//! parts, and is not an edge; a child reaching back to its parent is.
//!
//! The one checker of the workspace. Used by tests (`#[path = "…/tools/import_graph.rs"] mod
//! import_graph;`: `crates/rkt/tests/import_graph.rs` and `crates/cni/tests/import_cycles.rs`)
//! and on its own: `rustc --edition 2021 -O tools/import_graph.rs -o /tmp/import-graph &&
//! /tmp/import-graph crates/rkt/src/lib.rs crates/rkt/src/main.rs` prints every cycle and
//! exits 1 if there is one (2 if a file cannot be read). When it fails it names the modules
//! in the cycle and the references that make it; see docs/ARCHITECTURE.md for which room
//! may take what from which.

#![allow(dead_code)] // each user takes what it needs

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// Panics with the cycles of the crate whose root file is `root`, if it has any.
pub fn assert_acyclic(root: &Path) {
    let graph = Graph::load(root).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        graph.files.len() > 3,
        "found only {} modules under {}",
        graph.files.len(),
        root.display()
    );
    let report = graph.cycles();
    assert!(
        report.is_empty(),
        "import cycles in {}:\n{report}",
        root.display()
    );
}

#[cfg(not(test))]
fn main() {
    let roots: Vec<String> = std::env::args().skip(1).collect();
    if roots.is_empty() || roots.iter().any(|a| a.starts_with('-')) {
        eprintln!("usage: import-graph CRATE_ROOT.rs...");
        std::process::exit(2);
    }
    let mut found = false;
    for root in roots {
        match Graph::load(Path::new(&root)) {
            Ok(graph) => {
                let report = graph.cycles();
                found |= !report.is_empty();
                println!("{root}: {} files", graph.files.len());
                print!("{report}");
            }
            Err(e) => {
                eprintln!("import-graph: {e}");
                std::process::exit(2);
            }
        }
    }
    std::process::exit(i32::from(found));
}

/// A module: its path from the crate root (empty for the root) and what it binds.
#[derive(Debug, Default)]
pub struct Module {
    /// The file, relative to the crate's `src/`.
    pub file: String,
    /// Submodules declared in the file (`mod x;`), by name.
    children: BTreeSet<String>,
    /// Names bound by `use` (any visibility): name -> absolute path, when it is in the crate.
    uses: BTreeMap<String, Vec<String>>,
    /// Paths going up or across, with the line they are on.
    refs: Vec<(usize, Vec<String>, String)>,
}

pub struct Graph {
    /// Module path (joined with `::`) -> module.
    pub modules: BTreeMap<String, Module>,
    /// Module files in load order, as module paths.
    pub files: Vec<String>,
}

impl Graph {
    pub fn load(root: &Path) -> Result<Graph, String> {
        let src = root.parent().unwrap().to_path_buf();
        let mut graph = Graph {
            modules: BTreeMap::new(),
            files: Vec::new(),
        };
        let mut todo = vec![(Vec::<String>::new(), root.to_path_buf())];
        while let Some((path, file)) = todo.pop() {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let rel = file
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let module = scan(&text, &path, rel);
            // `x.rs` and `x/mod.rs` keep their submodules in `x/`; the root in `src/`.
            let base = match file.file_name().and_then(|n| n.to_str()) {
                Some("mod.rs" | "lib.rs" | "main.rs") => file.parent().unwrap().to_path_buf(),
                _ => file.with_extension(""),
            };
            for child in &module.children {
                let flat = base.join(format!("{child}.rs"));
                let nested = base.join(child).join("mod.rs");
                let found = if flat.exists() { flat } else { nested };
                let mut child_path = path.clone();
                child_path.push(child.clone());
                todo.push((child_path, found));
            }
            graph.files.push(path.join("::"));
            graph.modules.insert(path.join("::"), module);
        }
        Ok(graph)
    }

    /// The module file that `path` (absolute, without `crate`) names: as deep as the path
    /// goes through modules, following `use` bindings for the rest.
    fn resolve(&self, path: &[String], depth: usize) -> Option<String> {
        let mut current: Vec<String> = Vec::new();
        for (i, seg) in path.iter().enumerate() {
            let module = self.modules.get(&current.join("::"))?;
            if module.children.contains(seg) {
                current.push(seg.clone());
                continue;
            }
            if let Some(target) = module.uses.get(seg) {
                if depth < 16 {
                    let mut full = target.clone();
                    full.extend(path[i + 1..].iter().cloned());
                    if let Some(found) = self.resolve(&full, depth + 1) {
                        return Some(found);
                    }
                }
            }
            break;
        }
        Some(current.join("::"))
    }

    /// The file edges: (from, to) -> the references that make it.
    pub fn edges(&self) -> BTreeMap<(String, String), Vec<String>> {
        let mut edges: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for (from, module) in &self.modules {
            for (line, path, written) in &module.refs {
                let Some(to) = self.resolve(path, 0) else {
                    continue;
                };
                // A parent reaching into its own children (`pub use self::q::Q`, `q::f()`)
                // is how a room is built from its parts: no edge.
                let descendant = from.is_empty() || to.starts_with(&format!("{from}::"));
                if &to != from && !descendant {
                    edges
                        .entry((from.clone(), to.clone()))
                        .or_default()
                        .push(format!(
                            "{}:{line} -> {} ({written})",
                            module.file, self.modules[&to].file
                        ));
                }
            }
        }
        edges
    }

    /// The rooms each room's paths name, as written (`crate::pod::App` names `pod` even where
    /// `pod` re-exports it from below): (from, named) -> the references. A room's paths into
    /// itself are left out.
    pub fn named_rooms(&self) -> BTreeMap<(String, String), Vec<String>> {
        let mut named: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        let Some(root) = self.modules.get("") else {
            return named;
        };
        for (from, module) in &self.modules {
            let Some(room) = from.split("::").next().filter(|r| !r.is_empty()) else {
                continue;
            };
            for (line, path, written) in &module.refs {
                let Some(to) = path.first().filter(|r| root.children.contains(*r)) else {
                    continue;
                };
                if to != room {
                    named
                        .entry((room.to_string(), to.clone()))
                        .or_default()
                        .push(format!("{}:{line} ({written})", module.file));
                }
            }
        }
        named
    }

    /// Every cycle between rooms and between files, one paragraph each; empty when none.
    pub fn cycles(&self) -> String {
        let edges = self.edges();
        let room = |m: &str| m.split("::").next().unwrap_or("").to_string();
        let mut room_edges: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for ((from, to), why) in &edges {
            let (a, b) = (room(from), room(to));
            if a != b && !a.is_empty() && !b.is_empty() {
                room_edges
                    .entry((a, b))
                    .or_default()
                    .extend(why.iter().cloned());
            }
        }
        let mut out = String::new();
        for scc in components(&room_edges) {
            let _ = writeln!(out, "cycle between rooms {}:", scc.join(", "));
            describe(&mut out, &scc, &room_edges);
        }
        for scc in components(&edges) {
            let files: Vec<String> = scc.iter().map(|m| self.modules[m].file.clone()).collect();
            let _ = writeln!(out, "cycle between files {}:", files.join(", "));
            describe(&mut out, &scc, &edges);
        }
        out
    }
}

/// The references that make the cycle `scc`.
fn describe(out: &mut String, scc: &[String], edges: &BTreeMap<(String, String), Vec<String>>) {
    for ((from, to), why) in edges {
        if scc.contains(from) && scc.contains(to) {
            for w in why {
                let _ = writeln!(out, "  {w}");
            }
        }
    }
}

/// The strongly connected components with more than one node, each sorted (Tarjan).
fn components(edges: &BTreeMap<(String, String), Vec<String>>) -> Vec<Vec<String>> {
    let mut nodes: BTreeSet<&String> = BTreeSet::new();
    let mut next: BTreeMap<&String, Vec<&String>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        nodes.insert(from);
        nodes.insert(to);
        next.entry(from).or_default().push(to);
    }
    struct State<'a> {
        index: BTreeMap<&'a String, usize>,
        low: BTreeMap<&'a String, usize>,
        stack: Vec<&'a String>,
        on_stack: BTreeSet<&'a String>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(v: &'a String, next: &BTreeMap<&'a String, Vec<&'a String>>, s: &mut State<'a>) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in next.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(w, next, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(w);
                scc.push(w.clone());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                s.found.push(scc);
            }
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in nodes {
        if !state.index.contains_key(v) {
            visit(v, &next, &mut state);
        }
    }
    state.found.sort();
    state.found
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Colons,
    Punct(char),
}

/// Rust source as identifiers, `::` and punctuation, with their lines; comments, strings
/// and character literals dropped.
fn tokens(text: &str) -> Vec<(usize, Tok)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(chars[i] == '\n');
                    i += 1;
                }
            }
        } else if c == '"' || ((c == 'r' || c == 'b') && matches!(at(i + 1), '"' | '#' | 'r')) {
            // "…", r"…", r#"…"#, b"…", br#"…"#; an identifier starting with r or b otherwise.
            let start = i;
            let mut j = i;
            if chars[j] == 'b' {
                j += 1;
            }
            let raw = at(j) == 'r';
            if raw {
                j += 1;
            }
            let mut hashes = 0;
            while raw && at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) != '"' {
                // An identifier such as `raw` or `bytes`.
                i = start;
                let mut ident = String::new();
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    ident.push(chars[i]);
                    i += 1;
                }
                out.push((line, Tok::Ident(ident)));
                continue;
            }
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                let d = chars[j];
                if d == '\n' {
                    line += 1;
                }
                if !raw && d == '\\' {
                    line += usize::from(at(j + 1) == '\n');
                    j += 2;
                    continue;
                }
                if d == '"' && (0..hashes).all(|k| at(j + 1 + k) == '#') {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if at(i + 1) == '\\' {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
            }
        } else if c.is_alphabetic() || c == '_' {
            let mut ident = String::new();
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                ident.push(chars[i]);
                i += 1;
            }
            out.push((line, Tok::Ident(ident)));
        } else if c == ':' && at(i + 1) == ':' {
            out.push((line, Tok::Colons));
            i += 2;
        } else {
            out.push((line, Tok::Punct(c)));
            i += 1;
        }
    }
    out
}

fn ident(t: Option<&(usize, Tok)>) -> Option<&str> {
    match t {
        Some((_, Tok::Ident(s))) => Some(s),
        _ => None,
    }
}

/// One leaf of a `use` tree: its path as written and the name it binds.
fn use_tree(
    toks: &[(usize, Tok)],
    i: &mut usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(*i).map(|t| &t.1) {
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                *i += 1;
            }
            Some(Tok::Punct('{')) => {
                *i += 1;
                loop {
                    match toks.get(*i).map(|t| &t.1) {
                        Some(Tok::Punct('}')) | None => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Punct(',')) => *i += 1,
                        _ => use_tree(toks, i, &path, out),
                    }
                }
            }
            Some(Tok::Punct('*')) => {
                *i += 1;
                out.push((path, None));
                return;
            }
            _ => {}
        }
        if toks.get(*i).map(|t| &t.1) == Some(&Tok::Colons) {
            *i += 1;
            continue;
        }
        break;
    }
    // `a::b::{self}` binds `b`.
    if path.last().is_some_and(|s| s == "self") && path.len() > prefix.len() {
        path.pop();
    }
    let mut name = path.last().cloned();
    if ident(toks.get(*i)) == Some("as") {
        name = ident(toks.get(*i + 1)).map(str::to_string);
        *i += 2;
    }
    out.push((path, name));
}

/// The module `file` at `module_path`: its submodules, bindings and references.
fn scan(text: &str, module_path: &[String], file: String) -> Module {
    let toks = tokens(text);
    let mut module = Module {
        file,
        ..Module::default()
    };
    // Inline modules (`mod tests { … }`): (name, brace depth inside them).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    // An absolute path for `written`, seen from inside the inline modules `inside`.
    let absolute = |written: &[String], inside: &[(String, usize)]| -> Option<Vec<String>> {
        let mut base: Vec<String> = module_path.to_vec();
        base.extend(inside.iter().map(|(n, _)| n.clone()));
        let mut rest = written;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
            }
            _ => return None,
        }
        base.extend(rest.iter().cloned());
        // Paths inside inline modules of this file point into this file.
        let own = module_path.len();
        if base.len() > own && base[..own] == *module_path {
            let mut k = own;
            for (n, _) in inside {
                if base.get(k) == Some(n) {
                    k += 1;
                } else {
                    break;
                }
            }
            if k > own {
                base.drain(own..k);
            }
        }
        Some(base)
    };
    while i < toks.len() {
        let (line, tok) = &toks[i];
        match tok {
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(kw) if kw == "mod" => {
                let name = ident(toks.get(i + 1)).unwrap_or_default().to_string();
                match toks.get(i + 2).map(|t| &t.1) {
                    Some(Tok::Punct(';')) if inline.is_empty() => {
                        module.children.insert(name);
                        i += 3;
                    }
                    Some(Tok::Punct('{')) => {
                        depth += 1;
                        inline.push((name, depth));
                        i += 3;
                    }
                    _ => i += 1,
                }
            }
            Tok::Ident(kw) if kw == "use" => {
                let first_line = *line;
                i += 1;
                let mut leaves = Vec::new();
                use_tree(&toks, &mut i, &[], &mut leaves);
                for (written, name) in leaves {
                    let abs = if matches!(
                        written.first().map(String::as_str),
                        Some("crate" | "super" | "self")
                    ) {
                        let abs = absolute(&written, &inline);
                        if let Some(abs) = &abs {
                            module
                                .refs
                                .push((first_line, abs.clone(), written.join("::")));
                        }
                        abs
                    } else if written.first().is_some_and(|s| module.children.contains(s)) {
                        // A submodule's item, brought up (often re-exported).
                        let mut abs = module_path.to_vec();
                        abs.extend(written.iter().cloned());
                        Some(abs)
                    } else {
                        None
                    };
                    if let (Some(abs), Some(name), true) = (abs, name, inline.is_empty()) {
                        module.uses.insert(name, abs);
                    }
                }
            }
            Tok::Ident(first) if matches!(first.as_str(), "crate" | "super" | "self") => {
                let mut written = vec![first.clone()];
                let mut j = i + 1;
                while toks.get(j).map(|t| &t.1) == Some(&Tok::Colons) {
                    match ident(toks.get(j + 1)) {
                        Some(s) => written.push(s.to_string()),
                        None => break,
                    }
                    j += 2;
                }
                if written.len() > 1 {
                    if let Some(abs) = absolute(&written, &inline) {
                        module.refs.push((*line, abs, written.join("::")));
                    }
                }
                i = j.max(i + 1);
            }
            _ => i += 1,
        }
    }
    module
}
