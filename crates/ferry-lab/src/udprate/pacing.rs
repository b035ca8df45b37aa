//! Paced sending and the decisions of a sender pool's manager (after Syzov, Kachan, Siemens:
//! High-speed UDP Data Transmission with Multithreading and Automatic Resource Allocation),
//! without I/O: time is passed in, so tests drive them with a simulated clock.
//!
//! Each of N sender threads sends one datagram of MSS bytes every `T = MSS·8·N / R` (R the target
//! rate of the whole pool in bit/s). Two pacing modes:
//! - `CatchUp`: the next send is due at the previous *target* + T, so a thread delayed by the
//!   system sends back to back until it is on schedule again (the average rate is kept);
//! - `Steady`: the next send is due at the previous *send* + T, so the rate never exceeds R (a
//!   delay is lost, not made up). Lateness within the wake-up precision ([`steady_tolerance_ns`]:
//!   T/8, at most 2 µs) is timer jitter, not a delay: the schedule keeps its target then, or the
//!   jitter of every send would add up to a rate a few percent low.
//!
//! A thread keeps figures per reporting interval: time in its send loop and inside `send`,
//! positive lag (how far behind schedule its sends were) and negative lag (time spent waiting for
//! the schedule). The manager reads them every interval and decides: spawn a thread when the total
//! positive lag passes a noise threshold, stop one when the others have ample negative lag to take
//! its share, and report that the rate is not reachable when it has no CPU left to add a thread.

crate::choice! {
    /// How paced threads keep the rate.
    pub enum Pacing: "pacing" {
        /// Make up for delays: send faster after a stall until back on schedule.
        CatchUp = "catch-up",
        /// Never above the rate: a stall is lost time.
        Steady = "steady",
    }
}

/// The per-thread interval `T = MSS·8·N / R`, in nanoseconds (at least 1).
pub fn interval_ns(mss: usize, threads: usize, rate_bps: u64) -> u64 {
    if rate_bps == 0 {
        return u64::MAX;
    }
    ((mss as u128 * 8 * threads as u128 * 1_000_000_000) / rate_bps as u128)
        .clamp(1, u64::MAX as u128) as u64
}

/// How late a steady send may start and still keep the schedule (see the module docs).
pub fn steady_tolerance_ns(interval_ns: u64) -> u64 {
    (interval_ns / 8).min(2_000)
}

/// One sender thread's schedule.
#[derive(Debug, Clone)]
pub struct Pacer {
    mode: Pacing,
    interval_ns: u64,
    target_ns: Option<u64>,
    pub figures: Figures,
}

/// What a sender thread measured over a reporting interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    pub datagrams: u64,
    pub bytes: u64,
    /// Time in the send loop, and the part of it inside the send call.
    pub loop_ns: u64,
    pub send_ns: u64,
    /// Summed lateness of sends behind their target time.
    pub positive_lag_ns: u64,
    /// Summed time spent waiting for the next target.
    pub negative_lag_ns: u64,
    /// How far behind schedule the thread was at its latest send (catch-up mode: a backlog it
    /// has not made up yet).
    pub backlog_ns: u64,
}

impl Figures {
    pub fn add(&mut self, o: &Figures) {
        self.datagrams += o.datagrams;
        self.bytes += o.bytes;
        self.loop_ns += o.loop_ns;
        self.send_ns += o.send_ns;
        self.positive_lag_ns += o.positive_lag_ns;
        self.negative_lag_ns += o.negative_lag_ns;
        // The latest backlog counts, not a stall that was made up since.
        if o.datagrams > 0 {
            self.backlog_ns = o.backlog_ns;
        }
    }
}

impl Pacer {
    pub fn new(mode: Pacing, interval_ns: u64) -> Pacer {
        Pacer {
            mode,
            interval_ns,
            target_ns: None,
            figures: Figures::default(),
        }
    }

    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// A new rate or thread count: the next target moves by the difference at once.
    pub fn set_interval(&mut self, interval_ns: u64) {
        if let Some(t) = self.target_ns.as_mut() {
            *t = t
                .saturating_sub(self.interval_ns)
                .saturating_add(interval_ns);
        }
        self.interval_ns = interval_ns;
    }

    /// How long to wait at `now` before the next send (0: send now).
    pub fn wait_ns(&self, now: u64) -> u64 {
        self.target_ns.map_or(0, |t| t.saturating_sub(now))
    }

    /// Records a send that started at `start` and finished at `end`, waiting `waited` ns for its
    /// target before it, and schedules the next.
    pub fn sent(&mut self, start: u64, end: u64, waited: u64, bytes: usize) {
        let target = self.target_ns.unwrap_or(start);
        let late = start.saturating_sub(target);
        let jitter = self.mode == Pacing::Steady && late <= steady_tolerance_ns(self.interval_ns);
        self.figures.datagrams += 1;
        self.figures.bytes += bytes as u64;
        self.figures.send_ns += end.saturating_sub(start);
        self.figures.negative_lag_ns += waited;
        if !jitter {
            self.figures.positive_lag_ns += late;
        }
        self.figures.backlog_ns = late;
        self.target_ns = Some(match self.mode {
            Pacing::CatchUp => target.saturating_add(self.interval_ns),
            Pacing::Steady if jitter => target.saturating_add(self.interval_ns),
            Pacing::Steady => start.saturating_add(self.interval_ns),
        });
    }

    /// Hands over the figures of the interval that ended (and starts a new one).
    pub fn take_figures(&mut self) -> Figures {
        std::mem::take(&mut self.figures)
    }
}

/// The manager's settings.
#[derive(Debug, Clone)]
pub struct ManagerConfig {
    pub min_threads: usize,
    pub max_threads: usize,
    /// Decisions are taken once per interval (0.5 s by default, as in the study).
    pub interval_ns: u64,
    /// The pacing the threads use: it decides what "behind schedule" means.
    pub pacing: Pacing,
    /// Catch-up: a total backlog (behind schedule at the end of an interval) above this spawns a
    /// thread. Jitter of a few µs per send, or a stall already made up, must not (the study saw
    /// 3.5 ± 1.4 µs per send loop).
    pub spawn_threshold_ns: u64,
    /// Steady: lateness is never made up, so the summed positive lag is lost sending time; above
    /// this fraction of the interval per thread, the pool is behind.
    pub steady_threshold: f64,
    /// A thread stops when the remaining ones would be busy at most 1/`stop_margin` of the time
    /// carrying its share (1.5: at most two thirds busy), so a stop does not bring lag back.
    pub stop_margin: f64,
    /// Consecutive intervals behind schedule with no thread left to add before the rate is
    /// declared not reachable.
    pub unreachable_after: u32,
}

impl Default for ManagerConfig {
    fn default() -> ManagerConfig {
        ManagerConfig {
            min_threads: 1,
            max_threads: 1,
            interval_ns: 500_000_000,
            pacing: Pacing::CatchUp,
            spawn_threshold_ns: 2_000_000,
            steady_threshold: 0.02,
            stop_margin: 1.5,
            unreachable_after: 2,
        }
    }
}

/// Catch-up: mean lateness per send above this many send intervals means struggling.
const LATE_INTERVALS: u64 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Keep,
    Spawn,
    Stop,
    /// Behind schedule with every allowed thread running: the rate is not reachable here.
    Unreachable,
}

#[derive(Debug, Clone)]
pub struct Manager {
    pub cfg: ManagerConfig,
    behind: u32,
    /// The current per-thread send interval T; 0 when unknown.
    send_interval_ns: u64,
    /// Intervals decided so far (the first is warm-up: threads and sockets starting).
    intervals: u64,
    /// The requested rate; 0 when unknown (then no rate check).
    rate_bps: u64,
}

impl Manager {
    pub fn new(cfg: ManagerConfig) -> Manager {
        Manager {
            cfg,
            behind: 0,
            send_interval_ns: 0,
            intervals: 0,
            rate_bps: 0,
        }
    }

    /// Tells the manager the target (it changes at run time) and the threads' send interval T:
    /// under catch-up, sends that are on average several T late mean a thread keeps up only by
    /// bursting, and with a rate deficit that is a reason to add a thread.
    pub fn set_target(&mut self, rate_bps: u64, t_ns: u64) {
        self.rate_bps = rate_bps;
        self.send_interval_ns = t_ns;
    }

    /// Decides from one interval's figures of `threads` running senders.
    pub fn decide(&mut self, figures: &[Figures], threads: usize) -> Decision {
        self.intervals += 1;
        if self.intervals == 1 {
            // Warm-up: the first interval holds thread and socket start-up, not steady lag.
            return Decision::Keep;
        }
        let negative: u64 = figures.iter().map(|f| f.negative_lag_ns).sum();
        let bits = figures.iter().map(|f| f.bytes).sum::<u64>() as f64 * 8.0;
        let wanted = self.rate_bps as f64 * self.cfg.interval_ns as f64 / 1e9;
        // The share of the requested rate not sent in this interval (0 when unknown).
        let deficit = if self.rate_bps > 0 {
            (1.0 - bits / wanted).max(0.0)
        } else {
            0.0
        };
        let behind = match self.cfg.pacing {
            Pacing::CatchUp => {
                let backlog: u64 = figures.iter().map(|f| f.backlog_ns).sum();
                let sends: u64 = figures.iter().map(|f| f.datagrams).sum();
                let lateness: u64 = figures.iter().map(|f| f.positive_lag_ns).sum();
                let struggling = self.send_interval_ns > 0
                    && sends > 0
                    && lateness / sends > LATE_INTERVALS * self.send_interval_ns;
                backlog > self.cfg.spawn_threshold_ns || (struggling && deficit > 0.01)
            }
            Pacing::Steady => {
                let lost: u64 = figures.iter().map(|f| f.positive_lag_ns).sum();
                lost as f64
                    > self.cfg.steady_threshold
                        * self.cfg.interval_ns as f64
                        * threads.max(1) as f64
            }
        };
        if behind {
            if threads < self.cfg.max_threads {
                self.behind = 0;
                return Decision::Spawn;
            }
            self.behind += 1;
            return if self.behind >= self.cfg.unreachable_after {
                Decision::Unreachable
            } else {
                Decision::Keep
            };
        }
        self.behind = 0;
        // Each of N threads waited a fraction w of the interval, so the pool is busy N·(1 − w) thread
        // intervals; N − 1 threads would each be busy N·(1 − w)/(N − 1) of the time.
        if threads > self.cfg.min_threads && threads > 1 {
            let waiting =
                (negative as f64 / (threads as f64 * self.cfg.interval_ns as f64)).min(1.0);
            let busy_after = threads as f64 * (1.0 - waiting) / (threads - 1) as f64;
            if busy_after <= 1.0 / self.cfg.stop_margin {
                return Decision::Stop;
            }
        }
        Decision::Keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A simulated sender: each send costs `cost` ns, the system delays sends by `stall(i)`.
    fn run(pacer: &mut Pacer, sends: usize, cost: u64, stall: impl Fn(usize) -> u64) -> Vec<u64> {
        let mut now = 0;
        let mut starts = Vec::new();
        for i in 0..sends {
            let waited = pacer.wait_ns(now);
            now += waited + stall(i);
            starts.push(now);
            pacer.sent(now, now + cost, waited, 1472);
            now += cost;
        }
        starts
    }

    #[test]
    fn the_interval_is_mss_times_8_times_threads_over_rate() {
        // 1472 B at 1 Gbit/s with one thread: 11.776 µs; with 4 threads each waits 4 × longer.
        assert_eq!(interval_ns(1472, 1, 1_000_000_000), 11_776);
        assert_eq!(interval_ns(1472, 4, 1_000_000_000), 47_104);
        assert_eq!(interval_ns(8972, 2, 10_000_000_000), 14_355);
        assert_eq!(interval_ns(1472, 1, 0), u64::MAX);
    }

    #[test]
    fn absolute_schedule_does_not_drift() {
        let mut p = Pacer::new(Pacing::CatchUp, 10_000);
        let starts = run(&mut p, 1000, 1_000, |_| 0);
        assert_eq!(starts[999], 999 * 10_000);
        assert_eq!(p.figures.positive_lag_ns, 0);
        assert_eq!(p.figures.negative_lag_ns, 999 * 9_000);
    }

    #[test]
    fn catch_up_bursts_after_a_stall_and_steady_does_not() {
        let stall = |i: usize| if i == 10 { 50_000 } else { 0 };
        let mut c = Pacer::new(Pacing::CatchUp, 10_000);
        let sc = run(&mut c, 30, 1_000, stall);
        let mut s = Pacer::new(Pacing::Steady, 10_000);
        let ss = run(&mut s, 30, 1_000, stall);
        // Catch-up: back on the original schedule after the burst.
        assert_eq!(sc[29], 29 * 10_000);
        assert!(
            sc.windows(2).any(|w| w[1] - w[0] < 10_000),
            "catch-up sends back to back"
        );
        // Steady: never closer than the interval; the stall shifts everything after it.
        assert!(ss.windows(2).all(|w| w[1] - w[0] >= 10_000));
        assert_eq!(ss[29], 29 * 10_000 + 50_000);
        assert!(c.figures.positive_lag_ns > 0 && s.figures.positive_lag_ns == 50_000);
    }

    #[test]
    fn steady_keeps_its_schedule_through_wake_up_jitter() {
        // Every send starts 300 ns after its target (a timer's wake-up): the rate must not
        // drift low by 300 ns per interval, and no lag is counted.
        let mut p = Pacer::new(Pacing::Steady, 10_000);
        let starts = run(&mut p, 1000, 1_000, |_| 300);
        assert_eq!(starts[999], 999 * 10_000 + 600);
        assert_eq!(p.figures.positive_lag_ns, 0);
        // Just beyond the tolerance is a delay: lost, not made up.
        let tol = steady_tolerance_ns(10_000);
        let mut q = Pacer::new(Pacing::Steady, 10_000);
        let starts = run(&mut q, 3, 1_000, |i| if i == 1 { tol + 1 } else { 0 });
        assert_eq!(starts[2], 2 * 10_000 + tol + 1);
        assert_eq!(q.figures.positive_lag_ns, tol + 1);
    }

    #[test]
    fn a_rate_change_takes_effect_at_the_next_send() {
        let mut p = Pacer::new(Pacing::CatchUp, 10_000);
        run(&mut p, 10, 100, |_| 0);
        p.set_interval(20_000);
        let next = p.wait_ns(9 * 10_000 + 100);
        assert_eq!(next, 20_000 - 100);
    }

    /// A manager of at most `max_threads` senders, past its first (warm-up) interval.
    fn warmed_up_manager(max_threads: usize) -> Manager {
        let mut m = Manager::new(ManagerConfig {
            max_threads,
            ..ManagerConfig::default()
        });
        m.decide(&[], 1); // warm-up
        m
    }

    #[test]
    fn a_pool_behind_schedule_spawns_then_reports_unreachable_at_max() {
        let mut m = warmed_up_manager(2);
        let behind = Figures {
            backlog_ns: 10_000_000,
            datagrams: 1,
            ..Figures::default()
        };
        assert_eq!(m.decide(&[behind], 1), Decision::Spawn);
        assert_eq!(
            m.decide(&[behind, behind], 2),
            Decision::Keep,
            "one interval at max: wait"
        );
        assert_eq!(m.decide(&[behind, behind], 2), Decision::Unreachable);
    }

    #[test]
    fn jitter_below_the_threshold_spawns_nothing() {
        let mut m = warmed_up_manager(8);
        let jitter = Figures {
            positive_lag_ns: 1_500_000,
            negative_lag_ns: 100_000_000,
            ..Figures::default()
        };
        assert_eq!(m.decide(&[jitter], 1), Decision::Keep);
        // Catch-up keeping up only by bursting (50 µs late per send on a 10 µs interval) and
        // missing the rate: 40 000 sends of 1000 bytes in 0.5 s is 640 of 1000 Mbit/s.
        m.set_target(1_000_000_000, 10_000);
        let bursting = Figures {
            positive_lag_ns: 50_000 * 40_000,
            datagrams: 40_000,
            bytes: 40_000_000,
            backlog_ns: 1_000,
            ..Figures::default()
        };
        assert_eq!(m.decide(&[bursting], 1), Decision::Spawn);
        let calm = Figures {
            positive_lag_ns: 5_000 * 40_000,
            datagrams: 40_000,
            backlog_ns: 1_000,
            ..Figures::default()
        };
        assert_eq!(m.decide(&[calm], 2), Decision::Keep);
    }

    #[test]
    fn surplus_threads_stop_when_the_others_wait_enough() {
        let mut m = warmed_up_manager(8);
        let half = Figures {
            negative_lag_ns: 250_000_000,
            ..Figures::default()
        };
        let mostly_idle = Figures {
            negative_lag_ns: 400_000_000,
            ..Figures::default()
        };
        // Two threads each waiting half the time: one alone would be busy all the time. Keep.
        assert_eq!(m.decide(&[half, half], 2), Decision::Keep);
        // Two threads waiting 80 %: one alone is 40 % busy. Stop one.
        assert_eq!(m.decide(&[mostly_idle, mostly_idle], 2), Decision::Stop);
        // Four threads waiting half the time: three would be 67 % busy, at the margin. Stop.
        assert_eq!(m.decide(&[half; 4], 4), Decision::Stop);
        // Three threads waiting half the time: two would be 75 % busy. Keep.
        assert_eq!(m.decide(&[half; 3], 3), Decision::Keep);
        // Never below the minimum.
        assert_eq!(m.decide(&[mostly_idle], 1), Decision::Keep);
    }
}
