//! Rate and bandwidth over a window of recent messages, with the conventions of `ros2 topic hz`
//! and `ros2 topic bw`: no I/O, receive times passed in (ns on any monotonic clock).
//!
//! - **hz**: the window holds the last N intervals between messages (default 10 000); the
//!   average rate is 1 / their mean, min and max are the shortest and longest interval, std dev
//!   is the population standard deviation of the intervals, and `window` is their number.
//! - **bw**: the window holds the last N messages (default 100); bytes per second is their total
//!   size over the time from the oldest one to now; mean, min and max are message sizes. Units
//!   are decimal (1 KB = 1000 B), chosen by the rate: B below 1000 B/s, KB below 1 MB/s, else MB.

use std::collections::VecDeque;

/// `ros2 topic hz`'s default window (intervals).
pub const HZ_WINDOW: usize = 10_000;
/// `ros2 topic bw`'s default window (messages).
pub const BW_WINDOW: usize = 100;

/// The intervals between the last messages.
#[derive(Debug, Clone)]
pub struct RateWindow {
    capacity: usize,
    last: Option<u64>,
    intervals: VecDeque<u64>,
}

/// What `ferry hz` prints.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateStats {
    /// Messages per second: 1 / mean interval.
    pub rate_hz: f64,
    pub min_s: f64,
    pub max_s: f64,
    pub std_dev_s: f64,
    /// Intervals in the window.
    pub window: usize,
}

impl RateWindow {
    /// A window of at most `capacity` intervals (at least 1).
    pub fn new(capacity: usize) -> RateWindow {
        let capacity = capacity.max(1);
        RateWindow {
            capacity,
            last: None,
            intervals: VecDeque::with_capacity(capacity.min(HZ_WINDOW)),
        }
    }

    /// A message arrived at `t_ns`. A time before the previous one (a clock that went back)
    /// starts the window again, as ros2 does.
    pub fn push(&mut self, t_ns: u64) {
        match self.last {
            Some(prev) if t_ns >= prev => {
                if self.intervals.len() == self.capacity {
                    self.intervals.pop_front();
                }
                self.intervals.push_back(t_ns - prev);
            }
            Some(_) => self.intervals.clear(),
            None => {}
        }
        self.last = Some(t_ns);
    }

    /// The statistics of the window; `None` before the second message.
    pub fn stats(&self) -> Option<RateStats> {
        let n = self.intervals.len();
        if n == 0 {
            return None;
        }
        let secs = self.intervals.iter().map(|&d| d as f64 * 1e-9);
        let mean = secs.clone().sum::<f64>() / n as f64;
        let var = secs.clone().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        Some(RateStats {
            rate_hz: if mean > 0.0 { 1.0 / mean } else { 0.0 },
            min_s: secs.clone().fold(f64::INFINITY, f64::min),
            max_s: secs.fold(0.0, f64::max),
            std_dev_s: var.sqrt(),
            window: n,
        })
    }
}

impl RateStats {
    /// `ros2 topic hz`'s two lines (no final newline).
    pub fn to_text(&self) -> String {
        format!(
            "average rate: {:.3}\n\tmin: {:.3}s max: {:.3}s std dev: {:.5}s window: {}",
            self.rate_hz, self.min_s, self.max_s, self.std_dev_s, self.window
        )
    }
}

/// The last messages' receive times and sizes.
#[derive(Debug, Clone)]
pub struct BandwidthWindow {
    capacity: usize,
    messages: VecDeque<(u64, u64)>,
    total: u64,
}

/// What `ferry bw` prints.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BandwidthStats {
    pub bytes_per_s: f64,
    /// Messages in the window.
    pub messages: usize,
    pub mean_size: f64,
    pub min_size: u64,
    pub max_size: u64,
}

impl BandwidthWindow {
    /// A window of at most `capacity` messages (at least 1).
    pub fn new(capacity: usize) -> BandwidthWindow {
        let capacity = capacity.max(1);
        BandwidthWindow {
            capacity,
            messages: VecDeque::with_capacity(capacity.min(BW_WINDOW)),
            total: 0,
        }
    }

    /// A message of `size` bytes arrived at `t_ns`.
    pub fn push(&mut self, t_ns: u64, size: u64) {
        if self.messages.len() == self.capacity {
            if let Some((_, s)) = self.messages.pop_front() {
                self.total -= s;
            }
        }
        self.messages.push_back((t_ns, size));
        self.total += size;
    }

    /// The statistics at `now_ns`; `None` with fewer than 2 messages, or when no time has passed
    /// since the oldest.
    pub fn stats(&self, now_ns: u64) -> Option<BandwidthStats> {
        let n = self.messages.len();
        let &(t0, _) = self.messages.front()?;
        if n < 2 || now_ns <= t0 {
            return None;
        }
        let sizes = self.messages.iter().map(|&(_, s)| s);
        Some(BandwidthStats {
            bytes_per_s: self.total as f64 / ((now_ns - t0) as f64 * 1e-9),
            messages: n,
            mean_size: self.total as f64 / n as f64,
            min_size: sizes.clone().min().unwrap_or(0),
            max_size: sizes.max().unwrap_or(0),
        })
    }
}

impl BandwidthStats {
    /// `ros2 topic bw`'s two lines (no final newline).
    pub fn to_text(&self) -> String {
        let (div, unit, digits) = if self.bytes_per_s < 1000.0 {
            (1.0, "B", 0)
        } else if self.bytes_per_s < 1_000_000.0 {
            (1000.0, "KB", 2)
        } else {
            (1_000_000.0, "MB", 2)
        };
        let f = |v: f64| format!("{:.*} {unit}", digits, v / div);
        format!(
            "{}/s from {} messages\n\tMessage size mean: {} min: {} max: {}",
            f(self.bytes_per_s),
            self.messages,
            f(self.mean_size),
            f(self.min_size as f64),
            f(self.max_size as f64)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn rate_of_known_intervals() {
        let mut w = RateWindow::new(10);
        assert_eq!(w.stats(), None);
        // Intervals 10, 20, 30 ms: mean 20 ms (50 Hz), population std dev sqrt(200/3) ms.
        for t in [0, 10, 30, 60] {
            w.push(t * MS);
        }
        let s = w.stats().unwrap();
        assert!((s.rate_hz - 50.0).abs() < 1e-9, "{s:?}");
        assert!((s.min_s - 0.010).abs() < 1e-12);
        assert!((s.max_s - 0.030).abs() < 1e-12);
        assert!((s.std_dev_s - (200.0f64 / 3.0).sqrt() * 1e-3).abs() < 1e-12);
        assert_eq!(s.window, 3);
        assert_eq!(
            s.to_text(),
            "average rate: 50.000\n\tmin: 0.010s max: 0.030s std dev: 0.00816s window: 3"
        );
    }

    #[test]
    fn rate_window_keeps_the_last_intervals_and_restarts_when_time_goes_back() {
        let mut w = RateWindow::new(2);
        for t in [0, 100, 110, 120] {
            w.push(t * MS);
        }
        let s = w.stats().unwrap();
        assert_eq!(s.window, 2);
        assert!((s.rate_hz - 100.0).abs() < 1e-9);
        w.push(5 * MS);
        assert_eq!(w.stats(), None);
        w.push(7 * MS);
        assert!((w.stats().unwrap().rate_hz - 500.0).abs() < 1e-6);
    }

    #[test]
    fn bandwidth_of_known_sizes() {
        let mut w = BandwidthWindow::new(3);
        w.push(0, 100);
        assert_eq!(w.stats(MS), None);
        w.push(100 * MS, 200);
        w.push(200 * MS, 300);
        // 600 bytes over 1 s from the oldest: 600 B/s.
        let s = w.stats(1000 * MS).unwrap();
        assert_eq!((s.messages, s.min_size, s.max_size), (3, 100, 300));
        assert!((s.bytes_per_s - 600.0).abs() < 1e-9);
        assert_eq!(
            s.to_text(),
            "600 B/s from 3 messages\n\tMessage size mean: 200 B min: 100 B max: 300 B"
        );
        // The oldest falls out: 200 + 300 + 5000 over 0.9 s.
        w.push(900 * MS, 5000);
        let s = w.stats(1000 * MS).unwrap();
        assert_eq!((s.messages, s.min_size, s.max_size), (3, 200, 5000));
        assert!((s.bytes_per_s - 5500.0 / 0.9).abs() < 1e-6);
        assert_eq!(
            s.to_text(),
            "6.11 KB/s from 3 messages\n\tMessage size mean: 1.83 KB min: 0.20 KB max: 5.00 KB"
        );
        let mut big = BandwidthWindow::new(2);
        big.push(0, 3_000_000);
        big.push(MS, 3_000_000);
        assert!(big
            .stats(1000 * MS)
            .unwrap()
            .to_text()
            .starts_with("6.00 MB/s from 2"));
    }
}
