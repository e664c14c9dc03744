//! A pseudo-terminal whose descriptors no other child inherits.
//!
//! `openpty(3)` makes both ends without close-on-exec, so a process another test of the same
//! binary starts meanwhile (a pod, a registry) would keep the terminal's slave open and the
//! master would never read its end. Here both ends are opened close-on-exec; a child given
//! the slave as stdin, stdout or stderr still gets it (dup2 onto 0-2 clears the flag).

use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};

use nix::fcntl::OFlag;

/// The two ends of a new pseudo-terminal.
pub struct Pty {
    /// The side the test reads and types into.
    pub master: OwnedFd,
    /// The side a child uses as its terminal.
    pub slave: OwnedFd,
}

/// A new pseudo-terminal of `rows` x `cols` (the kernel's default size when `None`), both
/// ends close-on-exec.
pub fn open(size: Option<(u16, u16)>) -> Pty {
    let flags = OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
    let master = nix::pty::posix_openpt(flags).expect("posix_openpt");
    nix::pty::grantpt(&master).expect("grantpt");
    nix::pty::unlockpt(&master).expect("unlockpt");
    let name = nix::pty::ptsname_r(&master).expect("ptsname");
    let slave = nix::fcntl::open(name.as_str(), flags, nix::sys::stat::Mode::empty())
        .unwrap_or_else(|e| panic!("open {name}: {e}"));
    // SAFETY: `open` returned a new descriptor that nothing else owns.
    let slave = unsafe { OwnedFd::from_raw_fd(slave) };
    // SAFETY: the master's descriptor moves out of the `PtyMaster` into the `OwnedFd`,
    // which owns it from now on.
    let master = unsafe { OwnedFd::from_raw_fd(master.into_raw_fd()) };
    if let Some((rows, cols)) = size {
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize, which lives across the call.
        let rc = unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCSWINSZ, &size) };
        assert_eq!(rc, 0, "TIOCSWINSZ: {}", std::io::Error::last_os_error());
    }
    Pty { master, slave }
}

/// What a terminal has shown: everything read from its master, by a thread of its own
/// from [`Screen::record`] until the terminal's other end is closed.
pub struct Screen {
    shown: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

impl Screen {
    /// Starts reading `master` (a copy of it: the caller keeps typing into its own).
    pub fn record(master: &OwnedFd) -> Screen {
        use std::io::Read;
        let shown = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut reader = std::fs::File::from(master.try_clone().expect("dup the master"));
        let sink = shown.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once the last other end is closed.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Screen { shown }
    }

    /// All it has shown so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.shown.lock().unwrap()).into_owned()
    }

    /// Waits until it has shown `needle` ([`crate::PATIENCE`] at most); returns all it
    /// showed then.
    pub fn wait_for(&self, needle: &str) -> String {
        let deadline = std::time::Instant::now() + crate::PATIENCE;
        loop {
            let text = self.text();
            if text.contains(needle) {
                return text;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no {needle:?} on the terminal after {:?}:\n{text}",
                crate::PATIENCE
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
