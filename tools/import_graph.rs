//! The import graph of a crate's source files, and its cycles.
//!
//! Starting from the crate root (`lib.rs` or `main.rs`), the module tree is followed
//! through `mod name;` declarations. Every path a file names that starts with `crate::`,
//! `super::` or `self::` (in `use` declarations, braces expanded, and in code), or with
//! the name of one of its own submodules (in `use`), is resolved to the file that
//! defines the longest matching module: that is an edge. Declaring a module (`mod x;`)
//! is not an edge; re-exporting from it (`pub use self::x::Y`) is. Comments and string
//! literals are skipped, inline modules (`mod tests { use super::*; }`) are followed.
//! A cycle is a strongly connected component of more than one file.
//!
//! Used by tests (`#[path = ".../tools/import_graph.rs"] mod import_graph;`, see
//! `crates/cni/tests/import_cycles.rs`) and on its own:
//! `rustc --edition 2021 -O tools/import_graph.rs -o /tmp/import-graph &&
//! /tmp/import-graph crates/rkt/src/lib.rs` prints every cycle and exits 1 if there is one
//! (`--lenient`: see [`Graph::without_parent_to_child`]).

#![allow(dead_code)] // each user takes what it needs

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One import: the file that imports, the file it reaches, and where.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    /// The importing file, relative to the crate root's directory.
    pub from: String,
    /// The imported file, relative to the crate root's directory.
    pub to: String,
    /// 1-based line of the path in `from`.
    pub line: usize,
    /// The path as written, e.g. `crate::conf::ConfError`.
    pub path: String,
}

/// The files of a crate and the imports between them.
#[derive(Debug, Default)]
pub struct Graph {
    /// Module path (`["conf", "parse"]`) to file, relative to the root's directory.
    pub modules: BTreeMap<Vec<String>, String>,
    /// Every import between two different files.
    pub edges: Vec<Edge>,
}

/// Why a crate could not be read.
#[derive(Debug)]
pub struct ReadError(pub PathBuf, pub std::io::Error);

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.0.display(), self.1)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Punct(char),
}

/// Tokens of Rust source with comments, strings and character literals removed, each
/// with its 1-based line.
fn tokens(src: &str) -> Vec<(Tok, usize)> {
    let b: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let at = |i: usize| b.get(i).copied().unwrap_or('\0');
    while i < b.len() {
        let c = b[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if c == 'r' && (at(i + 1) == '#' || at(i + 1) == '"') && {
            let mut j = i + 1;
            while at(j) == '#' {
                j += 1;
            }
            at(j) == '"'
        } {
            // Raw string r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '\n' {
                    line += 1;
                }
                if b[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#') {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                if at(i) == '\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if at(i + 1) == '\\' {
                i += 2;
                while i < b.len() && b[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
                while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(b[start..i].iter().collect()), line));
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_' || b[i] == '.') {
                if b[i] == '.' && !at(i + 1).is_ascii_digit() {
                    break;
                }
                i += 1;
            }
        } else if c == ':' && at(i + 1) == ':' {
            out.push((Tok::PathSep, line));
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push((Tok::Punct(c), line));
            }
            i += 1;
        }
    }
    out
}

/// Expands a use tree starting at `toks[*i]` into full paths, advancing `*i` past it.
fn use_tree(toks: &[(Tok, usize)], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(*i).map(|t| &t.0) {
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                *i += 1;
                if toks.get(*i).map(|t| &t.0) == Some(&Tok::PathSep) {
                    *i += 1;
                    continue;
                }
                if matches!(toks.get(*i).map(|t| &t.0), Some(Tok::Ident(a)) if a == "as") {
                    *i += 2; // `as name`
                }
                out.push(path);
                return;
            }
            Some(Tok::Punct('*')) => {
                *i += 1;
                out.push(path);
                return;
            }
            Some(Tok::Punct('{')) => {
                *i += 1;
                loop {
                    match toks.get(*i).map(|t| &t.0) {
                        Some(Tok::Punct('}')) => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Punct(',')) => *i += 1,
                        None => return,
                        _ => use_tree(toks, i, &path, out),
                    }
                }
            }
            _ => {
                out.push(path);
                return;
            }
        }
    }
}

/// A file of the module tree and what it names.
struct Parsed {
    /// Child modules declared with `mod name;` (at file level).
    children: Vec<String>,
    /// (module path inside the file, path as written, line, from a `use`).
    paths: Vec<(Vec<String>, Vec<String>, usize, bool)>,
}

fn parse(src: &str) -> Parsed {
    let toks = tokens(src);
    let mut out = Parsed {
        children: Vec::new(),
        paths: Vec::new(),
    };
    let mut inline: Vec<(String, usize)> = Vec::new(); // (name, depth inside it)
    let mut depth = 0usize;
    let mut i = 0;
    let ident = |i: usize| match toks.get(i).map(|t| &t.0) {
        Some(Tok::Ident(s)) => Some(s.as_str()),
        _ => None,
    };
    while i < toks.len() {
        let line = toks[i].1;
        let here: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
        match &toks[i].0 {
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
            Tok::Ident(k) if k == "mod" => match (ident(i + 1), toks.get(i + 2).map(|t| &t.0)) {
                (Some(name), Some(Tok::Punct(';'))) if inline.is_empty() => {
                    out.children.push(name.to_string());
                    i += 3;
                }
                (Some(name), Some(Tok::Punct('{'))) => {
                    depth += 1;
                    inline.push((name.to_string(), depth));
                    i += 3;
                }
                _ => i += 1,
            },
            Tok::Ident(k) if k == "use" => {
                i += 1;
                if toks.get(i).map(|t| &t.0) == Some(&Tok::PathSep) {
                    i += 1; // `use ::std::...`: an external crate
                    while i < toks.len() && toks[i].0 != Tok::Punct(';') {
                        i += 1;
                    }
                    continue;
                }
                let mut paths = Vec::new();
                use_tree(&toks, &mut i, &[], &mut paths);
                for p in paths {
                    out.paths.push((here.clone(), p, line, true));
                }
            }
            Tok::Ident(k)
                if matches!(k.as_str(), "crate" | "super" | "self")
                    && toks.get(i + 1).map(|t| &t.0) == Some(&Tok::PathSep) =>
            {
                let mut p = vec![k.clone()];
                i += 1;
                while toks.get(i).map(|t| &t.0) == Some(&Tok::PathSep) {
                    match ident(i + 1) {
                        Some(s) => {
                            p.push(s.to_string());
                            i += 2;
                        }
                        None => break,
                    }
                }
                out.paths.push((here, p, line, false));
            }
            _ => i += 1,
        }
    }
    out
}

/// The file of module `path`, given its parent's file.
fn child_file(parent_file: &Path, parent_is_dir_owner: bool, name: &str) -> Option<PathBuf> {
    let dir = if parent_is_dir_owner {
        parent_file.parent()?.to_path_buf()
    } else {
        parent_file.with_extension("")
    };
    let flat = dir.join(format!("{name}.rs"));
    let nested = dir.join(name).join("mod.rs");
    [flat, nested].into_iter().find(|p| p.is_file())
}

/// Reads the crate whose root file is `root` (`src/lib.rs` or `src/main.rs`).
pub fn graph(root: &Path) -> Result<Graph, ReadError> {
    let base = root.parent().unwrap_or(Path::new("."));
    let rel = |p: &Path| {
        p.strip_prefix(base)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    let mut g = Graph::default();
    // (module path, file, owns its directory: lib.rs, main.rs, mod.rs)
    let mut todo = vec![(Vec::<String>::new(), root.to_path_buf(), true)];
    let mut parsed = Vec::new();
    while let Some((module, file, owner)) = todo.pop() {
        let src = std::fs::read_to_string(&file).map_err(|e| ReadError(file.clone(), e))?;
        let p = parse(&src);
        for child in &p.children {
            if let Some(f) = child_file(&file, owner, child) {
                let mut m = module.clone();
                m.push(child.clone());
                let owns = f.file_name().is_some_and(|n| n == "mod.rs");
                todo.push((m, f, owns));
            }
        }
        g.modules.insert(module.clone(), rel(&file));
        parsed.push((module, rel(&file), p));
    }
    for (module, file, p) in &parsed {
        for (inline, path, line, in_use) in &p.paths {
            let mut here = module.clone();
            here.extend(inline.iter().cloned());
            let mut abs: Vec<String> = Vec::new();
            let mut rest = path.as_slice();
            match rest.first().map(String::as_str) {
                Some("crate") => rest = &rest[1..],
                Some("super") | Some("self") => {
                    abs = here.clone();
                    while let Some(s) = rest.first() {
                        match s.as_str() {
                            "super" => {
                                abs.pop();
                            }
                            "self" => {}
                            _ => break,
                        }
                        rest = &rest[1..];
                    }
                }
                Some(first)
                    if *in_use && inline.is_empty() && p.children.iter().any(|c| c == first) =>
                {
                    abs = module.clone();
                }
                _ => continue, // an external crate or a local name
            }
            abs.extend(rest.iter().filter(|s| *s != "self").cloned());
            let target = (0..=abs.len()).rev().find_map(|n| g.modules.get(&abs[..n]));
            if let Some(to) = target {
                if to != file {
                    g.edges.push(Edge {
                        from: file.clone(),
                        to: to.clone(),
                        line: *line,
                        path: path.join("::"),
                    });
                }
            }
        }
    }
    g.edges.sort();
    g.edges.dedup();
    Ok(g)
}

impl Graph {
    /// Drops the edges from a module to its own submodules (a `mod.rs` re-exporting or
    /// calling its children), keeping only child-to-parent and cross-module edges: the
    /// lenient reading, in which a directory module and its files count as one room
    /// unless a child also reaches out of the room and back.
    pub fn without_parent_to_child(mut self) -> Graph {
        let module_of: BTreeMap<&String, &Vec<String>> =
            self.modules.iter().map(|(m, f)| (f, m)).collect();
        let keep: Vec<bool> = self
            .edges
            .iter()
            .map(|e| match (module_of.get(&e.from), module_of.get(&e.to)) {
                (Some(a), Some(b)) => !(b.len() > a.len() && b.starts_with(a)),
                _ => true,
            })
            .collect();
        let mut keep = keep.into_iter();
        self.edges.retain(|_| keep.next().unwrap_or(true));
        self
    }

    /// The cycles: every strongly connected component of more than one file, each sorted,
    /// with the edges inside it.
    pub fn cycles(&self) -> Vec<(Vec<String>, Vec<Edge>)> {
        let files: Vec<&String> = self.modules.values().collect();
        let index: BTreeMap<&String, usize> =
            files.iter().enumerate().map(|(i, f)| (*f, i)).collect();
        let mut adj = vec![BTreeSet::new(); files.len()];
        for e in &self.edges {
            if let (Some(&a), Some(&b)) = (index.get(&e.from), index.get(&e.to)) {
                adj[a].insert(b);
            }
        }
        // Tarjan's algorithm, iteratively.
        let n = files.len();
        let (mut idx, mut low) = (vec![usize::MAX; n], vec![0; n]);
        let (mut on_stack, mut stack, mut next) = (vec![false; n], Vec::new(), 0);
        let mut sccs: Vec<Vec<usize>> = Vec::new();
        for s in 0..n {
            if idx[s] != usize::MAX {
                continue;
            }
            let mut work: Vec<(usize, Vec<usize>)> = vec![(s, adj[s].iter().copied().collect())];
            idx[s] = next;
            low[s] = next;
            next += 1;
            stack.push(s);
            on_stack[s] = true;
            while let Some((v, succ)) = work.last_mut() {
                let v = *v;
                if let Some(w) = succ.pop() {
                    if idx[w] == usize::MAX {
                        idx[w] = next;
                        low[w] = next;
                        next += 1;
                        stack.push(w);
                        on_stack[w] = true;
                        work.push((w, adj[w].iter().copied().collect()));
                    } else if on_stack[w] {
                        low[v] = low[v].min(idx[w]);
                    }
                } else {
                    work.pop();
                    if let Some((u, _)) = work.last() {
                        low[*u] = low[*u].min(low[v]);
                    }
                    if low[v] == idx[v] {
                        let mut comp = Vec::new();
                        while let Some(w) = stack.pop() {
                            on_stack[w] = false;
                            comp.push(w);
                            if w == v {
                                break;
                            }
                        }
                        if comp.len() > 1 {
                            sccs.push(comp);
                        }
                    }
                }
            }
        }
        let mut out: Vec<(Vec<String>, Vec<Edge>)> = sccs
            .into_iter()
            .map(|comp| {
                let mut names: Vec<String> = comp.iter().map(|&i| files[i].clone()).collect();
                names.sort();
                let edges = self
                    .edges
                    .iter()
                    .filter(|e| names.contains(&e.from) && names.contains(&e.to))
                    .cloned()
                    .collect();
                (names, edges)
            })
            .collect();
        out.sort();
        out
    }
}

/// A cycle report: each cycle's files and the imports that close it.
pub fn report(cycles: &[(Vec<String>, Vec<Edge>)]) -> String {
    let mut out = String::new();
    for (files, edges) in cycles {
        out.push_str(&format!(
            "cycle of {} files: {}\n",
            files.len(),
            files.join(", ")
        ));
        for e in edges {
            out.push_str(&format!(
                "  {}:{} -> {} ({})\n",
                e.from, e.line, e.to, e.path
            ));
        }
    }
    out
}

#[cfg(not(test))]
fn main() {
    let mut roots: Vec<String> = std::env::args().skip(1).collect();
    let lenient = roots.iter().any(|a| a == "--lenient");
    roots.retain(|a| a != "--lenient");
    if roots.is_empty() {
        eprintln!("usage: import-graph [--lenient] CRATE_ROOT.rs...");
        std::process::exit(2);
    }
    let mut found = false;
    for root in roots {
        match graph(Path::new(&root)) {
            Ok(g) => {
                let g = if lenient {
                    g.without_parent_to_child()
                } else {
                    g
                };
                let cycles = g.cycles();
                found |= !cycles.is_empty();
                println!(
                    "{root}: {} files, {} imports, {} cycles",
                    g.modules.len(),
                    g.edges.len(),
                    cycles.len()
                );
                print!("{}", report(&cycles));
            }
            Err(e) => {
                eprintln!("import-graph: {e}");
                std::process::exit(2);
            }
        }
    }
    std::process::exit(i32::from(found));
}
