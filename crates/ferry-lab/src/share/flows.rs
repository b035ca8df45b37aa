//! The peer side: one end of one ferry flow. The publisher sends 64 KiB messages back to back
//! from `Go` until `Stop`, then reads its counters, closes and reports them; the subscriber
//! counts what arrives, and what arrives within the measured interval by the time it takes each
//! message, until `Done`.

use std::time::{Duration, Instant};

use super::options::{
    max_bins, Command, Counts, PeerRequest, PublisherCounters, Report, MESSAGE_BYTES, SEND_TIMEOUT,
    START_TIMEOUT,
};
use crate::error::{bail, Result};
use crate::os::monotonic_ns;
use crate::peer::PeerLink;
use crate::signal;

/// How long the subscriber waits for a message before it looks at its commands again.
const SLICE: Duration = Duration::from_millis(10);

/// The settings of every publisher and subscriber.
fn qos() -> ferry::Qos {
    ferry::Qos::default()
        .transport(ferry::Transport::Udp)
        .delivery(ferry::Delivery::Reliable)
        .max_message_size(MESSAGE_BYTES)
        .send_timeout(SEND_TIMEOUT)
}

/// A node of the run's domain whose discovery reaches the other side.
fn node(name: &str, request: &PeerRequest) -> Result<ferry::Node> {
    crate::lab_node_reaching(
        name,
        &request.domain,
        false,
        crate::discovery_reaching(Some(request.other)),
    )
}

/// The publisher: waits for its subscriber, says so, sends from `Go` until `Stop`, and reports
/// its counters.
pub(super) fn publish(request: &PeerRequest, link: &mut PeerLink) -> Result<()> {
    let limit = Duration::from_secs_f64(request.limit_s);
    let node = node("lab-share-pub", request)?;
    let mut publisher = node.publisher(&request.topic, &qos())?;
    link.await_subscriber(&publisher, START_TIMEOUT)?;
    link.report(&Report::Ready)?;
    match link.await_command(limit, "go")? {
        Command::Go => {}
        other => bail!("the main side sent {other:?} before go"),
    }
    let deadline = Instant::now() + limit;
    let mut sent = 0u64;
    loop {
        // Each message carries its number in its first 8 bytes.
        let outcome = publisher.loan(MESSAGE_BYTES).and_then(|mut loan| {
            loan.as_mut_slice()[..8].copy_from_slice(&sent.to_le_bytes());
            sent += 1;
            loan.send()
        });
        match outcome {
            // A send that timed out still goes, in order, once the subscriber makes room.
            Ok(()) | Err(ferry::SendError::Timeout(_)) => {}
            Err(e) => return Err(e.into()),
        }
        match link.recv::<Command>(Duration::ZERO)? {
            Some(Command::Stop) => break,
            Some(other) => bail!("the main side sent {other:?} while the publisher sent"),
            None => {}
        }
        if Instant::now() >= deadline {
            bail!("the main side did not say stop within {limit:?}");
        }
    }
    // Its counters as its service thread last stored them, in its own /dev/shm.
    let me = std::process::id();
    let info = ferry::admin::topic(&request.domain, &request.topic)?
        .and_then(|t| t.publishers.into_iter().find(|p| p.pid == me));
    drop(publisher);
    link.report(&Report::Stopped(PublisherCounters {
        sent,
        retransmitted: info.as_ref().map(|p| p.retransmitted),
        queue_events: info.as_ref().map(|p| p.congestion.queue_events),
        congestion_events: info.as_ref().map(|p| p.congestion.congestion_events),
    }))
}

/// The subscriber: counts every message, and those it takes within the interval the main side
/// gives, until `Done`.
pub(super) fn subscribe(request: &PeerRequest, link: &mut PeerLink) -> Result<()> {
    let limit = Duration::from_secs_f64(request.limit_s);
    let node = node("lab-share-sub", request)?;
    let mut sub = node.subscriber(&request.topic, &qos())?;
    link.report(&Report::Ready)?;
    let mut counts = Counts::default();
    let bins = max_bins(request.limit_s);
    let mut window: Option<(u64, u64)> = None;
    let started = Instant::now();
    loop {
        if let Some(sample) = sub.recv_timeout(SLICE)? {
            let at = monotonic_ns();
            if sample.len() != MESSAGE_BYTES {
                bail!(
                    "a message of {} bytes came; the publisher sends {MESSAGE_BYTES}",
                    sample.len()
                );
            }
            counts.received += 1;
            counts.bin(at, bins);
            if window.is_some_and(|(from, to)| (from..to).contains(&at)) {
                counts.in_window += 1;
            }
        }
        match link.recv::<Command>(Duration::ZERO)? {
            Some(Command::Window { from_ns, to_ns }) if from_ns < to_ns => {
                window = Some((from_ns, to_ns));
            }
            Some(Command::Done) => break,
            Some(other) => bail!("the main side sent {other:?} to a subscriber"),
            None => {}
        }
        signal::check()?;
        if started.elapsed() >= limit {
            bail!("the main side did not say that the run was done within {limit:?}");
        }
    }
    link.report(&Report::Counts(counts))
}
