//! The `rkt` binary: parses the command line and hands each command to the library.
//!
//! The hidden `stage1-init` and `stage1-enter` commands, which `rkt run` and `rkt enter`
//! execute (a sealed copy of) this binary as, go straight to the library: its arguments are fixed and machine-written, and building
//! the whole command line definition first would only add to every pod's start. So does
//! `release-dead-pods`, which the commands that start or list pods start in the background
//! (`cli::reap`).

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let status = match args.next() {
        Some(cmd) if cmd == cli::reap::COMMAND => cli::reap::main_from_args(args),
        Some(cmd) => match rkt::stage::main_if_stage_command(&cmd, args) {
            Some(status) => status,
            None => return cli::main(),
        },
        None => return cli::main(),
    };
    ExitCode::from((status & 0xff) as u8)
}
