//! Ctrl-C and SIGTERM as a flag that long-running commands poll, so that they stop cleanly and
//! give their shared memory back.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_signal: libc::c_int) {
    // Relaxed: the flag carries no data; pollers only need to see it eventually.
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Routes SIGINT and SIGTERM to the flag instead of ending the process.
pub fn install() -> Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `sigaction` is plain data (integers, a mask and an optional function pointer);
        // all zeroes is "no flags, empty mask, no restorer".
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SAFETY: `action` is initialised and outlives the call; the handler only stores to an
        // atomic, which is async-signal-safe.
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

/// Whether Ctrl-C or SIGTERM arrived.
pub fn interrupted() -> bool {
    // Relaxed: see `on_signal`.
    INTERRUPTED.load(Ordering::Relaxed)
}

/// An error once Ctrl-C or SIGTERM arrived.
pub fn check() -> Result<()> {
    if interrupted() {
        return Err(Error::msg("interrupted (Ctrl-C or SIGTERM)"));
    }
    Ok(())
}
