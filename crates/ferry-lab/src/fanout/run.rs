//! The main side of one run: the publisher, its schedule, and the peer's subscribers started and
//! read back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::options::{
    qos, Command, Config, Configuration, Fanout, PeerRequest, Report, Row, DRAIN_LIMIT,
    START_TIMEOUT, TOPIC,
};
use crate::error::{bail, Error, Result};
use crate::peer::{Peer, Place};
use crate::signal;

/// Runs one configuration of one round in a domain of its own, which is cleaned afterwards
/// (whatever an interrupted or failed run left there: a killed peer's subscribers).
pub(super) fn one(config: &Config, round: usize, configuration: Configuration) -> Result<Row> {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    // Relaxed: only uniqueness matters.
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let domain = format!("labfanout{}-{n}", std::process::id());
    crate::in_own_domain(&domain, || measure(config, round, configuration, &domain))
}

fn measure(
    config: &Config,
    round: usize,
    configuration: Configuration,
    domain: &str,
) -> Result<Row> {
    let slow = configuration == Configuration::WithSlow;
    let total = config.subscribers + usize::from(slow);
    let node = crate::lab_node("lab-fanout", domain, false)?;
    // Declared before the publisher, so that on an error the publisher closes first and the peer
    // is killed after.
    let mut peer: Peer;
    let mut publisher = node.publisher(TOPIC, &qos(config.size))?;
    let request = PeerRequest {
        domain: domain.to_owned(),
        size: config.size,
        fast: config.subscribers,
        slow_pause_ns: slow
            .then(|| u64::try_from(config.slow_pause().as_nanos()).unwrap_or(u64::MAX)),
        seconds: config.seconds,
    };
    peer = Peer::start::<Fanout>(&request, &Place::local())?;
    match peer.await_report(START_TIMEOUT, "that its subscribers are ready")? {
        Report::Subscribed => {}
        Report::Counts(_) => bail!("the peer sent its counts before its subscribers were ready"),
    }
    if let Err(e) = peer.wait_ready(START_TIMEOUT, || Ok(publisher.subscriber_count() == total)) {
        if e.is_interruption() {
            return Err(e);
        }
        bail!(
            "the publisher saw {} of the {total} subscribers within {START_TIMEOUT:?}: {e}",
            publisher.subscriber_count()
        );
    }

    // Message k is due k periods after the first; one that is late goes at once.
    let messages = config.messages();
    let mut message = vec![0u8; config.size];
    let start = Instant::now();
    for k in 0..messages {
        let due = start + Duration::from_secs_f64(k as f64 / config.rate);
        let now = Instant::now();
        if due > now {
            signal::sleep(due - now)?;
        }
        if k % 256 == 0 {
            signal::check()?;
            peer.check_alive()?;
        }
        message[..8].copy_from_slice(&k.to_le_bytes());
        publisher.send(&message)?;
    }
    let send_seconds = start.elapsed().as_secs_f64();
    peer.send(&Command::Done)?;
    let counts = match peer.await_report(DRAIN_LIMIT + START_TIMEOUT, "its counts")? {
        Report::Counts(counts) => counts,
        Report::Subscribed => bail!("the peer said twice that its subscribers were ready"),
    };
    if counts.fast.len() != config.subscribers || counts.slow.is_some() != slow {
        bail!("the peer's counts do not match its subscribers: {counts:?}");
    }
    // The publisher's statistics, as its service thread last stored them (the peer's drain took
    // longer than the time between two stores).
    let me = std::process::id();
    let left_out = ferry::admin::topic(domain, TOPIC)?
        .and_then(|t| t.publishers.into_iter().find(|p| p.pid == me))
        .map(|p| p.congestion.left_out)
        .ok_or_else(|| {
            Error::msg("the publisher's statistics were not found in its topic's snapshot")
        })?;
    drop(publisher);
    peer.finish(START_TIMEOUT)?;
    Ok(Row::of(
        round,
        configuration,
        messages,
        send_seconds,
        counts,
        left_out,
    ))
}
