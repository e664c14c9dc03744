//! Command-line errors in one line, like rkt's other errors: `rkt: run: --nte is not an
//! option of `rkt run`; did you mean --net?`. clap finds the error; this module words it:
//! the command it is about, the nearest real option or command only when it is really near
//! (see [`nearest`]), and, for an option another command has, where it belongs. Help and
//! version output are not errors and stay clap's.

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, Command};

/// The usage error `err`, met parsing `argv` (the whole command line, program name first)
/// against `root` (built: [`Command::build`]), as one line without the leading `rkt: `.
pub fn one_line(err: &clap::Error, root: &Command, argv: &[OsString]) -> String {
    let path = command_path(root, argv);
    let here = *path.last().expect("the path starts at the root");
    let names: Vec<&str> = path[1..].iter().map(|c| c.get_name()).collect();
    let full = std::iter::once(root.get_name())
        .chain(names.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let message = message(err, root, here, &full);
    if names.is_empty() {
        message
    } else {
        format!("{}: {message}", names.join(" "))
    }
}

fn message(err: &clap::Error, root: &Command, here: &Command, full: &str) -> String {
    let see_help = format!("see `{full} --help`");
    let arg = || context_str(err, ContextKind::InvalidArg).map(|a| arg_name(&a));
    let value = || context_str(err, ContextKind::InvalidValue);
    match err.kind() {
        ErrorKind::UnknownArgument => match arg() {
            Some(word) => unknown_argument(&word, root, here, full, &see_help),
            None => fallback(err),
        },
        ErrorKind::InvalidSubcommand => {
            let Some(word) = context_str(err, ContextKind::InvalidSubcommand) else {
                return fallback(err);
            };
            let commands = here
                .get_subcommands()
                .filter(|c| !c.is_hide_set())
                .map(|c| c.get_name());
            match nearest(&word, commands) {
                Some(near) => {
                    format!("{word} is not a command of `{full}`; did you mean `{full} {near}`?")
                }
                None => format!("{word} is not a command of `{full}` ({see_help})"),
            }
        }
        ErrorKind::InvalidValue => {
            let (Some(arg), Some(value)) = (arg(), value()) else {
                return fallback(err);
            };
            if value.is_empty() {
                let mut out = match here.get_arguments().find(|a| names_arg(a, &arg)) {
                    Some(a) => format!("{arg} needs a value: {arg}={}", value_name(a)),
                    None => format!("{arg} needs a value"),
                };
                if let Some(valid) = context_strs(err, ContextKind::ValidValue) {
                    out.push_str(&format!(" ({})", valid.join(", ")));
                }
                return out;
            }
            let mut out = format!("{arg}={value}: invalid value");
            if let Some(valid) = context_strs(err, ContextKind::ValidValue) {
                out.push_str(&format!(" (expected {})", valid.join(", ")));
            }
            if let Some(near) = context_strs(err, ContextKind::SuggestedValue) {
                out.push_str(&format!("; did you mean {arg}={}?", near.join(", ")));
            }
            out
        }
        ErrorKind::ValueValidation => match (arg(), value(), std::error::Error::source(err)) {
            (Some(arg), Some(value), Some(cause)) => format!("{arg}={value}: {cause}"),
            _ => fallback(err),
        },
        ErrorKind::MissingRequiredArgument => match context_strs(err, ContextKind::InvalidArg) {
            Some(missing) => {
                let missing: Vec<String> = missing.iter().map(|m| arg_name(m)).collect();
                let verb = if missing.len() == 1 { "is" } else { "are" };
                format!("{} {verb} missing ({see_help})", missing.join(", "))
            }
            None => fallback(err),
        },
        ErrorKind::NoEquals => match arg() {
            Some(arg) => match here.get_arguments().find(|a| names_arg(a, &arg)) {
                Some(a) => format!("{arg} takes its value after '=': {arg}={}", value_name(a)),
                None => format!("{arg} takes its value after '='"),
            },
            None => fallback(err),
        },
        ErrorKind::ArgumentConflict => match (arg(), context_strs(err, ContextKind::PriorArg)) {
            (Some(arg), Some(prior)) => {
                let prior: Vec<String> = prior.iter().map(|p| arg_name(p)).collect();
                format!("{arg} cannot be used with {}", prior.join(", "))
            }
            _ => fallback(err),
        },
        _ => fallback(err),
    }
}

/// An unknown option (or a word the command takes no more of).
fn unknown_argument(word: &str, root: &Command, here: &Command, full: &str, see: &str) -> String {
    let Some(option) = word.strip_prefix('-') else {
        return format!("unexpected argument {word:?} ({see})");
    };
    let not_here = format!("{word} is not an option of `{full}`");
    let (long, short) = match option.strip_prefix('-') {
        Some(long) => (Some(long), None),
        None => (None, option.chars().next().filter(|_| option.len() == 1)),
    };
    let has = |a: &Arg| {
        !a.is_hide_set()
            && (long.is_some_and(|l| a.get_long() == Some(l))
                || short.is_some_and(|s| a.get_short() == Some(s)))
    };
    let mut elsewhere = Vec::new();
    commands_with(root, root.get_name(), &has, &mut elsewhere);
    if !elsewhere.is_empty() {
        let run_prepared = format!("{} run-prepared", root.get_name());
        if here.get_name() == "prepare" && elsewhere.contains(&run_prepared) {
            // A prepared pod is given its networks, ports and streams when it runs.
            let given = match long {
                Some("net") => "networks are chosen".to_string(),
                _ => "a prepared pod takes it when it runs,".to_string(),
            };
            let takes_value = root
                .find_subcommand("run-prepared")
                .and_then(|c| c.get_arguments().find(|a| has(a)))
                // An on/off flag is on alone; what else takes values is shown taking one.
                .is_some_and(|a| a.get_action().takes_values() && value_name(a) != "BOOL");
            let ellipsis = if takes_value { "=…" } else { "" };
            return format!("{not_here}; {given} at `{run_prepared} {word}{ellipsis}`");
        }
        let list: Vec<String> = elsewhere.iter().map(|c| format!("`{c}`")).collect();
        return format!("{not_here}; it is an option of {}", list.join(", "));
    }
    let near = long.and_then(|long| {
        let longs = here
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(Arg::get_long);
        nearest(long, longs)
    });
    match near {
        Some(near) => format!("{not_here}; did you mean --{near}?"),
        None => format!("{not_here} ({see})"),
    }
}

/// The commands below `cmd` (itself excluded, hidden ones skipped) with an option `has`,
/// by their full names, depth first in declaration order.
fn commands_with(cmd: &Command, name: &str, has: &dyn Fn(&Arg) -> bool, out: &mut Vec<String>) {
    for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
        let sub_name = format!("{name} {}", sub.get_name());
        if sub.get_arguments().any(has) {
            out.push(sub_name.clone());
        }
        commands_with(sub, &sub_name, has, out);
    }
}

/// The commands `argv` names, from the root down to the one clap parsed its error in: a
/// word that names a subcommand enters it; options are skipped with their values; the walk
/// ends at `--`, at an unknown option, or at the first other word.
fn command_path<'a>(root: &'a Command, argv: &[OsString]) -> Vec<&'a Command> {
    let mut path = vec![root];
    let mut words = argv.iter().skip(1).map(|w| w.to_string_lossy());
    while let Some(word) = words.next() {
        let here = *path.last().expect("the path starts at the root");
        if word == "--" {
            break;
        }
        if let Some(option) = word.strip_prefix('-') {
            let (name, inline) = match option.split_once('=') {
                Some((name, _)) => (name, true),
                None => (option, false),
            };
            let arg = match name.strip_prefix('-') {
                Some(long) => here.get_arguments().find(|a| a.get_long() == Some(long)),
                None => here
                    .get_arguments()
                    .find(|a| name.len() == 1 && a.get_short() == name.chars().next()),
            };
            let Some(arg) = arg else {
                break;
            };
            let separate_value = arg.get_action().takes_values()
                && !arg.is_require_equals_set()
                && arg.get_num_args().is_some_and(|n| n.min_values() > 0);
            if separate_value && !inline {
                words.next();
            }
            continue;
        }
        match here.find_subcommand(word.as_ref()) {
            Some(sub) => path.push(sub),
            None => break,
        }
    }
    path
}

/// The candidate nearest `typed`, if it is really near: at most one edit (insertion,
/// deletion, substitution or swap of neighbours) for a word of up to 4 characters, two for a
/// longer one; else the one candidate `typed` (3 characters or more) is the start of. Ties
/// go to the first candidate.
pub fn nearest<'a>(typed: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let candidates: Vec<&str> = candidates.collect();
    let limit = if typed.chars().count() <= 4 { 1 } else { 2 };
    let best = candidates
        .iter()
        .map(|c| (distance(typed, c), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d);
    if let Some((_, near)) = best {
        return Some(near);
    }
    let mut starting = candidates
        .iter()
        .filter(|c| typed.chars().count() >= 3 && c.starts_with(typed));
    match (starting.next(), starting.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// The optimal string alignment distance: insertions, deletions, substitutions and swaps
/// of neighbouring characters, each one edit.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// clap's rendering of an argument, `--format <FORMAT>`, `--no-legend[=<BOOL>]`,
/// `<COMMAND>...` or `[UUID]`, as its name: `--format`, `--no-legend`, `COMMAND`, `UUID`.
fn arg_name(rendered: &str) -> String {
    if let Some(optional) = rendered.strip_prefix('[') {
        return arg_name(optional.trim_end_matches("...").trim_end_matches(']'));
    }
    let name = rendered.split([' ', '=', '[']).next().unwrap_or(rendered);
    let name = name.trim_end_matches("...");
    name.strip_prefix('<')
        .and_then(|n| n.strip_suffix('>'))
        .unwrap_or(name)
        .to_string()
}

/// Whether `arg` is the option clap called `name` (`--long` or `-s`).
fn names_arg(arg: &Arg, name: &str) -> bool {
    match name.strip_prefix("--") {
        Some(long) => arg.get_long() == Some(long),
        None => name
            .strip_prefix('-')
            .is_some_and(|s| s.len() == 1 && arg.get_short() == s.chars().next()),
    }
}

fn value_name(arg: &Arg) -> String {
    arg.get_value_names()
        .and_then(|names| names.first())
        .map(|n| n.to_string())
        .unwrap_or_else(|| "VALUE".to_string())
}

fn context_str(err: &clap::Error, kind: ContextKind) -> Option<String> {
    match err.get(kind)? {
        ContextValue::String(s) => Some(s.clone()),
        ContextValue::Strings(v) => v.first().cloned(),
        _ => None,
    }
}

fn context_strs(err: &clap::Error, kind: ContextKind) -> Option<Vec<String>> {
    match err.get(kind)? {
        ContextValue::String(s) => Some(vec![s.clone()]),
        ContextValue::Strings(v) if !v.is_empty() => Some(v.clone()),
        _ => None,
    }
}

/// clap's own message, its first line, for an error this module has no wording of.
fn fallback(err: &clap::Error) -> String {
    let text = err.to_string();
    let first = text.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_a_swap_of_neighbours_as_one_edit() {
        assert_eq!(distance("nte", "net"), 1);
        assert_eq!(distance("net", "name"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("interative", "interactive"), 1);
    }

    #[test]
    fn clap_renderings_of_arguments_become_their_names() {
        assert_eq!(arg_name("--format <FORMAT>"), "--format");
        assert_eq!(arg_name("--no-legend[=<BOOL>]"), "--no-legend");
        assert_eq!(arg_name("<COMMAND>..."), "COMMAND");
        assert_eq!(arg_name("[UUID]"), "UUID");
        assert_eq!(arg_name("[UUID]..."), "UUID");
        assert_eq!(arg_name("--nte"), "--nte");
    }

    #[test]
    fn only_a_really_near_candidate_is_suggested() {
        let opts = [
            "net",
            "name",
            "interactive",
            "inherit-env",
            "dns",
            "dns-search",
        ];
        assert_eq!(nearest("nte", opts.iter().copied()), Some("net"));
        assert_eq!(
            nearest("interactiv", opts.iter().copied()),
            Some("interactive")
        );
        assert_eq!(nearest("inter", opts.iter().copied()), Some("interactive"));
        assert_eq!(nearest("netx", opts.iter().copied()), Some("net"));
        // Neither near nor the start of exactly one.
        assert_eq!(nearest("bogus", opts.iter().copied()), None);
        assert_eq!(nearest("ab", opts.iter().copied()), None);
        assert_eq!(nearest("port", ["net", "name"].into_iter()), None);
        assert_eq!(nearest("dns-", opts.iter().copied()), Some("dns"));
    }
}
