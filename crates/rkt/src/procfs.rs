//! Processes as `/proc` shows them: the PIDs there, a process's `stat` fields and the PIDs
//! it has in nested PID namespaces. A process can end between any two reads, so each read
//! that finds it gone answers `None` or nothing rather than an error.

/// The PIDs in `/proc` (this process's PID namespace), in directory order.
pub fn pids() -> impl Iterator<Item = i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
}

/// One process's `/proc/<pid>/stat`. The fields are numbered as proc(5) numbers them: 1 is
/// the PID, 2 the command (which may hold blanks and parentheses), 3 the state and so on.
#[derive(Debug, Clone)]
pub struct Stat {
    /// What follows the command's closing parenthesis: fields 3 onwards.
    rest: String,
}

impl Stat {
    /// Reads process `pid`'s record; `None` when it is gone.
    pub fn of(pid: i32) -> Option<Stat> {
        Self::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// This process's own record.
    pub fn of_self() -> Option<Stat> {
        Self::parse(&std::fs::read_to_string("/proc/self/stat").ok()?)
    }

    fn parse(text: &str) -> Option<Stat> {
        let (_, rest) = text.rsplit_once(')')?;
        Some(Stat {
            rest: rest.to_string(),
        })
    }

    /// Field `n` (3 or more) as text.
    pub fn field(&self, n: usize) -> Option<&str> {
        self.rest.split_whitespace().nth(n.checked_sub(3)?)
    }

    /// Field `n` (3 or more) as a number.
    pub fn number<T: std::str::FromStr>(&self, n: usize) -> Option<T> {
        self.field(n)?.parse().ok()
    }

    /// The state letter (field 3): `R`, `S`, `D`, `Z` for a zombie, `X` for a dead one...
    pub fn state(&self) -> Option<char> {
        self.field(3)?.chars().next()
    }

    /// Whether the process can still run: neither a zombie nor dead.
    pub fn alive(&self) -> bool {
        !matches!(self.state(), Some('Z' | 'X') | None)
    }

    /// The parent's PID (field 4).
    pub fn ppid(&self) -> Option<i32> {
        self.number(4)
    }

    /// The process group (field 5).
    pub fn pgrp(&self) -> Option<i32> {
        self.number(5)
    }
}

/// The processes whose parent is `parent`, found by reading every process's `stat`.
pub fn children(parent: i32) -> Vec<i32> {
    pids()
        .filter(|pid| Stat::of(*pid).and_then(|s| s.ppid()) == Some(parent))
        .collect()
}

/// Process `pid`'s PIDs from its own PID namespace's down to its innermost (the `NSpid`
/// line of `/proc/<pid>/status`); empty when it is gone.
pub fn ns_pids(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|ids| {
            ids.split_whitespace()
                .filter_map(|i| i.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_counted_after_a_command_with_blanks_and_parentheses() {
        let stat = Stat::parse("42 (a (b) c) S 7 9 9 0 -1").unwrap();
        assert_eq!(stat.state(), Some('S'));
        assert_eq!(stat.ppid(), Some(7));
        assert_eq!(stat.pgrp(), Some(9));
        assert_eq!(stat.number::<i32>(8), Some(-1));
        assert_eq!(stat.field(9), None);
        assert_eq!(stat.field(2), None);
        assert!(stat.alive());
        assert!(!Stat::parse("42 (z) Z 1 42").unwrap().alive());
    }

    #[test]
    fn this_process_is_found_as_its_parents_child() {
        let me = std::process::id() as i32;
        let stat = Stat::of(me).expect("our own stat");
        assert_eq!(stat.ppid(), Some(nix::unistd::getppid().as_raw()));
        assert!(pids().any(|p| p == me));
        assert!(children(stat.ppid().unwrap()).contains(&me));
        assert_eq!(ns_pids(me).first(), Some(&me));
        assert_eq!(Stat::of_self().and_then(|s| s.ppid()), stat.ppid());
    }
}
