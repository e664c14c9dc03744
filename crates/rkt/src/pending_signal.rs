//! The signal that arrived while nobody was there to receive it: set by the stage's
//! forwarding handler ([`crate::stage::signals`]), read by the runner before it starts the
//! app and by `networking` while it waits for its turn or runs a plugin ([`interrupted`]).
//! Here, below both, so that networking knows nothing of the stage. Takes from no room.

use std::sync::atomic::{AtomicI32, Ordering};

/// The signal number; 0: none.
static PENDING: AtomicI32 = AtomicI32::new(0);

/// Remembers `signo` as pending (async-signal-safe: one atomic store).
pub fn set(signo: i32) {
    PENDING.store(signo, Ordering::SeqCst);
}

/// The pending signal's number, if any, and forgets it.
pub fn take() -> Option<i32> {
    match PENDING.swap(0, Ordering::SeqCst) {
        0 => None,
        signo => Some(signo),
    }
}

/// Whether a signal asking this process to stop (SIGINT, SIGTERM, SIGHUP, SIGQUIT) arrived
/// while nobody was there to receive it: a runner setting up its pod's networks abandons
/// the plugin it runs (see [`cni::invoke::InterruptibleExec`]). The signal stays pending.
pub fn interrupted() -> bool {
    let signo = PENDING.load(Ordering::SeqCst);
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT].contains(&signo)
}
