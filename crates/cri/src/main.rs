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
mod stats;
mod streaming;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let status = match args.next() {
        Some(cmd) if cmd == runner::RUNNER_COMMAND => runner::main_from_args(args),
        Some(cmd) if cmd == exec::EXEC_COMMAND => exec::main_from_args(args),
        Some(cmd) => match rkt::stage::main_if_stage_command(&cmd, args) {
            Some(status) => status,
            None => return serve(),
        },
        None => return serve(),
    };
    ExitCode::from((status & 0xff) as u8)
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
