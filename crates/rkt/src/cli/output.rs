//! Writing a command's output to stdout. A reader that stops early (`rkt list | head -1`)
//! ends rkt as it ended rkt 1.30: killed by SIGPIPE, quietly, instead of a panic message.
//! rkt ignores SIGPIPE otherwise (Rust's default), which plugin calls rely on: a plugin that
//! exits without reading its stdin must give rkt an error, not kill it.

use std::io::{ErrorKind, Write};

use anyhow::Context;

/// Writes `text` to stdout and flushes it.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => die_of_sigpipe(),
        other => other.context("cannot write to stdout"),
    }
}

/// Ends the process by SIGPIPE, as a shell expects of a writer whose reader went away.
fn die_of_sigpipe() -> ! {
    // SAFETY: signal and raise only change this process's signal disposition and send it a
    // signal; no memory is touched.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    // Not reached: SIGPIPE's default action ends the process.
    std::process::exit(128 + libc::SIGPIPE)
}
