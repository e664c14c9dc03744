//! Host-wide admission of network operations: at most [`limit`] CNI operations (one
//! network's ADD, or its DEL and firewall sweep) run at once for a data directory, and the
//! others wait their turn in arrival order, whichever command asked (`run`, `run-prepared`,
//! the teardown after `stop`, `rm`, `gc`).
//!
//! Plugins of many pods started at once otherwise all queue on the kernel's xtables lock
//! (or retry their nftables transactions) at the same time; the plugin timeout then kills
//! some in the middle of their work. Waiting here does not count toward the plugin timeout:
//! a plugin's clock starts when it starts.
//!
//! # How (all under `<data>/netops`, mode 0700)
//! - `slot-<i>` for `i` below the limit: an operation runs while it holds an exclusive
//!   `flock` on one of them.
//! - `wait/<ticket>`: a waiter's ticket, numbered from `counter` (taken under `flock` on
//!   it), held with an exclusive `flock` while the waiter waits. A waiter waits for the
//!   ticket before its own to go: deleted means admitted, and since admission is in ticket
//!   order, everything before it was admitted too, so the waiter is now first in line; still
//!   there but unlocked means its owner died (or gave up), and the waiter looks one further
//!   back. The first in line takes the first free slot (polling every 2 ms: only one process
//!   polls), then deletes its ticket, which lets the next one in.
//!
//! Every claim is a `flock`, released by the kernel when its holder dies: a killed `rkt`
//! leaves no stale claim, only a file that the next waiter recognises as dead and removes.
//! The limit is [`set_limit`] (from the `net-operations` configuration or
//! `$RKT_NET_OPERATIONS`), by default the number of CPUs.

use std::fs::{self, File, OpenOptions};
use std::io::{IsTerminal, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// The directory under the data directory.
pub const DIR: &str = "netops";

/// How often the first waiter looks for a free slot.
const SLOT_POLL: Duration = Duration::from_millis(2);
/// How often a waiter that may be interrupted checks whether it was.
const INTERRUPT_POLL: Duration = Duration::from_millis(100);
/// After how long waiting is said on a terminal.
const SAY_AFTER: Duration = Duration::from_secs(1);

/// 0: not set, use [`default_limit`].
static LIMIT: AtomicUsize = AtomicUsize::new(0);

/// Sets this process's limit (the configuration in effect; at least 1).
pub fn set_limit(limit: usize) {
    LIMIT.store(limit.max(1), Ordering::SeqCst);
}

/// The limit in effect: [`set_limit`]'s, else [`default_limit`].
pub fn limit() -> usize {
    match LIMIT.load(Ordering::SeqCst) {
        0 => default_limit(),
        n => n,
    }
}

/// The default limit: the number of CPUs this process may use (the configuration's default,
/// which `$RKT_NET_OPERATIONS` and `net-operations` override).
pub use crate::config::default_net_operations as default_limit;

/// Waiting for admission failed.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// A file of the queue could not be used.
    #[error("network operations queue: cannot {action} {}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The caller was interrupted while it waited.
    #[error("interrupted while waiting for its turn to run network plugins")]
    Interrupted,
}

/// The right to run one network operation; released on drop.
#[derive(Debug)]
pub struct Slot {
    _lock: Flock<File>,
}

/// The queue of one data directory.
#[derive(Debug, Clone)]
pub struct Queue {
    dir: PathBuf,
    limit: usize,
}

impl Queue {
    /// The queue at `dir` admitting `limit` operations at once.
    pub fn new(dir: impl Into<PathBuf>, limit: usize) -> Queue {
        Queue {
            dir: dir.into(),
            limit: limit.max(1),
        }
    }

    /// The queue of the data directory holding pod directory `pod_dir`
    /// (`<data>/pods/<uuid>`), with the limit in effect.
    pub fn for_pod_dir(pod_dir: &Path) -> Queue {
        let data = pod_dir
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("/"));
        Queue::new(data.join(DIR), limit())
    }

    /// Waits for this caller's turn, then for a free slot, and returns it. `interrupted`
    /// is asked every 100 ms; once it is true the caller leaves the queue and gets
    /// [`AdmissionError::Interrupted`]. Pass `None` for an operation that must not be given
    /// up (a teardown). A wait longer than a second is said once on stderr, if that is a
    /// terminal.
    pub fn admit(&self, interrupted: Option<fn() -> bool>) -> Result<Slot, AdmissionError> {
        let started = Instant::now();
        let mut said = false;
        let mut say = |ticket: u64| {
            if !said && started.elapsed() >= SAY_AFTER {
                said = true;
                if std::io::stderr().is_terminal() {
                    let n = self.ahead_of(ticket);
                    let s = if n == 1 { "" } else { "s" };
                    eprintln!("rkt: waiting for {n} network operation{s}");
                }
            }
        };
        let (ticket, mine) = self.take_ticket()?;
        self.wait_for_predecessors(ticket, interrupted, &mut say)?;
        let slots = self.open_slots()?;
        loop {
            for file in &slots {
                let file = file
                    .try_clone()
                    .map_err(|e| self.io("open", &self.dir, e))?;
                match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                    Ok(lock) => {
                        // Admitted: deleting the ticket lets the next waiter in.
                        let _ = fs::remove_file(self.ticket_path(ticket));
                        drop(mine);
                        return Ok(Slot { _lock: lock });
                    }
                    Err((_, Errno::EWOULDBLOCK)) => {}
                    Err((_, errno)) => return Err(self.io("lock", &self.dir, errno.into())),
                }
            }
            if interrupted.is_some_and(|f| f()) {
                return Err(AdmissionError::Interrupted);
            }
            say(ticket);
            std::thread::sleep(SLOT_POLL);
        }
    }

    fn io(&self, action: &'static str, path: &Path, source: std::io::Error) -> AdmissionError {
        AdmissionError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }

    fn wait_dir(&self) -> PathBuf {
        self.dir.join("wait")
    }

    fn ticket_path(&self, ticket: u64) -> PathBuf {
        self.wait_dir().join(format!("{ticket:020}"))
    }

    /// Takes the next ticket and returns it with its held lock. The ticket file is locked
    /// before it gets its name, so nobody ever sees it unlocked while its owner lives.
    fn take_ticket(&self) -> Result<(u64, Flock<File>), AdmissionError> {
        let wait = self.wait_dir();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&wait)
            .map_err(|e| self.io("create", &wait, e))?;
        let counter_path = self.dir.join("counter");
        let counter = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&counter_path)
            .map_err(|e| self.io("open", &counter_path, e))?;
        let mut counter = Flock::lock(counter, FlockArg::LockExclusive)
            .map_err(|(_, e)| self.io("lock", &counter_path, e.into()))?;
        let mut text = String::new();
        counter
            .read_to_string(&mut text)
            .map_err(|e| self.io("read", &counter_path, e))?;
        let ticket: u64 = text.trim().parse().unwrap_or(0);

        let tmp = wait.join(format!(
            ".new-{}-{}",
            std::process::id(),
            nix::unistd::gettid()
        ));
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| self.io("create", &tmp, e))?;
        let held = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| self.io("lock", &tmp, e.into()))?;
        let path = self.ticket_path(ticket);
        fs::rename(&tmp, &path).map_err(|e| self.io("rename", &path, e))?;

        let next = format!("{:020}\n", ticket + 1);
        counter
            .seek(SeekFrom::Start(0))
            .and_then(|_| counter.write_all(next.as_bytes()))
            .map_err(|e| self.io("write", &counter_path, e))?;
        Ok((ticket, held))
    }

    /// Returns once every ticket before `ticket` was admitted (or its owner is gone).
    fn wait_for_predecessors(
        &self,
        ticket: u64,
        interrupted: Option<fn() -> bool>,
        say: &mut impl FnMut(u64),
    ) -> Result<(), AdmissionError> {
        let mut pred = ticket;
        while pred > 0 {
            pred -= 1;
            let path = self.ticket_path(pred);
            let file = match File::open(&path) {
                Ok(f) => f,
                // Admitted (or never made): everyone before it went first.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(self.io("open", &path, e)),
            };
            let file = self.lock_shared_waiting(file, &path, interrupted, &mut *say, ticket)?;
            let nlink = file
                .metadata()
                .map_err(|e| self.io("examine", &path, e))?
                .nlink();
            if nlink == 0 {
                return Ok(()); // deleted by its owner on admission
            }
            // Its owner died or gave up while waiting: forget it, look further back.
            let _ = fs::remove_file(&path);
        }
        Ok(())
    }

    /// A shared lock on `file` (a waiting ticket), waited for on a helper thread so that
    /// an interruption is noticed meanwhile.
    fn lock_shared_waiting(
        &self,
        file: File,
        path: &Path,
        interrupted: Option<fn() -> bool>,
        say: &mut impl FnMut(u64),
        ticket: u64,
    ) -> Result<Flock<File>, AdmissionError> {
        let file = match Flock::lock(file, FlockArg::LockSharedNonblock) {
            Ok(lock) => return Ok(lock),
            Err((file, Errno::EWOULDBLOCK)) => file,
            Err((_, e)) => return Err(self.io("lock", path, e.into())),
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(Flock::lock(file, FlockArg::LockShared).map_err(|(_, e)| e));
        });
        loop {
            match rx.recv_timeout(if interrupted.is_some() {
                INTERRUPT_POLL
            } else {
                SAY_AFTER
            }) {
                Ok(Ok(lock)) => return Ok(lock),
                Ok(Err(e)) => return Err(self.io("lock", path, e.into())),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if interrupted.is_some_and(|f| f()) {
                        return Err(AdmissionError::Interrupted);
                    }
                    say(ticket);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(self.io("lock", path, std::io::Error::other("lock thread died")))
                }
            }
        }
    }

    fn open_slots(&self) -> Result<Vec<File>, AdmissionError> {
        (0..self.limit)
            .map(|i| {
                let path = self.dir.join(format!("slot-{i}"));
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .mode(0o600)
                    .open(&path)
                    .map_err(|e| self.io("open", &path, e))
            })
            .collect()
    }

    /// How many operations run or wait before `ticket`: the busy slots and the tickets
    /// before it (an estimate: a dead waiter's ticket counts until it is noticed).
    fn ahead_of(&self, ticket: u64) -> usize {
        let waiting = fs::read_dir(self.wait_dir())
            .map(|dir| {
                dir.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok())
                    .filter(|t| *t < ticket)
                    .count()
            })
            .unwrap_or(0);
        let busy = (0..self.limit)
            .filter(|i| {
                File::open(self.dir.join(format!("slot-{i}")))
                    .ok()
                    .is_some_and(|f| {
                        matches!(
                            Flock::lock(f, FlockArg::LockSharedNonblock),
                            Err((_, Errno::EWOULDBLOCK))
                        )
                    })
            })
            .count();
        waiting + busy
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};

    /// Never more than the limit at once, and admission in arrival order.
    #[test]
    fn admits_at_most_the_limit_in_arrival_order() {
        let tmp = tempfile::tempdir().unwrap();
        let queue = Queue::new(tmp.path().join("q"), 2);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let order = Arc::new(Mutex::new(Vec::new()));
        // Two hold the slots while the others line up, one by one, in a known order.
        let holders: Vec<Slot> = (0..2).map(|_| queue.admit(None).unwrap()).collect();
        let mut threads = Vec::new();
        for i in 0..8 {
            let (q, running, most, order) =
                (queue.clone(), running.clone(), most.clone(), order.clone());
            threads.push(std::thread::spawn(move || {
                let slot = q.admit(None).unwrap();
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                order.lock().unwrap().push(i);
                std::thread::sleep(Duration::from_millis(20));
                running.fetch_sub(1, Ordering::SeqCst);
                drop(slot);
            }));
            // Ticket i is taken before ticket i + 1.
            wait_until(|| count_tickets(&queue) == i + 1);
        }
        drop(holders);
        for t in threads {
            t.join().unwrap();
        }
        assert!(most.load(Ordering::SeqCst) <= 2, "{most:?}");
        let order = order.lock().unwrap().clone();
        // Two run at once, so neighbours may swap when they record; nobody overtakes more.
        for (pos, i) in order.iter().enumerate() {
            assert!(pos.abs_diff(*i) <= 1, "admission order {order:?}");
        }
        assert_eq!(count_tickets(&queue), 0);
    }

    /// A waiter that died (its ticket left unlocked) or gave up holds nobody back.
    #[test]
    fn dead_and_interrupted_waiters_leave_no_claim() {
        let tmp = tempfile::tempdir().unwrap();
        let queue = Queue::new(tmp.path().join("q"), 1);
        let holder = queue.admit(None).unwrap();
        // A waiter killed while waiting: its ticket file stays, unlocked.
        let (ticket, lock) = queue.take_ticket().unwrap();
        drop(lock);
        assert!(queue.ticket_path(ticket).exists());
        // A waiter interrupted while waiting.
        static STOP: AtomicBool = AtomicBool::new(false);
        let q = queue.clone();
        let quitter = std::thread::spawn(move || q.admit(Some(|| STOP.load(Ordering::SeqCst))));
        wait_until(|| queue.ticket_path(ticket + 1).exists());
        STOP.store(true, Ordering::SeqCst);
        assert!(matches!(
            quitter.join().unwrap(),
            Err(AdmissionError::Interrupted)
        ));
        // The next one gets in as soon as the slot is free.
        let q = queue.clone();
        let next = std::thread::spawn(move || q.admit(None).map(drop));
        std::thread::sleep(Duration::from_millis(100));
        assert!(!next.is_finished(), "admitted while the only slot is held");
        drop(holder);
        next.join().unwrap().unwrap();
        assert_eq!(count_tickets(&queue), 0, "stale tickets were removed");
    }

    /// A slot held by a process that died is free again (a flock ends with its holder).
    #[test]
    fn a_slot_is_free_once_its_holder_is_gone() {
        let tmp = tempfile::tempdir().unwrap();
        let queue = Queue::new(tmp.path().join("q"), 1);
        let dir = tmp.path().join("q");
        let slot = queue.admit(None).unwrap();
        // What a process killed while holding it leaves: the file, no lock.
        drop(slot);
        assert!(dir.join("slot-0").exists());
        drop(queue.admit(None).unwrap());
    }

    /// What a long wait is said with: the busy slots and the tickets before the waiter's.
    #[test]
    fn counts_the_operations_ahead() {
        let tmp = tempfile::tempdir().unwrap();
        let queue = Queue::new(tmp.path().join("q"), 2);
        let _a = queue.admit(None).unwrap();
        let (t1, _l1) = queue.take_ticket().unwrap();
        let (t2, _l2) = queue.take_ticket().unwrap();
        assert_eq!(queue.ahead_of(t2 + 1), 3);
        assert_eq!(queue.ahead_of(t1), 1);
    }

    #[test]
    fn the_queue_of_a_pod_is_under_its_data_dir() {
        let q = Queue::for_pod_dir(Path::new("/var/lib/rkt/pods/abc"));
        assert_eq!(q.dir, Path::new("/var/lib/rkt/netops"));
    }

    fn count_tickets(queue: &Queue) -> usize {
        fs::read_dir(queue.wait_dir())
            .unwrap()
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .count()
    }

    fn wait_until(mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !f() {
            assert!(Instant::now() < deadline, "gave up waiting");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
