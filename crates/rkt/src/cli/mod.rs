//! (being written) The command line: clap definitions and one module per command.

pub fn main() -> std::process::ExitCode {
    std::process::ExitCode::SUCCESS
}
