//! The main side of one run: the ferry flows' peers started on both sides of the link, the other
//! flow started after the delay, the measured interval given to the subscribers, and the counts
//! read back.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::options::{
    Clock, Command, Competitor, Config, Cpus, Flows, PeerRequest, Report, Role, Row, Share, BIN,
    START_TIMEOUT, TCP_CONGESTION, WARMUP,
};
use crate::error::{bail, Result};
use crate::netns::Pair;
use crate::os::monotonic_ns;
use crate::peer::Peer;
use crate::signal;
use crate::tools::{self, Iperf3Mode};

/// What every run of an experiment shares.
pub(super) struct Ctx<'a> {
    pub(super) config: &'a Config,
    pub(super) cpus: Cpus,
    /// iperf3, if installed.
    pub(super) iperf3: Option<PathBuf>,
    /// This process's mount namespace: the peers mount their own /dev/shm only outside it.
    pub(super) lab_mount_ns: u64,
}

/// What iperf3's client writes at a time: its own default for TCP.
const IPERF3_TCP_LEN: usize = 128 << 10;

/// Runs `competitor` beside the ferry flow on the link of `pair`, in a domain of its own.
pub(super) fn one(ctx: &Ctx<'_>, pair: &Pair, round: usize, competitor: Competitor) -> Result<Row> {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    // Relaxed: only uniqueness matters.
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let domain = format!("labshare{}-{n}", std::process::id());
    let config = ctx.config;
    let Some(rate) = pair.rate else {
        bail!(
            "the link between {} and {} has no rate",
            pair.ns[0],
            pair.ns[1]
        );
    };
    let seconds = Duration::from_secs_f64(config.seconds);
    let delay = Duration::from_secs_f64(config.delay);
    let request = |role: Role, flow: usize| PeerRequest {
        role,
        domain: domain.clone(),
        topic: format!("flow{}", flow + 1),
        other: match role {
            Role::Publish => pair.addr[1],
            Role::Subscribe => pair.addr[0],
        },
        cpu: match role {
            Role::Publish => ctx.cpus.a,
            Role::Subscribe => ctx.cpus.b,
        },
        lab_mount_ns: ctx.lab_mount_ns,
        limit_s: (delay + WARMUP + seconds + START_TIMEOUT * 4).as_secs_f64(),
    };
    let flows = competitor.ferry_flows();

    // The subscribers first (a publisher waits for its subscriber), declared before the
    // publishers so that on an error the publishers are killed first.
    let mut subscribers = Vec::new();
    for flow in 0..flows {
        subscribers.push(Peer::start::<Share>(
            &request(Role::Subscribe, flow),
            &pair.place(1),
        )?);
    }
    let mut publishers = Vec::new();
    for s in &mut subscribers {
        expect_ready(s, START_TIMEOUT, "that its subscriber is ready")?;
    }
    for flow in 0..flows {
        publishers.push(Peer::start::<Share>(
            &request(Role::Publish, flow),
            &pair.place(0),
        )?);
    }
    // A publisher waits up to START_TIMEOUT for its subscriber to match.
    for p in &mut publishers {
        expect_ready(p, START_TIMEOUT * 2, "that its subscriber matched")?;
    }

    publishers[0].send(&Command::Go)?;
    let mut clock = Clock {
        first_ns: monotonic_ns(),
        tcp_ns: None,
    };
    let second = clock.first_ns + nanos(delay);
    watch(&mut subscribers, &mut publishers, second)?;
    let window = |start: u64| {
        let from = start + nanos(WARMUP);
        (from, from + nanos(seconds))
    };
    let tcp = match competitor {
        Competitor::Ferry => {
            publishers[1].send(&Command::Go)?;
            let (from, to) = window(monotonic_ns());
            tell_window(&mut subscribers, from, to)?;
            watch(&mut subscribers, &mut publishers, to)?;
            None
        }
        Competitor::Tcp => {
            let Some(program) = &ctx.iperf3 else {
                bail!("iperf3 is not installed (apt-get install iperf3)");
            };
            let r = tools::iperf3_run_omitting(
                program,
                Iperf3Mode::Tcp {
                    len: IPERF3_TCP_LEN,
                    congestion: Some(TCP_CONGESTION),
                },
                WARMUP.as_secs(),
                Some(BIN),
                seconds,
                (ctx.cpus.a, ctx.cpus.b),
                Some(pair),
                &mut || {
                    let now = monotonic_ns();
                    clock.tcp_ns = Some(now);
                    let (from, to) = window(now);
                    tell_window(&mut subscribers, from, to)
                },
            )?;
            for p in subscribers.iter_mut().chain(&mut publishers) {
                p.check_alive()?;
            }
            Some(r)
        }
    };

    for p in &mut publishers {
        p.send(&Command::Stop)?;
    }
    let mut counters = Vec::new();
    for p in &mut publishers {
        // It lingers at most a send timeout or so for its subscriber to catch up.
        match p.await_report(START_TIMEOUT * 2, "its counters")? {
            Report::Stopped(c) => counters.push(c),
            other => bail!("a publisher sent {other:?} instead of its counters"),
        }
    }
    for s in &mut subscribers {
        s.send(&Command::Done)?;
    }
    let mut counts = Vec::new();
    for s in &mut subscribers {
        match s.await_report(START_TIMEOUT, "its counts")? {
            Report::Counts(c) => counts.push(c),
            other => bail!("a subscriber sent {other:?} instead of its counts"),
        }
    }
    for p in publishers {
        p.finish(START_TIMEOUT)?;
    }
    for s in subscribers {
        s.finish(START_TIMEOUT)?;
    }
    Ok(Row::of(
        round,
        competitor,
        rate,
        config.seconds,
        Flows {
            counts: &counts,
            publishers: counters,
            tcp: tcp.as_ref(),
            clock,
        },
    ))
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Gives every subscriber the measured interval (CLOCK_MONOTONIC nanoseconds).
fn tell_window(subscribers: &mut [Peer], from_ns: u64, to_ns: u64) -> Result<()> {
    for s in subscribers {
        s.send(&Command::Window { from_ns, to_ns })?;
    }
    Ok(())
}

/// Waits until CLOCK_MONOTONIC reaches `until_ns`, watching every peer and Ctrl-C.
fn watch(subscribers: &mut [Peer], publishers: &mut [Peer], until_ns: u64) -> Result<()> {
    loop {
        signal::check()?;
        for p in subscribers.iter_mut().chain(publishers.iter_mut()) {
            p.check_alive()?;
        }
        let now = monotonic_ns();
        if now >= until_ns {
            return Ok(());
        }
        std::thread::sleep(Duration::from_nanos(until_ns - now).min(Duration::from_millis(50)));
    }
}

/// Waits for a peer to say that it is ready.
fn expect_ready(peer: &mut Peer, timeout: Duration, what: &str) -> Result<()> {
    match peer.await_report(timeout, what)? {
        Report::Ready => Ok(()),
        other => bail!("a peer sent {other:?} instead of saying {what}"),
    }
}
