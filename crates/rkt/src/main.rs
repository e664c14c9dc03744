//! The `rkt` binary: parses the command line and hands each command to the library.
//!
//! The hidden `stage1-init` command, which `rkt run` re-executes itself as for every pod,
//! goes straight to the library: its arguments are fixed and machine-written, and building
//! the whole command line definition first would only add to every pod's start.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    if args
        .next()
        .is_some_and(|cmd| cmd == rkt::stage::INIT_COMMAND)
    {
        let status = rkt::stage::init::main_from_args(args);
        return ExitCode::from((status & 0xff) as u8);
    }
    cli::main()
}
