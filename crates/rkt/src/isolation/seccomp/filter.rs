//! Compiling a [`Resolved`] spec into the BPF programs the kernel runs, with `seccompiler`
//! (rust-vmm, pure Rust) for the syscall table and a small hand-written guard.
//!
//! Two programs, loaded in this order (the kernel runs the newest first and keeps the
//! strongest verdict, the first one found among equals):
//! 1. the spec: a blacklist (`mode=remove`: the set returns the errno, the rest is allowed)
//!    or a whitelist (`mode=retain`: the reverse), with `clone` checked for
//!    `CLONE_NEWUSER` and `personality` allowed only with [`PERSONALITY_ALLOWED`]; a call
//!    of another architecture (a 32-bit call on a 64-bit kernel) kills the process, as
//!    seccompiler builds every filter;
//! 2. the guard: `clone3` returns `ENOSYS` (its flags sit in memory a filter cannot read;
//!    C libraries then fall back to `clone`), and on x86-64 every x32 call (numbers with
//!    bit 30 set, which would bypass a blacklist of 64-bit numbers) returns the errno.

use std::collections::BTreeMap;

use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};

use super::{syscall_number, Mode, Resolved};
use crate::isolation::IsolationError;

/// `AUDIT_ARCH_*` of the architecture rkt runs on.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;
#[cfg(target_arch = "riscv64")]
const AUDIT_ARCH: u32 = 0xc000_00f3;

/// Bit of x32 syscall numbers on x86-64 (`__X32_SYSCALL_BIT`).
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// The `personality(2)` values a filter allows, Docker's: `PER_LINUX` (0), `PER_LINUX32`
/// (0x8), `UNAME26` (0x20000), `PER_LINUX32 | UNAME26` and the query `0xffffffff`. Others,
/// `ADDR_NO_RANDOMIZE` (0x40000) or `READ_IMPLIES_EXEC` among them, weaken the app's address
/// space against exploits. The kernel reads the argument as 32 bits, and so does the check.
pub const PERSONALITY_ALLOWED: [u32; 5] = [0x0, 0x8, 0x2_0000, 0x2_0008, 0xffff_ffff];

const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;

/// The programs for `resolved`, in loading order.
pub fn compile(resolved: &Resolved) -> Result<Vec<BpfProgram>, IsolationError> {
    let clone = syscall_number("clone").expect("every architecture has clone");
    let newuser = libc::CLONE_NEWUSER as u64;
    let bad = |e: seccompiler::BackendError| IsolationError::Unsupported {
        what: format!("cannot build the seccomp filter: {e}"),
    };
    let flags_are = |value: u64| -> Result<Vec<SeccompRule>, IsolationError> {
        let cond = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(newuser),
            value,
        )
        .map_err(bad)?;
        Ok(vec![SeccompRule::new(vec![cond]).map_err(bad)?])
    };
    let personality = syscall_number("personality").expect("every architecture has personality");
    // One rule per allowed value (rules are or-ed), or one rule of all the inequalities.
    let personas = |op: SeccompCmpOp, each: bool| {
        let conds = PERSONALITY_ALLOWED
            .iter()
            .map(|&v| SeccompCondition::new(0, SeccompCmpArgLen::Dword, op.clone(), v.into()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?;
        let rules = if each {
            conds
                .into_iter()
                .map(|c| SeccompRule::new(vec![c]))
                .collect()
        } else {
            vec![SeccompRule::new(conds)]
        };
        rules
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)
    };
    let errno = SeccompAction::Errno(resolved.errno);
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = resolved
        .syscalls
        .iter()
        .map(|&nr| (nr, Vec::new()))
        .collect();
    let (mismatch, matched) = match resolved.mode {
        Mode::Remove => {
            // Listed: refused outright. Otherwise refused only for a new user namespace.
            rules.entry(clone).or_insert(flags_are(newuser)?);
            // Listed: refused outright. Otherwise refused for a value not allowed.
            rules
                .entry(personality)
                .or_insert(personas(SeccompCmpOp::Ne, false)?);
            (SeccompAction::Allow, errno)
        }
        Mode::Retain => {
            // Allowed only when listed, and then never for a new user namespace.
            if let Some(rule) = rules.get_mut(&clone) {
                *rule = flags_are(0)?;
            }
            // Allowed only when listed, and then only with an allowed value.
            if let Some(rule) = rules.get_mut(&personality) {
                *rule = personas(SeccompCmpOp::Eq, true)?;
            }
            (errno, SeccompAction::Allow)
        }
    };
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(bad)?;
    let filter = SeccompFilter::new(rules, mismatch, matched, arch).map_err(bad)?;
    let main = BpfProgram::try_from(filter).map_err(bad)?;
    Ok(vec![main, guard(resolved.errno)])
}

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// BPF_LD | BPF_W | BPF_ABS.
const LD_W_ABS: u16 = 0x20;
/// BPF_JMP | BPF_JEQ | BPF_K.
const JEQ_K: u16 = 0x05 | 0x10;
/// BPF_JMP | BPF_JGE | BPF_K.
const JGE_K: u16 = 0x05 | 0x30;
/// BPF_RET | BPF_K.
const RET_K: u16 = 0x06;

/// See the module docs. Calls of another architecture are left to the main program.
fn guard(errno: u32) -> BpfProgram {
    let clone3 = syscall_number("clone3").expect("clone3 exists since Linux 5.3") as u32;
    // Only x86-64 has a second syscall table in the same architecture.
    let x32_floor = if cfg!(target_arch = "x86_64") {
        X32_SYSCALL_BIT
    } else {
        u32::MAX
    };
    vec![
        /* 0 */ stmt(LD_W_ABS, 4), // seccomp_data.arch
        /* 1 */ jump(JEQ_K, AUDIT_ARCH, 0, 5), // else: allow (7)
        /* 2 */ stmt(LD_W_ABS, 0), // seccomp_data.nr
        /* 3 */ jump(JEQ_K, clone3, 2, 0), // ENOSYS (6)
        /* 4 */ jump(JGE_K, x32_floor, 0, 2), // x32: errno (5); else allow (7)
        /* 5 */ stmt(RET_K, SECCOMP_RET_ERRNO | (errno & 0xffff)),
        /* 6 */ stmt(RET_K, SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        /* 7 */ stmt(RET_K, SECCOMP_RET_ALLOW),
    ]
}

#[cfg(test)]
mod tests {
    //! The programs run in a small classic-BPF interpreter with the kernel's rule for
    //! several filters, so what each call gets is checked without loading anything.
    use super::*;
    use crate::isolation::seccomp::SeccompSpec;

    struct Call {
        arch: u32,
        nr: u32,
        args: [u64; 6],
    }

    fn word(c: &Call, offset: u32) -> u32 {
        match offset {
            0 => c.nr,
            4 => c.arch,
            o if (16..64).contains(&o) => {
                let arg = c.args[((o - 16) / 8) as usize];
                if (o - 16) % 8 == 0 {
                    arg as u32
                } else {
                    (arg >> 32) as u32
                }
            }
            o => panic!("load at offset {o}"),
        }
    }

    fn run_one(prog: &[sock_filter], c: &Call) -> u32 {
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = &prog[pc];
            pc += 1;
            match i.code {
                0x20 => acc = word(c, i.k),
                0x54 => acc &= i.k,         // ALU AND K
                0x05 => pc += i.k as usize, // JA
                0x15 | 0x25 | 0x35 | 0x45 => {
                    let taken = match i.code {
                        0x15 => acc == i.k,
                        0x25 => acc > i.k,
                        0x35 => acc >= i.k,
                        _ => acc & i.k != 0,
                    };
                    pc += if taken { i.jt } else { i.jf } as usize;
                }
                0x06 => return i.k,
                code => panic!("instruction {code:#x}"),
            }
        }
    }

    /// The kernel's verdict over several programs: newest first, lowest action wins.
    fn verdict(progs: &[BpfProgram], c: &Call) -> u32 {
        let mut ret = SECCOMP_RET_ALLOW;
        for p in progs.iter().rev() {
            let r = run_one(p, c);
            if ((r & 0xffff_0000) as i32) < ((ret & 0xffff_0000) as i32) {
                ret = r;
            }
        }
        ret
    }

    fn call(name: &str, arg0: u64) -> Call {
        Call {
            arch: AUDIT_ARCH,
            nr: syscall_number(name).unwrap() as u32,
            args: [arg0, 0, 0, 0, 0, 0],
        }
    }

    const EPERM: u32 = SECCOMP_RET_ERRNO | libc::EPERM as u32;
    const ENOSYS: u32 = SECCOMP_RET_ERRNO | libc::ENOSYS as u32;

    #[test]
    fn the_default_refuses_the_blacklist_with_eperm_and_allows_the_rest() {
        let progs = compile(&SeccompSpec::default().resolve().unwrap()).unwrap();
        for name in [
            "keyctl",
            "reboot",
            "init_module",
            "finit_module",
            "mount",
            "unshare",
        ] {
            assert_eq!(verdict(&progs, &call(name, 0)), EPERM, "{name}");
        }
        for name in [
            "read", "openat", "socket", "setuid", "chown", "capset", "execve",
        ] {
            assert_eq!(verdict(&progs, &call(name, 0)), SECCOMP_RET_ALLOW, "{name}");
        }
    }

    #[test]
    fn clone_may_not_make_a_user_namespace_and_clone3_falls_back() {
        for spec in [
            SeccompSpec::default(),
            SeccompSpec::parse("mode=retain,@rkt/default-whitelist").unwrap(),
        ] {
            let progs = compile(&spec.resolve().unwrap()).unwrap();
            let thread = (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64;
            assert_eq!(verdict(&progs, &call("clone", thread)), SECCOMP_RET_ALLOW);
            let userns = (libc::CLONE_NEWUSER | libc::SIGCHLD) as u64;
            assert_eq!(verdict(&progs, &call("clone", userns)), EPERM, "{spec}");
            assert_eq!(verdict(&progs, &call("clone3", 0)), ENOSYS, "{spec}");
        }
    }

    #[test]
    fn io_uring_is_refused_and_personality_takes_dockers_values_only() {
        let progs = compile(&SeccompSpec::default().resolve().unwrap()).unwrap();
        for name in ["io_uring_setup", "io_uring_enter", "io_uring_register"] {
            assert_eq!(verdict(&progs, &call(name, 0)), EPERM, "{name}");
        }
        let whitelist = SeccompSpec::parse("mode=retain,@rkt/default-whitelist").unwrap();
        let listed = compile(&whitelist.resolve().unwrap()).unwrap();
        for progs in [&progs, &listed] {
            for value in PERSONALITY_ALLOWED {
                let got = verdict(progs, &call("personality", value.into()));
                assert_eq!(got, SECCOMP_RET_ALLOW, "{value:#x}");
            }
            // ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, and it again behind bits the kernel
            // does not read (it takes 32 bits).
            for value in [0x4_0000, 0x40_0000, 0x1_0004_0000] {
                let got = verdict(progs, &call("personality", value));
                assert_eq!(got, EPERM, "{value:#x}");
            }
        }
        // Named in a remove list, refused outright; left out of a retain list, too.
        for spec in [
            "mode=remove,@rkt/default-blacklist,personality",
            "mode=retain,read,execve",
        ] {
            let progs = compile(&SeccompSpec::parse(spec).unwrap().resolve().unwrap()).unwrap();
            assert_eq!(verdict(&progs, &call("personality", 0)), EPERM, "{spec}");
        }
    }

    #[test]
    fn a_whitelist_refuses_what_it_does_not_list_with_its_errno() {
        let spec =
            SeccompSpec::parse("mode=retain,errno=EACCES,@docker/default-whitelist").unwrap();
        let progs = compile(&spec.resolve().unwrap()).unwrap();
        let eacces = SECCOMP_RET_ERRNO | libc::EACCES as u32;
        assert_eq!(verdict(&progs, &call("keyctl", 0)), eacces);
        assert_eq!(verdict(&progs, &call("statx", 0)), SECCOMP_RET_ALLOW);
    }

    #[test]
    fn other_architectures_are_killed_and_x32_calls_refused() {
        let progs = compile(&SeccompSpec::default().resolve().unwrap()).unwrap();
        let mut foreign = call("read", 0);
        foreign.arch = 0x4000_0003; // AUDIT_ARCH_I386
        assert_eq!(verdict(&progs, &foreign), libc::SECCOMP_RET_KILL_PROCESS);
        if cfg!(target_arch = "x86_64") {
            let mut x32 = call("keyctl", 0);
            x32.nr |= X32_SYSCALL_BIT;
            assert_eq!(verdict(&progs, &x32), EPERM);
        }
    }
}
