//! What the publisher writes into each message, and what the subscriber counts of what it gets.

use super::options::{CHECK_EVERY, DRAIN_LIMIT};
use super::wire::{Command, Counts, Latency, Received};
use crate::error::{bail, Result};
use crate::os::monotonic_ns;
use crate::peer::PeerLink;
use crate::signal;
use crate::{pattern, Dir};
use std::time::{Duration, Instant};

/// Writes message `seq`: its number in bytes 0..8, its pattern byte in the rest.
#[inline]
pub(super) fn write_message(buf: &mut [u8], seq: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    buf[8..].fill(pattern(seq, Dir::Ping));
}

/// The smallest message that carries its send time.
pub(super) const STAMPED_MIN: usize = 16;

/// Writes message `seq` stamped with its send time (`--period`): its number in bytes 0..8, the
/// time (CLOCK_MONOTONIC, ns: the same clock in every namespace of this host) in 8..16, its
/// pattern byte in the rest.
pub(super) fn write_stamped(buf: &mut [u8], seq: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    buf[16..].fill(pattern(seq, Dir::Ping));
    buf[8..16].copy_from_slice(&monotonic_ns().to_le_bytes());
}

/// A message's writer: stamped under `--period`.
pub(super) fn writer(period: Option<Duration>) -> fn(&mut [u8], u64) {
    if period.is_some() {
        write_stamped
    } else {
        write_message
    }
}

/// What the subscriber counts.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) size: usize,
    pub(super) received: Received,
    /// The highest sequence number delivered.
    pub(super) last_seq: Option<u64>,
    /// Messages carry their send time (`--period`): bytes 8..16.
    pub(super) stamped: bool,
    /// Each delivered message's latency (stamped messages), ns.
    pub(super) latencies: Vec<u64>,
}

impl Tally {
    pub(super) fn new(size: usize) -> Tally {
        Tally {
            size,
            ..Tally::default()
        }
    }

    /// A tally of messages stamped with their send time (see `write_stamped`).
    pub(super) fn stamped(size: usize) -> Tally {
        Tally {
            size,
            stamped: true,
            ..Tally::default()
        }
    }

    pub(super) fn latency(&self) -> Option<Latency> {
        if self.latencies.is_empty() {
            return None;
        }
        let mut l = self.latencies.clone();
        l.sort_unstable();
        let at = |q: f64| l[((l.len() - 1) as f64 * q).round() as usize];
        Some(Latency {
            p50_ns: at(0.5),
            p99_ns: at(0.99),
            max_ns: l[l.len() - 1],
        })
    }

    /// Takes one message; an error if it is damaged (wrong length or content, or a sequence
    /// number that disagrees with the transport's).
    pub(super) fn take(&mut self, payload: &[u8], transport_seq: Option<u64>) -> Result<()> {
        if payload.len() != self.size {
            bail!(
                "a message of {} bytes arrived, expected {}",
                payload.len(),
                self.size
            );
        }
        let mut num = [0u8; 8];
        num.copy_from_slice(&payload[..8]);
        let seq = u64::from_le_bytes(num);
        if let Some(t) = transport_seq {
            if t != seq {
                bail!("message {seq} arrived with ferry sequence number {t}");
            }
        }
        let now = monotonic_ns();
        let received = &mut self.received;
        if received.delivered == 0 {
            received.first_ns = now;
        }
        if self.last_seq.is_some_and(|l| seq <= l) {
            received.out_of_order += 1;
        } else {
            received.delivered += 1;
            received.bytes += payload.len() as u64;
            received.last_ns = now;
            self.last_seq = Some(seq);
            if self.stamped {
                num.copy_from_slice(&payload[8..16]);
                self.latencies
                    .push(now.saturating_sub(u64::from_le_bytes(num)));
            }
        }
        let body = if self.stamped { 16 } else { 8 };
        if seq % CHECK_EVERY == 0 {
            let byte = pattern(seq, Dir::Ping);
            if !crate::check(&payload[body..], byte) {
                let at = body + payload[body..].iter().position(|&b| b != byte).unwrap_or(0);
                bail!(
                    "message {seq} is corrupt: byte {at} is {:#04x}, expected {byte:#04x}",
                    payload[at]
                );
            }
            received.checked += 1;
        }
        Ok(())
    }

    /// The counts for the main side (the counters the tally does not hold are filled in by the
    /// caller).
    pub(super) fn counts(&self) -> Counts {
        Counts {
            received: self.received,
            kernel_drops: None,
            ferry_lost: None,
            ferry_skipped: None,
            latency: self.latency(),
        }
    }
}

/// When the subscriber stops: once the publisher said how much it sent and either the last
/// message arrived or nothing came for `idle` (or the drain limit passed).
pub(super) struct Ending {
    /// What the publisher sent, once it said.
    pub(super) sent: Option<u64>,
    pub(super) done_at: Option<Instant>,
    pub(super) last_progress: Instant,
    pub(super) delivered_then: u64,
    pub(super) idle: Duration,
}

impl Ending {
    pub(super) fn new(idle: Duration) -> Ending {
        Ending {
            sent: None,
            done_at: None,
            last_progress: Instant::now(),
            delivered_then: 0,
            idle,
        }
    }

    /// Takes the main side's commands that have come (an error once it went away).
    pub(super) fn take_commands(&mut self, link: &mut PeerLink) -> Result<()> {
        while let Some(command) = link.recv::<Command>(Duration::ZERO)? {
            match command {
                Command::Done { sent } => self.sent = Some(sent),
                Command::Release => bail!("the main side let the subscriber go before its count"),
                Command::Go => bail!("the main side told a subscriber to send"),
            }
        }
        Ok(())
    }

    pub(super) fn finished(&mut self, tally: &Tally) -> bool {
        let Some(sent) = self.sent else {
            return false;
        };
        let now = Instant::now();
        let done_at = *self.done_at.get_or_insert(now);
        if sent == 0 || tally.last_seq.is_some_and(|l| l.saturating_add(1) >= sent) {
            return true;
        }
        if tally.received.delivered != self.delivered_then {
            self.delivered_then = tally.received.delivered;
            self.last_progress = now;
        }
        now.duration_since(self.last_progress.max(done_at)) >= self.idle
            || now.duration_since(done_at) >= DRAIN_LIMIT
    }

    /// Receives until the run is over: `receive` takes what came into the tally and says whether
    /// anything did (false after a wait that timed out). The main side's commands are read after
    /// every such wait, and after every 256 receives.
    pub(super) fn receive_all(
        &mut self,
        link: &mut PeerLink,
        tally: &mut Tally,
        mut receive: impl FnMut(&mut Tally) -> Result<bool>,
    ) -> Result<()> {
        let mut since_check = 0u32;
        loop {
            let got = receive(tally)?;
            since_check += 1;
            if !got || since_check >= 256 {
                since_check = 0;
                self.take_commands(link)?;
                if self.finished(tally) {
                    return Ok(());
                }
            }
        }
    }
}

/// Sends back to back until `duration` has passed, or with `period` one message per period on
/// an absolute schedule (message k due k periods after the first: a late send does not move the
/// ones after it); `send(seq)` sends message `seq`. Returns the count and the first send's time
/// (ns).
pub(super) fn send_for(
    duration: Duration,
    size: usize,
    period: Option<Duration>,
    mut send: impl FnMut(u64) -> Result<()>,
) -> Result<(u64, u64, f64)> {
    if let Some(period) = period {
        let start_ns = monotonic_ns();
        let start = Instant::now();
        let mut seq = 0u64;
        loop {
            let due = start + period.saturating_mul(u32::try_from(seq).unwrap_or(u32::MAX));
            if due.duration_since(start) >= duration {
                break;
            }
            // Sleeps in slices, so that Ctrl-C is heard.
            while let Some(left) = due.checked_duration_since(Instant::now()) {
                signal::check()?;
                std::thread::sleep(left.min(Duration::from_millis(50)));
            }
            send(seq)?;
            seq += 1;
        }
        return Ok((seq, start_ns, start.elapsed().as_secs_f64()));
    }
    // Reading the clock after every message would cost small messages a good share of their
    // time; every 16th is within a few microseconds.
    let every = if size >= 4096 { 1 } else { 16 };
    let start_ns = monotonic_ns();
    let start = Instant::now();
    let deadline = start + duration;
    let mut seq = 0u64;
    loop {
        send(seq)?;
        seq += 1;
        if seq % every == 0 {
            if Instant::now() >= deadline {
                break;
            }
            // A relaxed load, cheaper than the clock: with it, a run of large messages stops
            // within a message or so of Ctrl-C.
            signal::check()?;
        }
    }
    Ok((seq, start_ns, start.elapsed().as_secs_f64()))
}
