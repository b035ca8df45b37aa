//! The hub processes: each a subscriber of its inbound topic and a publisher of its outbound one.

use super::messages::{header, intact, send, DATA, PROBE, WARMUP};
use super::options::{
    role_name, Mode, CLOSE_TIMEOUT, EXIT_TIMEOUT, LAP_TIMEOUT, PROBE_EVERY, PROGRESS_EVERY, SLICE,
    START_TIMEOUT,
};
use super::wire::{
    edge_counts, process_info, Command, Discovery, HubReport, Laps, MasterResult, PeerRequest,
    Report,
};
use crate::error::{bail, note, Context, Error, Result};
use crate::peer::{PeerLink, MAIN_GONE};
use ferry::{Publisher, Subscriber};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The discovery of a hub's node: the other side's address on two hosts, this host only
/// otherwise (whatever the environment says).
pub(super) fn discovery_config(discovery: Option<&Discovery>) -> ferry::DiscoveryConfig {
    let mut config = ferry::DiscoveryConfig::default();
    if let Some(d) = discovery {
        config.port = d.port;
        config.peers = d.peers.iter().map(|&p| SocketAddr::V4(p)).collect();
    }
    config
}

/// Whether the main process ended the run (closed this process's input).
pub(super) fn main_gone(link: &mut PeerLink) -> Result<bool> {
    match link.check_main() {
        Ok(()) => Ok(false),
        Err(e) if e.to_string() == MAIN_GONE => Ok(true),
        Err(e) => Err(e),
    }
}

/// Waits (at most `timeout`) for command `want`, calling `poll` every few milliseconds meanwhile.
pub(super) fn expect(
    link: &mut PeerLink,
    want: Command,
    timeout: Duration,
    mut poll: impl FnMut(),
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        poll();
        match link.recv::<Command>(Duration::from_millis(2))? {
            Some(c) if c == want => return Ok(()),
            Some(c) => bail!("expected {want:?} from the lab's main process, got {c:?}"),
            None => {}
        }
        if Instant::now() >= deadline {
            bail!("no {want:?} from the lab's main process within {timeout:?}");
        }
    }
}

/// Waits (at most `timeout`) until the main process ends the run.
pub(super) fn wait_closed(link: &mut PeerLink, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if link.recv::<Command>(Duration::from_millis(50)).is_err() {
            return;
        }
    }
}

/// Closes a process's two ends so that neither neighbour waits: the publisher is dropped (it
/// says goodbye and, over UDP, lingers until its subscriber confirmed it took everything) on a
/// thread, while this thread keeps reading the incoming edge, which lets the subscriber answer
/// its own publisher's goodbye, until that publisher has gone; at most CLOSE_TIMEOUT. (Every
/// process of the ring closes at once; a subscriber that stopped reading would hold its
/// publisher until the other host's subscriber timed out.)
pub(super) fn close(ends: Ends) {
    let Ends {
        mut input, output, ..
    } = ends;
    let closer = std::thread::Builder::new()
        .name("hubs-close".into())
        .spawn(move || drop(output));
    let deadline = Instant::now() + CLOSE_TIMEOUT;
    loop {
        let _ = input.recv_timeout(Duration::from_millis(2));
        let closed = closer.as_ref().map_or(true, |t| t.is_finished());
        if (closed && input.publisher_count() == 0) || Instant::now() >= deadline {
            break;
        }
    }
    if let Ok(t) = closer {
        if t.is_finished() {
            let _ = t.join();
        }
    }
}

pub(super) struct Ends {
    pub(super) input: Subscriber,
    pub(super) output: Publisher,
    pub(super) size: usize,
}

pub(super) fn hub(args: &PeerRequest, link: &mut PeerLink, ends: &mut Ends) -> Result<()> {
    let mut forwarded = 0u64;
    let mut out_of_order = 0u64;
    let mut last: Option<(u64, u64)> = None;
    while !main_gone(link)? {
        let Some(sample) = ends.input.recv_timeout(SLICE)? else {
            continue;
        };
        if let Some((phase, seq)) = header(&sample) {
            if phase != PROBE {
                let follows = match last {
                    Some((lp, ls)) => (lp == phase && seq == ls + 1) || (lp != phase && seq == 0),
                    None => seq == 0,
                };
                if !follows {
                    out_of_order += 1;
                }
                last = Some((phase, seq));
            }
        }
        let mut loan = ends.output.loan(sample.len())?;
        loan.as_mut_slice().copy_from_slice(&sample);
        loan.send()?;
        drop(sample);
        forwarded += 1;
        if args.exit_after == Some(forwarded) {
            note!(
                "ferry lab-peer hubs: {} exits after {forwarded} messages, as asked (--fault-hub-exit-after)",
                role_name(args.index)
            );
            std::process::exit(3);
        }
    }
    link.report(&Report::Hub(HubReport {
        forwarded,
        out_of_order,
        edge_in: edge_counts(&args.domain, args.index - 1),
        process: process_info(args),
    }))
}

/// Progress reports for the main process's watchdog.
pub(super) struct Progress {
    pub(super) next: Instant,
    pub(super) count: u64,
}

impl Progress {
    pub(super) fn new() -> Progress {
        Progress {
            next: Instant::now() + PROGRESS_EVERY,
            count: 0,
        }
    }

    pub(super) fn tick(&mut self, link: &mut PeerLink) -> Result<()> {
        self.count += 1;
        let now = Instant::now();
        if now >= self.next {
            self.next = now + PROGRESS_EVERY;
            link.report(&Report::Progress(self.count))?;
        }
        Ok(())
    }
}

pub(super) fn master(args: &PeerRequest, link: &mut PeerLink, ends: &mut Ends) -> Result<()> {
    expect(link, Command::Start, START_TIMEOUT, || {
        ends.input.publisher_count();
    })?;
    let mut r = MasterResult {
        probes: probe(ends, link)?,
        ..MasterResult::default()
    };
    let mut progress = Progress::new();
    match args.mode {
        Mode::Roundtrip => roundtrip(args, ends, link, &mut r, &mut progress)?,
        Mode::Flood => flood(args, ends, link, &mut r, &mut progress)?,
    }
    r.edge_in = edge_counts(&args.domain, args.hubs - 1);
    r.process = Some(process_info(args));
    link.report(&Report::Result(Box::new(r)))?;
    // Keep the publisher (and its ring) until every process has reported.
    wait_closed(link, EXIT_TIMEOUT);
    Ok(())
}

/// Sends probes around the ring until one comes back (every edge connected), then waits for the
/// rest of those sent (FIFO edges: every later probe follows the one that came back).
pub(super) fn probe(ends: &mut Ends, link: &mut PeerLink) -> Result<u64> {
    let deadline = Instant::now() + START_TIMEOUT;
    let mut sent = 0u64;
    let mut next_send = Instant::now();
    let mut came_back = false;
    loop {
        let now = Instant::now();
        if !came_back && now >= next_send {
            send(&mut ends.output, ends.size, PROBE, sent)?;
            sent += 1;
            next_send = now + PROBE_EVERY;
        }
        if let Some(sample) = ends.input.recv_timeout(Duration::from_millis(10))? {
            if let Some((PROBE, seq)) = header(&sample) {
                came_back = true;
                if seq + 1 == sent {
                    return Ok(sent);
                }
            }
        }
        link.check_main()?;
        if Instant::now() >= deadline {
            bail!(
                "the ring did not close within {START_TIMEOUT:?}: {sent} probes sent, {}",
                if came_back {
                    "some came back, the last did not"
                } else {
                    "none came back (a hub does not reach the next)"
                }
            );
        }
    }
}

/// What arrived while waiting for one message.
pub(super) enum Got {
    /// The message, intact or not.
    It { intact: bool },
    /// Nothing within the slice.
    Nothing,
    /// Another message (counted by the caller).
    Other(Option<(u64, u64)>),
}

pub(super) fn take(ends: &mut Ends, phase: u64, seq: u64) -> Result<Got> {
    let Some(sample) = ends.input.recv_timeout(SLICE)? else {
        return Ok(Got::Nothing);
    };
    Ok(match header(&sample) {
        Some((p, s)) if p == phase && s == seq => Got::It {
            intact: intact(&sample, ends.size, phase, seq),
        },
        h => Got::Other(h),
    })
}

pub(super) fn roundtrip(
    args: &PeerRequest,
    ends: &mut Ends,
    link: &mut PeerLink,
    r: &mut MasterResult,
    progress: &mut Progress,
) -> Result<()> {
    let mut laps = Vec::with_capacity(args.messages as usize);
    for (phase, count) in [(WARMUP, args.warmup), (DATA, args.messages)] {
        for seq in 0..count {
            let t0 = Instant::now();
            send(&mut ends.output, ends.size, phase, seq)?;
            let deadline = t0 + LAP_TIMEOUT;
            loop {
                match take(ends, phase, seq)? {
                    Got::It { intact } => {
                        let lap = t0.elapsed().as_nanos() as u64;
                        if phase == DATA {
                            laps.push(lap);
                            r.received += 1;
                            if !intact {
                                r.corrupt += 1;
                            }
                        } else if !intact {
                            r.corrupt += 1;
                        }
                        break;
                    }
                    Got::Other(Some((PROBE, _))) => r.unexpected += 1,
                    Got::Other(Some((p, s))) if p == phase && s < seq => r.duplicates += 1,
                    Got::Other(_) => {
                        r.unexpected += 1;
                        r.out_of_order += 1;
                    }
                    Got::Nothing => {}
                }
                if Instant::now() >= deadline {
                    let left = if phase == DATA {
                        count - seq
                    } else {
                        args.messages
                    };
                    r.lost += left;
                    r.aborted = Some(format!(
                        "{} message {seq} did not come back within {LAP_TIMEOUT:?}; the {left} laps from there on were not run",
                        if phase == DATA { "recorded" } else { "warm-up" }
                    ));
                    r.laps = (!laps.is_empty()).then(|| Laps::of(&mut laps));
                    return Ok(());
                }
                link.check_main()?;
            }
            progress.tick(link)?;
        }
    }
    r.laps = Some(Laps::of(&mut laps));
    Ok(())
}

/// What one flood's receiving side saw.
#[derive(Default)]
pub(super) struct FloodTally {
    pub(super) distinct: u64,
    pub(super) corrupt: u64,
    pub(super) out_of_order: u64,
    pub(super) duplicates: u64,
    pub(super) unexpected: u64,
    pub(super) last_at: Option<Instant>,
    pub(super) stalled: bool,
}

pub(super) fn flood(
    args: &PeerRequest,
    ends: &mut Ends,
    link: &mut PeerLink,
    r: &mut MasterResult,
    progress: &mut Progress,
) -> Result<()> {
    for (phase, count) in [(WARMUP, args.warmup), (DATA, args.messages)] {
        if count == 0 {
            continue;
        }
        let (t0, tally, sent) = one_flood(ends, link, progress, phase, count)?;
        let lost = count - tally.distinct;
        r.corrupt += tally.corrupt;
        r.out_of_order += tally.out_of_order;
        r.duplicates += tally.duplicates;
        r.unexpected += tally.unexpected;
        if phase == DATA {
            r.received = tally.distinct;
            r.lost = lost;
            if let Some(last) = tally.last_at {
                r.completion_ns = Some(last.saturating_duration_since(t0).as_nanos() as u64);
            }
        }
        if tally.stalled || lost > 0 {
            let which = if phase == DATA {
                "the flood"
            } else {
                "the warm-up flood"
            };
            r.aborted = Some(format!(
                "{which}: {} of {count} messages came back ({sent} sent); nothing more came within {LAP_TIMEOUT:?}",
                tally.distinct
            ));
            if phase != DATA {
                r.lost = args.messages;
            }
            return Ok(());
        }
    }
    Ok(())
}

/// One flood of `count` messages: a sender thread pushes them, this thread takes them back.
/// Returns the time of the first send, what came back, and how many were sent.
pub(super) fn one_flood(
    ends: &mut Ends,
    link: &mut PeerLink,
    progress: &mut Progress,
    phase: u64,
    count: u64,
) -> Result<(Instant, FloodTally, u64)> {
    let stop = std::sync::atomic::AtomicBool::new(false);
    let size = ends.size;
    let Ends { input, output, .. } = ends;
    std::thread::scope(|s| {
        let stop = &stop;
        let sender = std::thread::Builder::new()
            .name("hubs-flood".into())
            .spawn_scoped(s, move || -> (Instant, u64, Result<()>) {
                let t0 = Instant::now();
                for seq in 0..count {
                    // Relaxed: a stop request needs no ordering with anything else.
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        return (t0, seq, Ok(()));
                    }
                    if let Err(e) = send(output, size, phase, seq) {
                        return (t0, seq, Err(e));
                    }
                }
                (t0, count, Ok(()))
            })
            .context("cannot start the flood's sender thread")?;
        let mut tally = FloodTally::default();
        let received = receive_flood(input, size, phase, count, &mut tally, || {
            progress.tick(link)?;
            link.check_main()
        });
        // Relaxed: see the sender.
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (t0, sent, sent_result) = sender
            .join()
            .map_err(|_| Error::msg("the flood's sender thread panicked"))?;
        received?;
        if let Err(e) = sent_result {
            if tally.distinct < count {
                bail!("the flood's sender: {e}");
            }
        }
        Ok((t0, tally, sent))
    })
}

pub(super) fn receive_flood(
    input: &mut Subscriber,
    size: usize,
    phase: u64,
    count: u64,
    tally: &mut FloodTally,
    mut look_around: impl FnMut() -> Result<()>,
) -> Result<()> {
    let mut seen = vec![false; count as usize];
    let mut expected = 0u64;
    let mut last_progress = Instant::now();
    while tally.distinct < count {
        let got = input.recv_timeout(SLICE)?;
        let now = Instant::now();
        match got {
            Some(sample) => {
                match header(&sample) {
                    Some((p, seq)) if p == phase && seq < count => {
                        if seen[seq as usize] {
                            tally.duplicates += 1;
                        } else {
                            seen[seq as usize] = true;
                            tally.distinct += 1;
                            if !intact(&sample, size, phase, seq) {
                                tally.corrupt += 1;
                            }
                        }
                        if seq != expected {
                            tally.out_of_order += 1;
                        }
                        expected = seq + 1;
                        tally.last_at = Some(now);
                        last_progress = now;
                    }
                    _ => tally.unexpected += 1,
                }
                if tally.distinct % 256 == 0 {
                    look_around()?;
                }
            }
            None => {
                look_around()?;
                if now - last_progress >= LAP_TIMEOUT {
                    tally.stalled = true;
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}
