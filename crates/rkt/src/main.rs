//! The `rkt` binary: parses the command line and hands each command to the library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
