//! `rkt-cri`: a Kubernetes CRI (`runtime.v1`) server on the rkt library. A CRI pod sandbox
//! is an rkt sandbox (`rkt app sandbox`), a CRI container an app in it; all state is the pod
//! store's, on disk, so a restarted server finds its pods and containers again.
//!
//! This binary is also the stage of the pods it runs: the hidden commands the library
//! executes its binary as (`stage1-init`, `stage1-enter`, `stage1-app`, `stage1-log`) go
//! straight to the library, as in `rkt`'s own `main`, and `sandbox-runner` holds one pod
//! (the process `rkt app sandbox` leaves running), started by the server.

mod authority;
mod container;
mod error;
mod exec;
mod images;
mod locks;
mod meta;
mod network;
mod options;
mod proto;
mod runner;
mod runtime_info;
mod sandbox;
mod server;
mod spawner;
mod stats;
mod streaming;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let status = match args.next() {
        Some(cmd) if cmd == spawner::SPAWNER_COMMAND => spawner::main(),
        Some(cmd) => match helper_command(&cmd, args) {
            Some(status) => status,
            None => return serve(),
        },
        None => return serve(),
    };
    ExitCode::from((status & 0xff) as u8)
}

/// Runs this binary's hidden command `cmd` (a sandbox's runner, the exec helper, the
/// stage's commands) with `args`, executed or forked by the spawner; `None`: `cmd` is none.
fn helper_command(
    cmd: &std::ffi::OsStr,
    args: impl Iterator<Item = std::ffi::OsString>,
) -> Option<i32> {
    if cmd == runner::RUNNER_COMMAND {
        Some(runner::main_from_args(args))
    } else if cmd == exec::EXEC_COMMAND {
        Some(exec::main_from_args(args))
    } else {
        rkt::stage::main_if_stage_command(cmd, args)
    }
}

fn serve() -> ExitCode {
    let args = options::Args::parse();
    match options::Config::from_args(&args).and_then(server::run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rkt-cri: {}", error::describe(&e));
            ExitCode::from(254)
        }
    }
}
