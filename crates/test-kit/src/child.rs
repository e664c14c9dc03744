//! A child process that does not outlive its test: a server, a client or a bystander the
//! test started is killed and reaped when the test ends, also when it fails half-way.

use std::ops::{Deref, DerefMut};
use std::process::Child;

/// A child killed (SIGKILL) and reaped when dropped, on success and on panic alike (a child
/// that ended already is only reaped). Derefs to its [`Child`]: its PID, `try_wait` and
/// pipes are used as usual; a test that wants it gone earlier drops it.
///
/// ```ignore
/// let server = test_kit::KillOnDrop(Command::new("dnsmasq").spawn().unwrap());
/// wait_for("dnsmasq to serve", PATIENCE, || serves().then_some(())); // may panic
/// drop(server); // killed, reaped
/// ```
#[derive(Debug)]
pub struct KillOnDrop(pub Child);

impl Deref for KillOnDrop {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_dropped_child_is_killed_and_reaped() {
        let mut child = KillOnDrop(Command::new("sleep").arg("300").spawn().unwrap());
        assert!(child.try_wait().unwrap().is_none(), "sleep runs");
        let pid = child.id();
        drop(child);
        // Reaped: no zombie is left under our PID for it.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(stat.is_empty(), "process {pid} left: {stat}");
    }
}
