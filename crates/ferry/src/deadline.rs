//! `Qos::deadline`: the periods that passed without what was due (a message for a subscriber, a
//! send for a publisher), counted.

use std::time::{Duration, Instant};

/// The shortest and longest deadline a QoS may set.
pub(crate) const MIN_DEADLINE: Duration = Duration::from_millis(1);
pub(crate) const MAX_DEADLINE: Duration = Duration::from_secs(3600);

/// Counts the periods that ended without the awaited event.
#[derive(Debug, Clone)]
pub(crate) struct Deadline {
    period: Duration,
    /// When the current period ends.
    next: Instant,
    missed: u64,
}

impl Deadline {
    pub(crate) fn new(period: Duration, now: Instant) -> Deadline {
        Deadline {
            period,
            next: now + period,
            missed: 0,
        }
    }

    /// The event happened at `now`: a new period starts.
    pub(crate) fn met(&mut self, now: Instant) {
        self.next = now + self.period;
    }

    /// Counts the periods that ended by `now` without the event; returns how many more there
    /// are since the last call.
    pub(crate) fn check(&mut self, now: Instant) -> u64 {
        if now < self.next {
            return 0;
        }
        let period = self.period.as_nanos().max(1);
        let over = now.duration_since(self.next).as_nanos();
        let n = (over / period + 1).min(u64::MAX as u128) as u64;
        // The periods counted end at `next + (n - 1) × period`; the next one after that.
        let skip = Duration::from_nanos((n as u128 * period).min(u64::MAX as u128) as u64);
        self.next = self.next.checked_add(skip).unwrap_or(now + self.period);
        self.missed = self.missed.saturating_add(n);
        n
    }

    /// When the current period ends.
    pub(crate) fn next(&self) -> Instant {
        self.next
    }

    /// Periods missed so far.
    pub(crate) fn missed(&self) -> u64 {
        self.missed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_period_without_the_event_counts_once() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut d = Deadline::new(ms(10), t0);
        assert_eq!(d.check(t0 + ms(9)), 0);
        d.met(t0 + ms(9));
        // Next period ends at 19 ms: at 19 one period is missed, at 45 two more (29, 39).
        assert_eq!(d.check(t0 + ms(19)), 1);
        assert_eq!(d.check(t0 + ms(20)), 0);
        assert_eq!(d.check(t0 + ms(45)), 2);
        assert_eq!(d.missed(), 3);
        assert_eq!(d.next(), t0 + ms(49));
        d.met(t0 + ms(46));
        assert_eq!(d.check(t0 + ms(55)), 0);
        assert_eq!(d.missed(), 3);
    }
}
