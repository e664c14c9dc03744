//! `Exec`, `Attach` and `PortForward` requests checked and turned into what a URL stands
//! for: bad requests fail the RPC (as kubelet's checks do) rather than the connection.

use tonic::Status;

use super::tokens::{Request, Streams};
use crate::error::invalid;
use crate::options::Config;
use crate::proto;

/// The streams asked for: at least one, and no stderr with a terminal (a terminal has
/// one output).
fn checked_streams(
    rpc: &str,
    (tty, stdin, stdout, stderr): (bool, bool, bool, bool),
) -> Result<Streams, Status> {
    if !(stdin || stdout || stderr) {
        return Err(invalid(format!(
            "{rpc}: ask for at least one of stdin, stdout and stderr"
        )));
    }
    if tty && stderr {
        return Err(invalid(format!(
            "{rpc}: tty and stderr cannot both be asked for (a terminal has one output)"
        )));
    }
    Ok(Streams {
        tty,
        stdin,
        stdout,
        stderr,
    })
}

fn running(config: &Config, id: &str) -> Result<(), Status> {
    let c = crate::container::get(config, id)?;
    if c.state() != proto::ContainerState::ContainerRunning {
        return Err(Status::failed_precondition(format!(
            "container {id} is not running"
        )));
    }
    Ok(())
}

pub fn exec(config: &Config, req: proto::ExecRequest) -> Result<Request, Status> {
    if req.cmd.is_empty() {
        return Err(invalid("Exec: no command"));
    }
    let streams = checked_streams("Exec", (req.tty, req.stdin, req.stdout, req.stderr))?;
    running(config, &req.container_id)?;
    Ok(Request::Exec {
        container_id: req.container_id,
        cmd: req.cmd,
        streams,
    })
}

pub fn attach(config: &Config, req: proto::AttachRequest) -> Result<Request, Status> {
    let streams = checked_streams("Attach", (req.tty, req.stdin, req.stdout, req.stderr))?;
    running(config, &req.container_id)?;
    Ok(Request::Attach {
        container_id: req.container_id,
        streams,
    })
}

pub fn port_forward(config: &Config, req: proto::PortForwardRequest) -> Result<Request, Status> {
    let mut ports = Vec::new();
    for p in req.port {
        match u16::try_from(p) {
            Ok(port) if port > 0 => ports.push(port),
            _ => return Err(invalid(format!("PortForward: {p} is not a port (1-65535)"))),
        }
    }
    let sandbox = crate::sandbox::get(config, &req.pod_sandbox_id)?;
    if !sandbox.ready() {
        return Err(Status::failed_precondition(format!(
            "pod sandbox {} is not ready",
            req.pod_sandbox_id
        )));
    }
    Ok(Request::PortForward {
        sandbox_id: sandbox.id(),
        ports,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_must_be_asked_for_and_fit_a_terminal() {
        // (tty, stdin, stdout, stderr)
        assert!(checked_streams("Exec", (false, false, false, false)).is_err());
        assert!(checked_streams("Exec", (true, false, true, true)).is_err());
        let tty = checked_streams("Exec", (true, true, true, false)).unwrap();
        assert!(tty.tty && tty.stdin && tty.stdout && !tty.stderr);
        assert!(checked_streams("Attach", (false, true, true, true)).is_ok());
    }
}
