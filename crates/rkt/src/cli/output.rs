//! Standard output of every command. `println!` and `print!` in the command modules are
//! the macros here, not std's (cli/mod.rs declares this module first, with `#[macro_use]`,
//! so they shadow std's for every module after it): same syntax, but when stdout is a pipe
//! whose reader has gone (`rkt list | head -1`), rkt ends the way Unix tools do, killed by
//! SIGPIPE without a word, where std's would panic ("failed printing to stdout: Broken
//! pipe"). Rust ignores SIGPIPE for the whole process, and rkt needs that: a plugin that
//! exits without reading its stdin must give an error, not kill rkt. So only a write to
//! stdout ends the process this way.

use std::fmt;
use std::io::{ErrorKind, Write};

/// `println!`, ending rkt quietly when stdout's reader has gone.
macro_rules! println {
    () => {
        $crate::cli::output::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::output::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!`, ending rkt quietly when stdout's reader has gone.
#[allow(unused_macros)] // For the commands that print without a newline.
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::cli::output::write(format_args!($($arg)*))
    };
}

/// Writes `args` to stdout (what the macros call). A broken pipe ends the process by
/// SIGPIPE (see the module docs); any other failure panics, as std's macros do.
pub fn write(args: fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    match out.write_fmt(args) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::BrokenPipe => die_of_sigpipe(),
        Err(e) => panic!("failed printing to stdout: {e}"),
    }
}

/// Writes `text` to stdout and flushes it, for a command that builds its output first;
/// a broken pipe ends the process as [`write`] does, any other failure is returned.
#[allow(dead_code)] // For commands that print a whole text at once.
pub fn print(text: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => die_of_sigpipe(),
        other => other.context("cannot write to stdout"),
    }
}

/// Ends the process as a write to a pipe without readers does by default.
fn die_of_sigpipe() -> ! {
    use nix::sys::signal::{raise, signal, SigHandler, Signal};
    // SAFETY: restores the default disposition of SIGPIPE (no handler function is
    // installed) just before raising it to end the process; nothing runs in between.
    unsafe {
        let _ = signal(Signal::SIGPIPE, SigHandler::SigDfl);
    }
    let _ = raise(Signal::SIGPIPE);
    // Not reached: the default action of SIGPIPE ends the process.
    std::process::exit(128 + Signal::SIGPIPE as i32)
}
