//! Signal forwarding along the chain runner → stage → pod init → app (every app, in a pod
//! of several).
//!
//! Each process in the chain installs [`install`]'s handler for [`FORWARDED`]. The handler
//! sends the signal on to the processes set with [`forward_to`] or [`forward_to_all`]; a
//! signal that arrives before
//! there is anyone to forward to is remembered ([`take_pending`]) and sent when the target
//! is set (the runner checks it before starting the app, so Ctrl-C during network setup
//! aborts the start). The pod runs in a session of its own, away from the caller's terminal
//! (see [`super::stdio`]), so what that terminal's keys generate (Ctrl-C: SIGINT with
//! `si_code == SI_KERNEL`) reaches only the runner, which passes it on like any other.
//! Window size changes (SIGWINCH) are not passed on: when the pod has a terminal of its own
//! the runner copies the new size to it ([`set_resize`]), and the kernel signals the pod's
//! foreground process group itself.
//!
//! Stopping: the runner passes a SIGINT sent to it (by `kill(2)`: an orchestrator's stop,
//! Nomad's, systemd's `KillSignal=SIGINT`) on as SIGTERM, as rkt 1.30's stage1 stopped its
//! apps ([`interrupt_stops_pod`]); one from its terminal (Ctrl-C) stays SIGINT. The pod's
//! init, on SIGTERM, passes it on and, if the apps have not all ended [`STOP_GRACE`] later,
//! kills them ([`kill_after_stop`]); the pod then ends as when they exit.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

use crate::pending_signal;
// Whether a stopping signal is pending; kept below networking, which asks it too.
pub use crate::pending_signal::interrupted;

/// The signals passed on to the app.
pub const FORWARDED: [Signal; 7] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

/// At most this many processes are forwarded to: the apps of a pod.
pub const MAX_TARGETS: usize = 64;

/// How long the apps have between the SIGTERM that stops a pod and SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// Set in a runner: a SIGINT not from a terminal is passed on as SIGTERM.
static INTERRUPT_STOPS: AtomicBool = AtomicBool::new(false);

/// Set in a pod's init: seconds from the first SIGTERM to SIGKILL of the targets; 0: never.
static KILL_AFTER: AtomicU32 = AtomicU32::new(0);
/// Whether the first SIGTERM came (the alarm is set).
static STOPPING: AtomicBool = AtomicBool::new(false);

/// The processes forwarded to; 0 is a free slot. Fixed, so that the handler needs no lock.
static TARGETS: [AtomicI32; MAX_TARGETS] = [const { AtomicI32::new(0) }; MAX_TARGETS];

/// The terminal whose size the pod's terminal follows, and the pod's terminal's controlling
/// end; -1: none ([`set_resize`]).
static RESIZE_FROM: AtomicI32 = AtomicI32::new(-1);
static RESIZE_TO: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(signo: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    if signo == libc::SIGWINCH {
        // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
        let code = unsafe { (*info).si_code };
        let (from, to) = (
            RESIZE_FROM.load(Ordering::SeqCst),
            RESIZE_TO.load(Ordering::SeqCst),
        );
        if from >= 0 && to >= 0 {
            resize(from, to);
        }
        // A terminal's own resize has no meaning for a pod without one; one sent by
        // kill(2) is passed on as any other signal.
        if code == libc::SI_KERNEL || to >= 0 {
            return;
        }
    }
    // SAFETY: as above.
    let from_terminal = unsafe { (*info).si_code } == libc::SI_KERNEL;
    let outgoing = match signo {
        libc::SIGINT if !from_terminal && INTERRUPT_STOPS.load(Ordering::SeqCst) => libc::SIGTERM,
        other => other,
    };
    let after = KILL_AFTER.load(Ordering::SeqCst);
    if outgoing == libc::SIGTERM && after > 0 && !STOPPING.swap(true, Ordering::SeqCst) {
        // SAFETY: alarm(2) is async-signal-safe and has no memory-safety preconditions.
        unsafe { libc::alarm(after) };
    }
    let mut forwarded = false;
    for slot in &TARGETS {
        let target = slot.load(Ordering::SeqCst);
        if target > 0 {
            forwarded = true;
            // SAFETY: kill(2) is async-signal-safe and has no memory-safety preconditions.
            unsafe { libc::kill(target, outgoing) };
        }
    }
    if !forwarded {
        pending_signal::set(signo);
    }
}

/// SIGALRM in a pod's init, [`STOP_GRACE`] after the SIGTERM that stops the pod: SIGKILL to
/// the apps still running (the init then ends the pod as when they exit).
extern "C" fn on_stop_grace_over(_: libc::c_int) {
    for slot in &TARGETS {
        let target = slot.load(Ordering::SeqCst);
        if target > 0 {
            // SAFETY: kill(2) is async-signal-safe and has no memory-safety preconditions.
            unsafe { libc::kill(target, libc::SIGKILL) };
        }
    }
}

/// In a runner: from now on a SIGINT sent to it by a process (not its terminal's Ctrl-C) is
/// passed on as SIGTERM, which stops the pod (see the module's docs).
pub fn interrupt_stops_pod() {
    INTERRUPT_STOPS.store(true, Ordering::SeqCst);
}

/// In a pod's init (PID 1 of the pod's PID namespace, else nothing is done): from the first
/// SIGTERM on, the apps it forwards to have `grace` (whole seconds, at least 1) to end, then
/// get SIGKILL.
pub fn kill_after_stop(grace: Duration) -> Result<(), Errno> {
    if std::process::id() != 1 {
        return Ok(());
    }
    let action = SigAction::new(
        SigHandler::Handler(on_stop_grace_over),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: the handler only reads atomics and calls kill(2), both async-signal-safe.
    unsafe { sigaction(Signal::SIGALRM, &action) }?;
    let secs = u32::try_from(grace.as_secs()).unwrap_or(u32::MAX).max(1);
    KILL_AFTER.store(secs, Ordering::SeqCst);
    Ok(())
}

/// Copies terminal `from`'s window size to terminal `to` (async-signal-safe).
fn resize(from: i32, to: i32) {
    // SAFETY: both ioctls read or write one winsize on the stack.
    unsafe {
        let mut size: libc::winsize = std::mem::zeroed();
        if libc::ioctl(from, libc::TIOCGWINSZ, &mut size) == 0 {
            libc::ioctl(to, libc::TIOCSWINSZ, &size);
        }
    }
}

/// From now on, window size changes of terminal `from` (the runner's) are copied to `to`
/// (the controlling end of the pod's terminal) and not forwarded; `-1, -1` stops that.
pub fn set_resize(from: i32, to: i32) {
    RESIZE_TO.store(to, Ordering::SeqCst);
    RESIZE_FROM.store(from, Ordering::SeqCst);
}

/// Installs the forwarding handler for every signal in [`FORWARDED`].
pub fn install() -> Result<(), Errno> {
    let action = SigAction::new(
        SigHandler::SigAction(on_signal),
        SaFlags::SA_SIGINFO | SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in FORWARDED {
        // SAFETY: the handler only reads siginfo, atomics and calls kill(2), all
        // async-signal-safe.
        unsafe { sigaction(signal, &action) }?;
    }
    Ok(())
}

/// Restores the default disposition of every forwarded signal and of SIGPIPE (which the Rust
/// runtime ignores), and unblocks all signals: for a child about to exec the app.
pub fn reset_for_exec() {
    let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    for signal in FORWARDED.into_iter().chain([Signal::SIGPIPE]) {
        // SAFETY: installing the default disposition has no preconditions.
        let _ = unsafe { sigaction(signal, &default) };
    }
    let _ = SigSet::all().thread_unblock();
}

/// Blocks the forwarded signals in the calling thread until [`unblock`]: around a `fork`,
/// so that one arriving while the child cannot yet be forwarded to stays pending in the
/// parent (delivered, and forwarded, once unblocked) or, in the child, is taken with the
/// default action once [`reset_for_exec`] unblocks it — never stored in the child's copy
/// of the handler's state, where nobody would act on it.
pub fn block() {
    let _ = forwarded_set().thread_block();
}

/// Unblocks what [`block`] blocked.
pub fn unblock() {
    let _ = forwarded_set().thread_unblock();
}

fn forwarded_set() -> SigSet {
    let mut set = SigSet::empty();
    for signal in FORWARDED {
        set.add(signal);
    }
    set
}

/// From now on, forwarded signals go to `pid`; one that arrived earlier is sent now.
pub fn forward_to(pid: i32) {
    forward_to_all(&[pid]);
}

/// From now on, forwarded signals go to each of `pids` (at most [`MAX_TARGETS`]; more are
/// not signalled); one that arrived earlier is sent to each now.
pub fn forward_to_all(pids: &[i32]) {
    for (slot, pid) in TARGETS.iter().zip(pids.iter().chain(std::iter::repeat(&0))) {
        slot.store(*pid, Ordering::SeqCst);
    }
    if let Some(pending) = pending_signal::take() {
        let pending = match pending {
            libc::SIGINT if INTERRUPT_STOPS.load(Ordering::SeqCst) => libc::SIGTERM,
            other => other,
        };
        for pid in pids {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe { libc::kill(*pid, pending) };
        }
    }
}

/// Stops forwarding to `pid`, which ended (its PID may be reused).
pub fn forget(pid: i32) {
    for slot in &TARGETS {
        let _ = slot.compare_exchange(pid, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// Stops forwarding (the targets are gone); later signals are remembered as pending.
pub fn stop_forwarding() {
    for slot in &TARGETS {
        slot.store(0, Ordering::SeqCst);
    }
}

/// A signal that arrived while nobody was there to receive it, if any (and forgets it).
pub fn take_pending() -> Option<Signal> {
    pending_signal::take().and_then(|signo| Signal::try_from(signo).ok())
}
