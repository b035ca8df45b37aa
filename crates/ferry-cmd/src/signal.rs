//! Ctrl-C (SIGINT) and SIGTERM as a flag that long-running commands poll, so that they stop
//! promptly and cleanly: they close their topics (giving their shared memory back), kill and
//! reap the processes they started, and `main` exits with 128 + the signal's number (130 after
//! SIGINT, 143 after SIGTERM), the status a shell reports for a process that a signal ended.
//!
//! The rule for commands: no wait lasts longer than [`POLL`] without a look at the flag (bounded
//! waits such as `Subscriber::recv_timeout`, [`sleep`] instead of `std::thread::sleep`, child
//! processes polled with `try_wait`). Blocking system calls are not restarted after the signal
//! (no `SA_RESTART`), but the standard library retries most of them, so the flag is what counts.
//!
//! `main` installs the handler for `pub`, `echo` and `lab`; the short commands (`topics`,
//! `stats`, `clean`) and the lab's peer processes keep the default action and end at once. The
//! handler serves one signal: a second Ctrl-C or SIGTERM ends the process at once, as the
//! signal's default action does — unless it came within [`SAME_SIGNAL`] of the first, which
//! makes it a copy of the first: `timeout`, and supervisors like it, send their signal to the
//! process and then to its whole process group, so the process gets it twice within
//! microseconds, and the clean stop must not be cut short by it.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The first signal that arrived, 0 for none.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// When the first signal arrived (CLOCK_MONOTONIC, ns); 0 until it is stored.
static FIRST_AT_NS: AtomicU64 = AtomicU64::new(0);

/// A signal this soon after the first is a copy of it (sent to the process and to its group),
/// not a second Ctrl-C: a person's second press comes later than this.
pub const SAME_SIGNAL: Duration = Duration::from_millis(200);

/// The longest a command waits before it looks at the flag again.
pub const POLL: Duration = Duration::from_millis(100);

/// The message of the error that `check` returns.
pub use crate::error::INTERRUPTED;

/// CLOCK_MONOTONIC in ns (`clock_gettime` is async-signal-safe); 0 if it cannot be read.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to write.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

extern "C" fn on_signal(signal: libc::c_int) {
    let now = monotonic_ns();
    // Relaxed: the flag carries no data; pollers only need to see it eventually. The first
    // signal is the one reported.
    if SIGNAL
        .compare_exchange(0, signal, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
    {
        // Relaxed: read only by this handler; one that finds it not yet stored takes its signal
        // for a copy of the first.
        FIRST_AT_NS.store(now.max(1), Ordering::Relaxed);
        return;
    }
    let first = FIRST_AT_NS.load(Ordering::Relaxed);
    if first == 0 || now.saturating_sub(first) < SAME_SIGNAL.as_nanos() as u64 {
        return;
    }
    // A second signal: the process ends now, by the signal's default action (so that whoever
    // waits for it sees it ended by that signal).
    // SAFETY: `signal` and `raise` are async-signal-safe; the signal is blocked while its
    // handler runs, and the raised one is delivered, with its default action, on return.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

/// Routes SIGINT and SIGTERM to the flag instead of ending the process; a second one, later
/// than [`SAME_SIGNAL`] after the first, ends the process at once.
pub fn install() -> Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `sigaction` is plain data (integers, a mask and an optional function pointer);
        // all zeroes is "no flags, empty mask, no restorer".
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // No SA_RESETHAND: the handler tells a copy of the first signal from a second one.
        action.sa_flags = 0;
        // SAFETY: `action` is initialised and outlives the call; the handler only does an atomic
        // compare-and-swap, which is async-signal-safe.
        let rc = unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(Error::msg(format!(
                "cannot install a signal handler: {}",
                std::io::Error::last_os_error()
            )));
        }
    }
    Ok(())
}

/// The signal that arrived (SIGINT or SIGTERM), if one did.
pub fn received() -> Option<libc::c_int> {
    // Relaxed: see `on_signal`.
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        s => Some(s),
    }
}

/// Whether Ctrl-C or SIGTERM arrived.
pub fn interrupted() -> bool {
    received().is_some()
}

/// An error once Ctrl-C or SIGTERM arrived.
pub fn check() -> Result<()> {
    if interrupted() {
        return Err(Error::msg(INTERRUPTED));
    }
    Ok(())
}

/// Sleeps for `duration`, looking at the flag every [`POLL`]; an error as soon as Ctrl-C or
/// SIGTERM arrived.
pub fn sleep(duration: Duration) -> Result<()> {
    let end = Instant::now() + duration;
    loop {
        check()?;
        let now = Instant::now();
        if now >= end {
            return Ok(());
        }
        std::thread::sleep((end - now).min(POLL));
    }
}

/// The signal's name, for the user.
pub fn name(signal: libc::c_int) -> String {
    match signal {
        libc::SIGINT => "SIGINT (Ctrl-C)".to_owned(),
        libc::SIGTERM => "SIGTERM".to_owned(),
        other => format!("signal {other}"),
    }
}

/// The exit status after `signal`: 128 + its number, as shells report a process it ended.
pub fn exit_status(signal: libc::c_int) -> u8 {
    u8::try_from(128 + signal).unwrap_or(u8::MAX)
}

#[cfg(test)]
mod tests {
    #[test]
    fn exit_statuses_follow_the_shell() {
        assert_eq!(super::exit_status(libc::SIGINT), 130);
        assert_eq!(super::exit_status(libc::SIGTERM), 143);
    }
}
