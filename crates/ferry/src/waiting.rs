//! What an endpoint gives a wait set (`waitset.rs`) before the thread sleeps, kept apart from
//! the wait set itself so that the endpoints (node, services, both transports) depend on this
//! and the wait set on them, not each on the other.

use std::os::fd::RawFd;
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

/// How early an item's own timer (a publisher's liveness, a UDP session's timers) may run when
/// the wait set is awake anyway: the items of one set come to share their wake-ups.
pub(crate) const SLACK: Duration = Duration::from_millis(10);

/// What one sleep waits for.
#[derive(Default)]
pub struct Sleep {
    /// Futex words and the values read from them.
    pub(crate) bells: Vec<(*const AtomicU32, u32)>,
    /// Sockets, and the item each belongs to.
    pub(crate) fds: Vec<RawFd>,
    pub(crate) owners: Vec<usize>,
    /// The earliest time an item must be looked at whatever happens.
    pub(crate) until: Option<Instant>,
}

impl Sleep {
    /// Forgets the words and sockets of the last sleep; the next one ends at `until` at the
    /// latest (`None`: when something happens).
    pub(crate) fn start(&mut self, until: Option<Instant>) {
        self.bells.clear();
        self.fds.clear();
        self.owners.clear();
        self.until = until;
    }

    pub(crate) fn due(&mut self, at: Instant) {
        self.until = Some(self.until.map_or(at, |u| u.min(at)));
    }
}
