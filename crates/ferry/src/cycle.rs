//! The cyclic runner of a soft-realtime app (the Dominion model): a closure runs once per period
//! on absolute deadlines, and every late cycle is accounted for.
//!
//! ```no_run
//! use std::ops::ControlFlow;
//! use std::time::Duration;
//! let stats = ferry::Cycle::new(Duration::from_millis(10)).run(|tick| {
//!     // read inputs, compute, publish ...
//!     if tick.index == 99 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
//! });
//! println!("{} cycles, {} late, {} overloads", stats.cycles, stats.misses, stats.overloads);
//! ```
//!
//! Rules, all in the pure [`Schedule`] (driven by a clock the caller passes in, so tests need no
//! sleeps); [`Cycle`] is a thin runner around it that sleeps and spins:
//!
//! - **Absolute deadlines.** Cycle `k` is due at `start + k·period`; a late cycle does not move
//!   the ones after it, so the schedule never drifts. The runner sleeps until `spin` before the
//!   deadline and busy-waits the rest (the sleep's wake-up is late by tens of microseconds).
//! - **Deadline miss.** A cycle that begins more than `tolerance` after its deadline (default:
//!   10 % of the period). A cycle that ran too long shows as a miss of the cycle after it.
//! - **Catch-up.** Cycles that fell behind run back to back, without sleeping, until the app is
//!   on time again: no cycle is dropped silently.
//! - **Overload (the study's timer rule).** Dominion's timer thread raises a counting semaphore
//!   once per period and the app lowers it once per cycle it runs, so its value is the backlog of
//!   cycles due but not yet run: 1 for an app on time, growing by one per period while the app
//!   is behind. When it passes 100 (`> 100`, Algorithm 2 of the study) the timer reports an
//!   overload and resets it to 10: the app gives up the other 90 due cycles (counted in
//!   `CycleStats::skipped`) and goes on with the newest 10. A backlog that keeps growing raises
//!   one overload per 91 further periods, as the timer would. We read "increased after each
//!   cycle" as "by the timer, once per period" and not "once per late cycle": an app that is
//!   late once by a few microseconds every cycle has a backlog of 1 and is not overloaded, while
//!   an app stalled for 101 periods is, whether or not its single late cycle counted as a miss.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

/// The backlog above which the timer reports an overload (the study: `semaphore_count > 100`).
pub const OVERLOAD_LIMIT: u64 = 100;
/// The backlog the timer resets to after an overload.
pub const OVERLOAD_RESET: u64 = 10;

/// What a cycle knows about its own timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tick {
    /// The cycle's number: its deadline is `start + index·period` (skipped cycles keep their
    /// numbers, so `index` can jump after an overload).
    pub index: u64,
    /// How long after its deadline the cycle began.
    pub lateness: Duration,
    /// It began later than the tolerance allows.
    pub missed: bool,
    /// Overload events raised just before this cycle (usually 0 or 1).
    pub overloads: u64,
    /// Cycles due before this one that were given up because of those overloads.
    pub skipped: u64,
    /// The backlog (the timer's semaphore) when this cycle began, this cycle included.
    pub backlog: u64,
}

/// Counts of a cyclic run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CycleStats {
    /// Cycles run.
    pub cycles: u64,
    /// Cycles that began later than the tolerance allows.
    pub misses: u64,
    /// Overload events (the backlog passed 100 and was reset to 10).
    pub overloads: u64,
    /// Cycles given up at overloads.
    pub skipped: u64,
    /// The latest start of a cycle after its deadline.
    pub max_lateness_ns: u64,
    /// Sum of the lateness of all cycles (for the mean).
    pub total_lateness_ns: u64,
    /// The largest backlog seen when a cycle began (1 when always on time).
    pub max_backlog: u64,
    /// The longest a cycle's closure ran.
    pub max_work_ns: u64,
    /// Time spent in the closures, all cycles together.
    pub total_work_ns: u64,
}

impl CycleStats {
    /// Mean lateness of a cycle's start, in nanoseconds.
    pub fn mean_lateness_ns(&self) -> f64 {
        if self.cycles == 0 {
            0.0
        } else {
            self.total_lateness_ns as f64 / self.cycles as f64
        }
    }
}

/// The decisions of a cyclic runner, with time passed in as nanoseconds since the schedule's
/// start (deadline of cycle 0). No clock, no sleeping: a test drives it with made-up times.
#[derive(Debug, Clone)]
pub struct Schedule {
    period_ns: u64,
    tolerance_ns: u64,
    /// The next cycle to run.
    next: u64,
    /// When the running cycle began (for its work time).
    began_ns: Option<u64>,
    stats: CycleStats,
}

impl Schedule {
    /// A schedule with cycle 0 due at time 0. `period` must not be zero.
    pub fn new(period: Duration, tolerance: Duration) -> Schedule {
        let period_ns = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX).max(1);
        Schedule {
            period_ns,
            tolerance_ns: u64::try_from(tolerance.as_nanos()).unwrap_or(u64::MAX),
            next: 0,
            began_ns: None,
            stats: CycleStats::default(),
        }
    }

    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    /// The deadline of the next cycle: `next·period` (absolute, never accumulated).
    pub fn next_deadline_ns(&self) -> u64 {
        self.next.saturating_mul(self.period_ns)
    }

    /// Begins the next cycle at `now_ns` (at or after its deadline, normally): applies the
    /// overload rule, then accounts for the cycle's lateness.
    pub fn begin(&mut self, now_ns: u64) -> Tick {
        // Deadlines passed so far (cycle 0's at time 0 included): the timer's posts.
        let posted = (now_ns / self.period_ns).saturating_add(1);
        let mut backlog = posted.saturating_sub(self.next).max(1);
        let (mut overloads, mut skipped) = (0, 0);
        if backlog > OVERLOAD_LIMIT {
            // The counter climbed past the limit, was reset to the reset value and climbed again,
            // once every `LIMIT + 1 - RESET` periods.
            let climb = OVERLOAD_LIMIT + 1 - OVERLOAD_RESET;
            let over = backlog - (OVERLOAD_LIMIT + 1);
            overloads = 1 + over / climb;
            let kept = OVERLOAD_RESET + over % climb;
            skipped = backlog - kept;
            self.next = self.next.saturating_add(skipped);
            backlog = kept;
        }
        let deadline = self.next_deadline_ns();
        let lateness = now_ns.saturating_sub(deadline);
        let missed = lateness > self.tolerance_ns;
        let tick = Tick {
            index: self.next,
            lateness: Duration::from_nanos(lateness),
            missed,
            overloads,
            skipped,
            backlog,
        };
        let s = &mut self.stats;
        s.cycles += 1;
        s.misses += missed as u64;
        s.overloads += overloads;
        s.skipped += skipped;
        s.max_lateness_ns = s.max_lateness_ns.max(lateness);
        s.total_lateness_ns = s.total_lateness_ns.saturating_add(lateness);
        s.max_backlog = s.max_backlog.max(backlog);
        self.next = self.next.saturating_add(1);
        self.began_ns = Some(now_ns);
        tick
    }

    /// Ends the running cycle at `now_ns` (for the work-time counts; optional).
    pub fn end(&mut self, now_ns: u64) {
        if let Some(began) = self.began_ns.take() {
            let work = now_ns.saturating_sub(began);
            self.stats.max_work_ns = self.stats.max_work_ns.max(work);
            self.stats.total_work_ns = self.stats.total_work_ns.saturating_add(work);
        }
    }

    pub fn stats(&self) -> CycleStats {
        self.stats
    }
}

/// Runs a closure once per period (default 10 ms, as Dominion's run function).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cycle {
    period: Duration,
    tolerance: Option<Duration>,
    spin: Duration,
}

impl Default for Cycle {
    fn default() -> Cycle {
        Cycle::new(Duration::from_millis(10))
    }
}

impl Cycle {
    /// The default spin before a deadline.
    pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

    /// A runner with this period (a zero period is taken as 1 ns), a tolerance of 10 % of the
    /// period and 50 µs of spinning before each deadline.
    pub fn new(period: Duration) -> Cycle {
        Cycle {
            period: period.max(Duration::from_nanos(1)),
            tolerance: None,
            spin: Cycle::DEFAULT_SPIN,
        }
    }

    /// How late a cycle may begin before it counts as a deadline miss.
    pub fn tolerance(mut self, t: Duration) -> Cycle {
        self.tolerance = Some(t);
        self
    }

    /// How long before each deadline the runner stops sleeping and busy-waits (0: sleep only;
    /// cheaper in CPU, later by the kernel's wake-up delay).
    pub fn spin(mut self, t: Duration) -> Cycle {
        self.spin = t;
        self
    }

    pub fn period(&self) -> Duration {
        self.period
    }

    pub fn tolerance_value(&self) -> Duration {
        self.tolerance.unwrap_or(self.period / 10)
    }

    pub fn spin_value(&self) -> Duration {
        self.spin
    }

    /// A fresh schedule with these settings.
    pub fn schedule(&self) -> Schedule {
        Schedule::new(self.period, self.tolerance_value())
    }

    /// Runs `f` once per period, the first time at once, until it returns `Break`. Returns the
    /// counts of the run.
    pub fn run(&self, mut f: impl FnMut(&Tick) -> ControlFlow<()>) -> CycleStats {
        let mut schedule = self.schedule();
        let start = Instant::now();
        let ns = |start: Instant| u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        loop {
            wait_until(start, schedule.next_deadline_ns(), self.spin);
            let tick = schedule.begin(ns(start));
            let flow = f(&tick);
            schedule.end(ns(start));
            if flow.is_break() {
                return schedule.stats();
            }
        }
    }

    /// Runs `f` for `cycles` cycles (fewer if it returns `Break`).
    pub fn run_for(&self, cycles: u64, mut f: impl FnMut(&Tick) -> ControlFlow<()>) -> CycleStats {
        if cycles == 0 {
            return CycleStats::default();
        }
        let mut done = 0;
        self.run(|tick| {
            done += 1;
            let flow = f(tick);
            if done >= cycles {
                ControlFlow::Break(())
            } else {
                flow
            }
        })
    }
}

/// Sleeps until `spin` before `start + deadline_ns`, then spins until it; returns at once when the
/// deadline has passed.
fn wait_until(start: Instant, deadline_ns: u64, spin: Duration) {
    let deadline = start + Duration::from_nanos(deadline_ns);
    let now = Instant::now();
    if now >= deadline {
        return;
    }
    let left = deadline - now;
    if left > spin {
        std::thread::sleep(left - spin);
    }
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn sched() -> Schedule {
        Schedule::new(Duration::from_millis(1), Duration::from_micros(100))
    }

    /// A clock at its end and the shortest period: the counts saturate, nothing overflows.
    #[test]
    fn the_end_of_the_clock_saturates() {
        let mut s = Schedule::new(Duration::ZERO, Duration::ZERO);
        let mut last = s.begin(u64::MAX - 1).index;
        // Cycle by cycle up to the last index there is, and past it.
        for _ in 0..64 {
            let tick = s.begin(u64::MAX);
            assert!(tick.index >= last, "{tick:?} after index {last}");
            last = tick.index;
        }
        assert_eq!(last, u64::MAX);
        assert_eq!(s.next_deadline_ns(), u64::MAX);
    }

    #[test]
    fn deadlines_are_absolute_and_do_not_drift() {
        let mut s = sched();
        // Every cycle begins 30 µs late (within tolerance) and works 200 µs: the deadlines stay
        // on the k·period grid; nothing accumulates.
        for k in 0..10_000u64 {
            assert_eq!(s.next_deadline_ns(), k * MS);
            let t = s.begin(k * MS + 30_000);
            assert_eq!(t.index, k);
            assert!(!t.missed);
            assert_eq!(t.backlog, 1);
            s.end(k * MS + 230_000);
        }
        let st = s.stats();
        assert_eq!(
            (st.cycles, st.misses, st.overloads, st.skipped),
            (10_000, 0, 0, 0)
        );
        assert_eq!(st.max_lateness_ns, 30_000);
        assert_eq!(st.max_work_ns, 200_000);
        assert_eq!(s.next_deadline_ns(), 10_000 * MS);
    }

    #[test]
    fn a_late_cycle_is_a_miss_and_the_backlog_catches_up() {
        let mut s = sched();
        s.begin(0);
        // Cycle 1 begins 150 µs late: a miss, beyond the 100 µs tolerance; 100 µs is not.
        assert!(s.begin(MS + 150_000).missed);
        assert!(!s.begin(2 * MS + 100_000).missed);
        // A stall of 5.5 periods: cycle 3 begins at 8.5 ms; cycles 3..=8 are due (backlog 6)
        // and run back to back; each is late, so each is a miss, until the app is on time.
        let mut now = 8 * MS + 500_000;
        let t = s.begin(now);
        assert_eq!((t.index, t.backlog, t.missed), (3, 6, true));
        assert_eq!(t.lateness, Duration::from_micros(5_500));
        for k in 4..=8 {
            now += 10_000;
            let t = s.begin(now);
            assert_eq!(t.index, k);
            assert!(t.missed);
        }
        assert_eq!(s.next_deadline_ns(), 9 * MS);
        assert!(!s.begin(9 * MS + 5_000).missed);
        let st = s.stats();
        assert_eq!(
            (st.misses, st.overloads, st.skipped, st.max_backlog),
            (7, 0, 0, 6)
        );
        assert_eq!(st.max_lateness_ns, 5_500_000);
    }

    #[test]
    fn overload_when_the_backlog_passes_100_then_reset_to_10() {
        let mut s = sched();
        s.begin(0);
        // Cycle 1 begins when 101 deadlines have passed since it was due: backlog 100 is not an
        // overload yet.
        let t = s.begin(100 * MS);
        assert_eq!((t.index, t.backlog, t.overloads), (1, 100, 0));
        let mut s = sched();
        s.begin(0);
        // One more period: backlog 101 > 100: one overload, reset to 10: cycles 1..=91 are
        // given up, cycle 92 runs (deadline 92 ms, 9 periods late), 9 more are due.
        let t = s.begin(101 * MS);
        assert_eq!(
            (t.overloads, t.skipped, t.backlog, t.index),
            (1, 91, 10, 92)
        );
        assert!(t.missed);
        assert_eq!(t.lateness, Duration::from_millis(9));
        // Catching up: 93..=101 run back to back, and the backlog is 1 again.
        for k in 93..=101 {
            let t = s.begin(101 * MS + 1_000);
            assert_eq!((t.index, t.overloads), (k, 0));
        }
        assert_eq!(s.begin(102 * MS).backlog, 1);
        let st = s.stats();
        assert_eq!((st.overloads, st.skipped, st.max_backlog), (1, 91, 10));
    }

    #[test]
    fn a_long_stall_raises_one_overload_per_91_periods() {
        let mut s = sched();
        s.begin(0);
        // Backlog 101 + 91 = 192: two overloads (at 101 and again at 101 after the reset).
        let t = s.begin(192 * MS);
        assert_eq!((t.overloads, t.backlog), (2, 10));
        assert_eq!(t.skipped, 182);
        let mut s = sched();
        s.begin(0);
        let t = s.begin(191 * MS);
        assert_eq!((t.overloads, t.backlog), (1, 100));
    }

    #[test]
    fn early_begin_is_not_late() {
        let mut s = sched();
        let t = s.begin(0);
        assert_eq!(
            (t.lateness, t.missed, t.backlog),
            (Duration::ZERO, false, 1)
        );
        // A cycle begun before its deadline (a runner that woke early) counts as on time.
        let t = s.begin(MS - 1);
        assert_eq!((t.index, t.backlog, t.missed), (1, 1, false));
    }

    #[test]
    fn runner_counts_cycles() {
        let stats = Cycle::new(Duration::from_millis(1)).run_for(5, |_| ControlFlow::Continue(()));
        assert_eq!(stats.cycles, 5);
        let mut n = 0;
        let stats = Cycle::new(Duration::from_micros(100))
            .spin(Duration::ZERO)
            .run(|t| {
                n += 1;
                if t.index >= 2 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            });
        assert_eq!((stats.cycles, n), (3, 3));
        assert_eq!(Cycle::default().period(), Duration::from_millis(10));
        assert_eq!(Cycle::default().tolerance_value(), Duration::from_millis(1));
    }
}
