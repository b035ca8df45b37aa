//! `ferry lab latency`: one-way latency as half the round trip of a ping-pong between two
//! processes, for ferry's shared-memory transport and the raw baselines, in interleaved rounds.
//!
//! For each round, each transport in turn starts a fresh peer process (`ferry lab-peer latency`)
//! and runs unrecorded warm-up and then `samples / rounds` recorded round trips for every size.
//! Within a round baselines run before the rows compared with them; a row whose baseline's run
//! ended more than 10 s before its own (another system at small sizes, whose warm-up is as
//! long as ferry's ring needs in its first run, takes about a minute) is followed by another
//! run of the baseline, and compared with that one (`RoundRow::reference`).
//! The warm-up is at least `--warmup` round trips, and enough to write a whole ferry ring once:
//! rings are pre-faulted, but a first lap still finds the ring's lines cold in both caches and
//! TLBs, which is not the steady state.
//! Every transport gets the same warm-up, baselines included, except that after its first run a
//! transport that does not write ferry's ring has its count cut to what 2 s holds at its median
//! round trip in that previous run (never below `--warmup`): a ring's lap takes spinning ferry
//! milliseconds, but as many of another system's round trips took a minute every round (Zenoh's,
//! about 100 µs each). Each round's count is recorded in its row.
//! A round trip: the main process writes every byte of the ping and sends it; the peer waits for
//! it, checks every byte, writes every byte of the pong and sends it; the main process waits for
//! it and checks every byte. Ferry transports send through loans (zero copy) and read samples in
//! place; the raw baselines do the same payload work on a plain shared buffer (`raw-spin`,
//! `raw-futex`) or on the buffers of plain blocking UDP sockets (`raw-udp4`, one datagram per
//! message, so it cannot carry more than 65507 bytes: larger sizes are skipped and say so).
//! ferry's UDP transports (`udp4`, `udp6`) cut messages into 1472-byte (IPv6: 1452) frames
//! themselves (MTU 1500), so they run every size.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ferry::{Delivery, IpVersion, Node, Publisher, Qos, Subscriber, WaitStrategy};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::raw::RawChannel;
use super::rawudp::{self, RawUdpEnd};
use super::{await_message, verify, Dir, Endpoint, Pin, Pinning, Summary};
use crate::baseline::{baselines_first, BASELINE_GAP};
use crate::chart::{size_boxes, Glyph, Plot, Section, SummaryLine};
use crate::error::{bail, note, Context, Result};
use crate::experiment::{Experiment, Measured, Results};
use crate::peer::{Peer, PeerLink, Place};
use crate::signal;
use crate::stats::{median, ratio};
use crate::studies::{cite, cite_first, SHM_STREAM, VORTEX_LITE};
use crate::subject::{Family, Subject, Subjects};
use crate::table::Table;
use crate::units::{format_ns, format_size};

/// What this experiment measures, in the order its help lists them.
pub const SUBJECTS: Subjects = Subjects(&[
    Subject::RawSpin,
    Subject::ShmSpin,
    Subject::Shm,
    Subject::RawFutex,
    Subject::ShmBlock,
    Subject::ShmBlockWaitSet,
    Subject::ShmSpinRr,
    Subject::ShmBlockRr,
    Subject::RawUdp4,
    Subject::Udp4,
    Subject::Udp4Rr,
    Subject::Udp4Key,
    Subject::Udp6,
    Subject::Iceoryx2,
    Subject::Iceoryx2Block,
    Subject::Iceoryx2Rr,
    Subject::Zenoh,
    Subject::ZenohShm,
    Subject::ZenohRr,
]);

/// How a transport moves its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// ferry, with this QoS (see `Subject::ferry_qos`).
    Ferry,
    /// A ferry service (request/response), with this QoS: the main process is its client, the
    /// peer its server.
    FerryService,
    /// A raw shared buffer; `futex`: the receiver sleeps instead of spinning.
    RawShm { futex: bool },
    /// Plain blocking UDP sockets on 127.0.0.1.
    RawUdp,
    /// Another system, run by the `ferry-peers` binary (see `peers`).
    Peer,
}

/// What latency knows of a subject: its baseline, how it moves messages, ferry's QoS for it.
trait LatencySubject: Copy {
    /// The baseline a row is set against in the same rounds.
    fn baseline(self) -> Option<Subject>;
    /// For another system, the ferry transport that waits the same way (the one the report
    /// sets it against).
    fn ferry_counterpart(self) -> Option<Subject>;
    fn kind(self) -> Kind;
    /// ferry's QoS for a ferry transport: reliable, loans of up to `max_size` bytes.
    fn ferry_qos(self, max_size: usize) -> Option<Qos>;
    /// Why this transport cannot carry a `size`-byte message, if it cannot.
    fn cannot_carry(self, size: usize) -> Option<String>;
    /// Whether it can reach a peer on another machine (`--remote`).
    fn crosses_hosts(self) -> bool;
    fn describe(self) -> &'static str;
}

impl LatencySubject for Subject {
    /// The raw baseline a ferry transport is compared with.
    fn baseline(self) -> Option<Subject> {
        match self {
            Subject::ShmSpin | Subject::Shm => Some(Subject::RawSpin),
            Subject::ShmBlock => Some(Subject::RawFutex),
            // Waiting on many: against one subscriber's own blocking receive.
            Subject::ShmBlockWaitSet => Some(Subject::ShmBlock),
            Subject::Udp4 | Subject::Udp6 => Some(Subject::RawUdp4),
            // What the domain key costs: against the same transport in the clear.
            Subject::Udp4Key => Some(Subject::Udp4),
            // A service's request and response: against the ping-pong of two topics that waits
            // the same way, so that the ratio is what a service adds to it.
            Subject::ShmSpinRr => Some(Subject::ShmSpin),
            Subject::ShmBlockRr => Some(Subject::ShmBlock),
            Subject::Udp4Rr => Some(Subject::Udp4),
            // Another system: against ferry's spinning shared memory, so that the ratio says how
            // far it is from ferry.
            Subject::Iceoryx2 | Subject::Zenoh | Subject::ZenohShm => Some(Subject::ShmSpin),
            // A receiver that sleeps: against ferry's sleeping shared memory.
            Subject::Iceoryx2Block => Some(Subject::ShmBlock),
            // Another system's request/response: against ferry's spinning service.
            Subject::Iceoryx2Rr | Subject::ZenohRr => Some(Subject::ShmSpinRr),
            // Not this experiment's (refused before anything runs).
            Subject::RawSpin | Subject::RawFutex | Subject::RawUdp4 | Subject::Auto => None,
            Subject::Iperf3 | Subject::Iperf3Tcp | Subject::Tcp | Subject::Sockperf => None,
        }
    }

    /// For another system, the ferry transport that waits the same way (the one the report
    /// sets it against).
    fn ferry_counterpart(self) -> Option<Subject> {
        match self {
            Subject::Iceoryx2 | Subject::Zenoh | Subject::ZenohShm => Some(Subject::ShmSpin),
            Subject::Iceoryx2Block => Some(Subject::ShmBlock),
            Subject::Iceoryx2Rr | Subject::ZenohRr => Some(Subject::ShmSpinRr),
            _ => None,
        }
    }

    fn kind(self) -> Kind {
        match self {
            Subject::RawSpin => Kind::RawShm { futex: false },
            Subject::RawFutex => Kind::RawShm { futex: true },
            Subject::RawUdp4 => Kind::RawUdp,
            s => match s.family() {
                Family::Ferry => Kind::Ferry,
                Family::FerryService => Kind::FerryService,
                // The lab's tools are no subject of this experiment: refused before anything
                // runs (`SUBJECTS`).
                Family::Raw | Family::Peer | Family::Tool => Kind::Peer,
            },
        }
    }

    /// ferry's QoS for a ferry transport: reliable, loans of up to `max_size` bytes.
    fn ferry_qos(self, max_size: usize) -> Option<Qos> {
        let shm = |wait| Some(ferry_qos(wait, max_size));
        let udp = |ip| {
            Some(
                Qos::default()
                    .transport(ferry::Transport::Udp)
                    .ip_version(ip)
                    .mtu(UDP_MTU)
                    .delivery(Delivery::Reliable)
                    .wait(WaitStrategy::Block)
                    .max_message_size(max_size),
            )
        };
        match self {
            Subject::ShmSpin | Subject::ShmSpinRr => shm(WaitStrategy::Spin),
            Subject::Shm => shm(WaitStrategy::Adaptive),
            Subject::ShmBlock | Subject::ShmBlockRr | Subject::ShmBlockWaitSet => {
                shm(WaitStrategy::Block)
            }
            Subject::Udp4 | Subject::Udp4Key | Subject::Udp4Rr => udp(IpVersion::V4),
            Subject::Udp6 => udp(IpVersion::V6),
            Subject::RawSpin
            | Subject::RawFutex
            | Subject::RawUdp4
            | Subject::Iceoryx2
            | Subject::Iceoryx2Block
            | Subject::Iceoryx2Rr
            | Subject::Zenoh
            | Subject::ZenohShm
            | Subject::ZenohRr
            | Subject::Auto
            | Subject::Iperf3
            | Subject::Iperf3Tcp
            | Subject::Tcp
            | Subject::Sockperf => None,
        }
    }

    /// Why this transport cannot carry a `size`-byte message, if it cannot.
    fn cannot_carry(self, size: usize) -> Option<String> {
        (self == Subject::RawUdp4 && size > rawudp::MAX_DATAGRAM_V4).then(|| {
            format!(
                "skipped: one UDP datagram holds at most {} bytes, and raw-udp4 sends one datagram per message",
                rawudp::MAX_DATAGRAM_V4
            )
        })
    }

    /// Whether it can reach a peer on another machine (`--remote`).
    fn crosses_hosts(self) -> bool {
        matches!(self, Subject::Udp4 | Subject::Udp4Key | Subject::RawUdp4)
    }

    fn describe(self) -> &'static str {
        match self {
            Subject::RawSpin => "two processes share one buffer per direction; the receiver spins on a flag",
            Subject::ShmSpin => "ferry shared memory, reliable, WaitStrategy::Spin",
            Subject::Shm => "ferry shared memory, reliable, WaitStrategy::Adaptive",
            Subject::RawFutex => "as raw-spin, but the receiver sleeps in futex_wait and the sender calls futex_wake after every message",
            Subject::ShmBlock => "ferry shared memory, reliable, WaitStrategy::Block",
            Subject::ShmBlockWaitSet => "as shm-block, but the main process waits for each reply in a WaitSet over its subscriber and 7 idle subscribers of other topics (one futex_waitv on their 8 doorbells), then takes the reply with try_recv; set against shm-block",
            Subject::RawUdp4 => "two processes with plain blocking std::net::UdpSockets on 127.0.0.1, connected, one send and one recv per message (one datagram per message: at most 65507 bytes)",
            Subject::Udp4 => "ferry UDP over IPv4 loopback, reliable, WaitStrategy::Block, MTU 1500 (messages cut into 1472-byte datagrams by ferry)",
            Subject::Udp4Key => "as udp4, with a domain key: every datagram authenticated and encrypted (AEGIS-128L), replays refused",
            Subject::Udp6 => "ferry UDP over IPv6 loopback, reliable, WaitStrategy::Block, MTU 1500 (messages cut into 1452-byte datagrams by ferry)",
            Subject::ShmSpinRr => "a ferry service over shared memory, WaitStrategy::Spin: the main process calls (a request loaned and written in place, the response read in place), the peer serves (the request read in place, the response loaned and written in place); each behind ferry's 16-byte request/response header, written with the commit",
            Subject::ShmBlockRr => "as shm-spin-rr, with WaitStrategy::Block on both ends",
            Subject::Udp4Rr => "a ferry service over UDP on IPv4 loopback (as udp4: reliable, WaitStrategy::Block, MTU 1500); the main process calls, the peer serves",
            Subject::Iceoryx2 => "iceoryx2 0.10 publish/subscribe over shared memory (its defaults, no config file), two processes of crates/ferry-peers pinned as the lab's: a loan filled with memset, receive() polled in a spin loop, every byte checked in place",
            Subject::Iceoryx2Block => "as iceoryx2, but the receiver sleeps: each direction also has an iceoryx2 event service (event ids in a counting bit set in POSIX shared memory, the sleeper woken through a Unix datagram socket); the sender calls notify() on its notifier after every send, the receiver tries receive() and, finding nothing, sleeps in its listener's timed_wait until a notification comes",
            Subject::Zenoh => "Zenoh 1.10 publish/subscribe, two sessions in peer mode over TCP on 127.0.0.1 (no scouting), express publishers with Block congestion control as its z_ping; each message a fresh buffer filled with memset, the subscriber's channel polled with try_recv in a spin loop (the measuring threads pinned as the lab's, Zenoh's own threads not), every byte checked in place",
            Subject::ZenohShm => "as zenoh, with each message allocated from Zenoh's POSIX shared-memory provider and filled in place, so that it travels as a reference to the segment",
            Subject::Iceoryx2Rr => "iceoryx2 0.10 request-response over shared memory (its defaults, no config file), two processes of crates/ferry-peers pinned as the lab's: the main process is the client (a request loaned with loan_slice_uninit and filled with memset, its pending response's receive() polled in a spin loop, every byte of the response checked in place), the peer the server (receive() polled in a spin loop, every byte of the request checked in place, answered with a loaned response of the same size filled with memset); set against shm-spin-rr",
            Subject::ZenohRr => "Zenoh 1.10 request/response, the two sessions of zenoh (peer mode over TCP on 127.0.0.1, no scouting): the peer declares a queryable, the main process calls get with the request as its payload (a fresh buffer filled with memset; express, Block congestion control, consolidation None so that the reply is handed over as it comes) and polls the reply channel with try_recv in a spin loop; the queryable's channel is polled the same way, each query's payload checked in place and answered with a reply of the same size filled with memset (the measuring threads pinned as the lab's, Zenoh's own threads not); set against shm-spin-rr",
            _ => "not measured by this experiment",
        }
    }
}

/// The MTU ferry's UDP transports are given (1472-byte IPv4 datagrams).
const UDP_MTU: usize = 1500;

/// What `ferry lab latency` is asked to measure.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Transports, in the order each round runs them, except that a baseline runs before the
    /// rows compared with it.
    pub transports: Vec<Subject>,
    /// Message sizes in bytes.
    pub sizes: Vec<usize>,
    /// Round trips recorded per transport and size, split evenly across the rounds.
    pub samples: usize,
    /// Interleaved rounds: every round runs every transport in turn.
    pub rounds: usize,
    /// Unrecorded round trips before the recorded ones, per transport, size and round; raised
    /// where needed to write a whole ferry ring once, and after a transport's first run held to
    /// what 2 s of its round trips take, unless it writes ferry's ring (see `WARMUP_TIME`).
    pub warmup: usize,
    /// CPUs of the main process and of the peer; `None`: the first two this process may use.
    pub pin: Option<Pin>,
    /// The `ferry lab agent` (`HOST[:PORT]`) that runs the peer on another machine; `None`: a
    /// local peer process.
    pub remote: Option<String>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            transports: vec![
                Subject::RawSpin,
                Subject::ShmSpin,
                Subject::ShmSpinRr,
                Subject::Shm,
                Subject::RawFutex,
                Subject::ShmBlock,
                Subject::ShmBlockWaitSet,
                Subject::ShmBlockRr,
            ],
            sizes: vec![32, 1 << 10, 32 << 10, 1 << 20],
            samples: 10_000,
            rounds: 5,
            warmup: 200,
            pin: None,
            remote: None,
        }
    }
}

/// The experiment (see the module's documentation).
pub struct Latency;

/// The largest message size accepted (both ferry and the baseline map twice or more of it).
const MAX_SIZE: usize = 256 << 20;
/// The most rounds a run interleaves.
const MAX_ROUNDS: usize = 10_000;
/// How long the main process waits for one reply before it gives up.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the peer waits for one message (the main process may be slow to start a size).
const PEER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the peer may take to attach, and to exit at the end.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Recorded round trips of round `round`: the samples split evenly, the first rounds taking the
/// remainder.
fn samples_in_round(samples: usize, rounds: usize, round: usize) -> usize {
    samples / rounds + usize::from(round < samples % rounds)
}

/// What the lab needs to run one transport's share of a round.
struct Ctx<'a> {
    args: &'a Config,
    domain: String,
    max_size: usize,
    pinning: &'a Pinning,
    /// Unrecorded round trips, per size, before any cut (see `warmups_for`).
    warmups: Vec<usize>,
    /// Counts transport runs, to name their topics and objects uniquely.
    run_index: usize,
    /// The two machines of a `--remote` run.
    machines: Option<crate::TwoMachines>,
}

/// One-way latencies in ns, by transport, size and round (rounds are pushed in order).
type Samples = Vec<Vec<Vec<Vec<u64>>>>;

/// Runs of a row's baseline made right after the row, by transport, size and round (`None`
/// where the row was compared with the baseline's own run of that round).
type References = Vec<Vec<Vec<Option<Vec<u64>>>>>;

/// Unrecorded round trips before each run's samples, by transport, size and round (`None` where
/// the size was not run).
type Warmed = Vec<Vec<Vec<Option<usize>>>>;

/// The round trip (ns) of a run: twice its median one-way latency.
fn rtt_of(one_way: &[u64]) -> Option<u64> {
    let mut v = one_way.to_vec();
    v.sort_unstable();
    v.get(v.len() / 2).map(|m| 2 * m)
}

/// After its first run, the warm-up of a transport that does not write ferry's ring lasts about
/// this long at most: its count is cut to what this time holds at the transport's median round
/// trip in its previous run (never below `--warmup`). The count is a lap of ferry's ring, which
/// takes spinning ferry milliseconds but took another system (Zenoh, around 100 µs a round trip)
/// a minute every round. ferry's shared-memory transports keep the whole lap in every round:
/// what they record must not run on the lap's cold lines (shm-block's lap at 32 B, about 45 µs
/// a round trip, is 6 s when 1 MiB is among the sizes).
const WARMUP_TIME: Duration = Duration::from_secs(2);

/// The warm-up of each size for `transport` in its next run (`full` counts, never cut below
/// `min`), after a run whose median round trips (ns) were `last_rtt` (none before its first run,
/// which gets the full counts).
fn warmups_for(
    transport: Subject,
    full: &[usize],
    min: usize,
    last_rtt: &[Option<u64>],
) -> Vec<usize> {
    if transport.is_ferry_shm() {
        return full.to_vec();
    }
    full.iter()
        .zip(last_rtt)
        .map(|(&full, rtt)| match rtt {
            Some(rtt) if *rtt > 0 => {
                let fits = (WARMUP_TIME.as_nanos() / u128::from(*rtt)) as usize;
                full.min(fits.max(min))
            }
            _ => full,
        })
        .collect()
}

/// The order transports run in within a round: every baseline before the rows compared with it
/// (floors, then ferry, then other systems), otherwise as given.
fn run_order(transports: &[Subject]) -> Vec<usize> {
    baselines_first(transports, |t| t.baseline().into_iter().collect())
}

/// Runs every round: each transport in turn (`run_order`), every size. A row whose baseline's
/// last run in the round ended more than `BASELINE_GAP` before it is followed by another run of
/// the baseline, which it is compared with (`references`).
fn measure(
    ctx: &mut Ctx<'_>,
    samples: &mut Samples,
    references: &mut References,
    warmed: &mut Warmed,
) -> Result<()> {
    let args = ctx.args;
    let order = run_order(&args.transports);
    let index = |t: Subject| args.transports.iter().position(|&x| x == t);
    // Each transport's median round trip per size in its latest run (see `WARMUP_TIME`).
    let mut last_rtt: Vec<Vec<Option<u64>>> =
        vec![vec![None; args.sizes.len()]; args.transports.len()];
    for round in 0..args.rounds {
        let recorded = samples_in_round(args.samples, args.rounds, round);
        note!(
            "round {}/{}: {recorded} round trips per size",
            round + 1,
            args.rounds
        );
        // When each transport's last run in this round ended.
        let mut ended: Vec<Option<Instant>> = vec![None; args.transports.len()];
        for &ti in &order {
            let transport = args.transports[ti];
            let warmups = warmups_for(transport, &ctx.warmups, args.warmup, &last_rtt[ti]);
            let per_size = run_one(ctx, transport, &warmups, recorded, round, "")?;
            for (si, v) in per_size.into_iter().enumerate() {
                last_rtt[ti][si] = rtt_of(&v).or(last_rtt[ti][si]);
                warmed[ti][si].push((!v.is_empty()).then_some(warmups[si]));
                samples[ti][si].push(v);
                references[ti][si].push(None);
            }
            let now = Instant::now();
            ended[ti] = Some(now);
            let Some(bi) = transport.baseline().and_then(index) else {
                continue;
            };
            if ended[bi].is_some_and(|e| now.duration_since(e) <= BASELINE_GAP) {
                continue;
            }
            let base = args.transports[bi];
            let beside = format!(" beside {}", transport.name());
            let warmups = warmups_for(base, &ctx.warmups, args.warmup, &last_rtt[bi]);
            let per_size = run_one(ctx, base, &warmups, recorded, round, &beside)?;
            for (si, v) in per_size.into_iter().enumerate() {
                last_rtt[bi][si] = rtt_of(&v).or(last_rtt[bi][si]);
                if !v.is_empty() {
                    references[ti][si][round] = Some(v);
                }
            }
            ended[bi] = Some(Instant::now());
        }
    }
    Ok(())
}

/// One run of `transport` in `round`, noted with its time.
fn run_one(
    ctx: &mut Ctx<'_>,
    transport: Subject,
    warmups: &[usize],
    recorded: usize,
    round: usize,
    beside: &str,
) -> Result<Vec<Vec<u64>>> {
    signal::check()?;
    let started = Instant::now();
    let per_size = run_transport(ctx, transport, warmups, recorded).context(format!(
        "{}{beside} (round {})",
        transport.name(),
        round + 1
    ))?;
    let cut: Vec<String> = warmups
        .iter()
        .zip(&ctx.warmups)
        .zip(&ctx.args.sizes)
        .filter(|((w, full), _)| w < full)
        .map(|((w, _), &size)| format!("{w} round trips at {}", format_size(size)))
        .collect();
    let cut = match cut.is_empty() {
        true => String::new(),
        false => format!(" (warm-up cut to {})", cut.join(", ")),
    };
    note!(
        "  {:<10} {:.1} s{beside}{cut}",
        transport.name(),
        started.elapsed().as_secs_f64()
    );
    ctx.run_index += 1;
    Ok(per_size)
}

/// One transport's share of a round, with a fresh peer, after `warmups[i]` unrecorded round
/// trips at size `i`. Sizes the transport cannot carry get no samples.
fn run_transport(
    ctx: &Ctx<'_>,
    transport: Subject,
    warmups: &[usize],
    recorded: usize,
) -> Result<Vec<Vec<u64>>> {
    let args = ctx.args;
    let runs: Vec<usize> = (0..args.sizes.len())
        .filter(|&i| transport.cannot_carry(args.sizes[i]).is_none())
        .collect();
    let mut per_size = vec![Vec::new(); args.sizes.len()];
    if runs.is_empty() {
        return Ok(per_size);
    }
    let sizes: Vec<usize> = runs.iter().map(|&i| args.sizes[i]).collect();
    let warmups: Vec<usize> = runs.iter().map(|&i| warmups[i]).collect();
    let place = Place::remote(args.remote.as_deref());
    let mut request = PeerRequest {
        transport,
        sizes: sizes.clone(),
        counts: warmups.iter().map(|w| w + recorded).collect(),
        cpu: ctx.pinning.peer_cpu(),
        max_size: ctx.max_size,
        ferry: None,
        shm: None,
        udp: None,
    };
    let samples = match transport.kind() {
        Kind::Ferry => {
            let (ping, pong) = topics(ctx.run_index);
            // Every ferry transport gets the maximum size of the whole run, as before (it sets
            // the ring size under shared memory).
            let qos = transport
                .ferry_qos(ctx.max_size)
                .expect("a ferry transport has a QoS");
            // Across two machines, each side's discovery reaches the other's.
            let (here, there) = match &ctx.machines {
                Some(m) => m.ipv4().map(|(h, t)| (Some(h), Some(t)))?,
                None => (None, None),
            };
            let node = super::lab_node_reaching(
                "lab-main",
                &ctx.domain,
                transport.keyed(),
                super::discovery_reaching(there),
            )?;
            let out = node.publisher(&ping, &qos)?;
            let inp = node.subscriber(&pong, &qos)?;
            let waiting = match transport {
                Subject::ShmBlockWaitSet => Some(WaitSetRecv {
                    set: ferry::WaitSet::new(),
                    idle: (0..IDLE_BESIDE)
                        .map(|k| node.subscriber(&format!("{pong}-idle{k}"), &qos))
                        .collect::<std::result::Result<_, _>>()?,
                }),
                _ => None,
            };
            request.ferry = Some(FerryTopics {
                domain: ctx.domain.clone(),
                ping,
                pong,
                main_host: here,
            });
            let mut peer = Peer::start::<Latency>(&request, &place)?;
            let mut end = FerryEnd {
                out,
                inp,
                out_dir: Dir::Ping,
                in_dir: Dir::Pong,
                waiting,
            };
            peer.wait_ready(START_TIMEOUT, || {
                Ok(end.out.subscriber_count() >= 1 && end.inp.publisher_count() >= 1)
            })?;
            let samples = drive(&mut end, &mut peer, &sizes, &warmups, recorded)?;
            // A reliable UDP publisher lingers when dropped until its subscribers have said that
            // they have everything, and a subscriber says so only when it is polled. So the
            // ends part in turn: our publisher goes first while the peer polls its subscriber
            // (until it sees no publisher), then the peer's while we poll ours.
            let FerryEnd { out, mut inp, .. } = end;
            drop(out);
            peer.finish_polling(START_TIMEOUT, || {
                let _ = inp.try_recv();
            })?;
            samples
        }
        Kind::FerryService => {
            let (service, _) = topics(ctx.run_index);
            let qos = transport
                .ferry_qos(ctx.max_size)
                .expect("a ferry transport has a QoS");
            let node = super::lab_node_reaching(
                "lab-main",
                &ctx.domain,
                false,
                super::discovery_reaching(None),
            )?;
            let client = node.client(&service, &qos)?;
            request.ferry = Some(FerryTopics {
                domain: ctx.domain.clone(),
                ping: service,
                pong: String::new(),
                main_host: None,
            });
            let mut peer = Peer::start::<Latency>(&request, &place)?;
            let mut end = ClientEnd {
                client,
                out_dir: Dir::Ping,
                in_dir: Dir::Pong,
            };
            // The server takes this client's requests once it has attached to them.
            peer.wait_ready(START_TIMEOUT, || Ok(end.client.has_server()))?;
            let samples = drive(&mut end, &mut peer, &sizes, &warmups, recorded)?;
            // Over UDP the server's responses linger until this client said it has them all.
            peer.finish_polling(START_TIMEOUT, || {
                let _ = end.client.try_recv_response();
            })?;
            samples
        }
        Kind::RawShm { futex } => {
            let name = format!("ferry-lab.{}.{}", std::process::id(), ctx.run_index);
            let mut chan = RawChannel::create(&name, ctx.max_size)?;
            request.shm = Some(name);
            let mut peer = Peer::start::<Latency>(&request, &place)?;
            peer.wait_ready(START_TIMEOUT, || Ok(chan.peer_ready()))?;
            chan.unlink()?;
            let mut end = chan.endpoint(Dir::Ping, futex);
            let samples = drive(&mut end, &mut peer, &sizes, &warmups, recorded)?;
            peer.finish(START_TIMEOUT)?;
            samples
        }
        Kind::RawUdp => {
            let max_size = sizes.iter().copied().max().unwrap_or(1);
            request.max_size = max_size;
            let (socket, main) = match &args.remote {
                None => {
                    let socket = rawudp::bind_loopback()?;
                    let main = socket.local_addr()?;
                    (socket, main)
                }
                Some(_) => {
                    // The address the agent's machine reaches this one at: the source address
                    // of a route to it.
                    let here = ctx.machines.as_ref().expect("resolved with --remote").here;
                    let socket = std::net::UdpSocket::bind((here, 0))
                        .context(format!("cannot bind a UDP socket on {here}"))?;
                    let main = socket.local_addr()?;
                    (socket, main)
                }
            };
            request.udp = Some(main);
            let mut peer = Peer::start::<Latency>(&request, &place)?;
            let mut end = RawUdpEnd::accept(socket, &mut peer, max_size, START_TIMEOUT)?;
            let samples = drive(&mut end, &mut peer, &sizes, &warmups, recorded)?;
            peer.finish(START_TIMEOUT)?;
            samples
        }
        Kind::Peer => {
            let bin = crate::peers::binary(transport.name())?;
            let pin = ctx.pinning.main_cpu().zip(ctx.pinning.peer_cpu());
            crate::peers::latency(
                &bin,
                transport.name(),
                &sizes,
                &request.counts,
                &warmups,
                pin,
            )?
        }
    };
    for (i, v) in runs.into_iter().zip(samples) {
        per_size[i] = v;
    }
    Ok(per_size)
}

/// The ring capacity ferry picks for `max_size` (read from a publisher made for the purpose).
fn ferry_ring_capacity(domain: &str, max_size: usize) -> Result<usize> {
    let node = Node::with_domain("lab-main", domain)?;
    let probe = node.publisher("ring-probe", &ferry_qos(WaitStrategy::Spin, max_size))?;
    let snapshot = ferry::admin::topic(domain, "ring-probe")?;
    drop(probe);
    snapshot
        .and_then(|t| t.publishers.first().map(|p| p.capacity as usize))
        .ok_or_else(|| {
            crate::error::Error::msg("cannot read the ring capacity of a ferry publisher")
        })
}

fn topics(run_index: usize) -> (String, String) {
    (format!("ping{run_index}"), format!("pong{run_index}"))
}

fn ferry_qos(wait: WaitStrategy, max_size: usize) -> Qos {
    Qos::default()
        .transport(ferry::Transport::Shm)
        .delivery(Delivery::Reliable)
        .wait(wait)
        .max_message_size(max_size)
}

/// The main side: `warmups[i] + recorded` round trips for size `i`; returns the recorded
/// one-way latencies (ns) per size.
fn drive<E: Endpoint>(
    end: &mut E,
    peer: &mut Peer,
    sizes: &[usize],
    warmups: &[usize],
    recorded: usize,
) -> Result<Vec<Vec<u64>>> {
    // Ctrl-C first: it also ends the peer, and the interruption is the better message.
    let mut healthy = || {
        signal::check()?;
        peer.check_alive()
    };
    let mut seq = 0u64;
    let mut out = Vec::with_capacity(sizes.len());
    for (&size, &warmup) in sizes.iter().zip(warmups) {
        let mut one_way = Vec::with_capacity(recorded);
        for i in 0..warmup + recorded {
            signal::check()?;
            let t0 = Instant::now();
            end.send(seq, size)?;
            await_message(end, seq, size, REPLY_TIMEOUT, &mut healthy)?;
            let round_trip = t0.elapsed();
            if i >= warmup {
                one_way.push((round_trip.as_nanos() / 2) as u64);
            }
            seq += 1;
        }
        out.push(one_way);
    }
    Ok(out)
}

/// A ferry publisher and subscriber pair as one end of the ping-pong.
struct FerryEnd {
    out: Publisher,
    inp: Subscriber,
    out_dir: Dir,
    in_dir: Dir,
    /// shm-block-waitset: the replies are waited for in a wait set, beside idle subscribers.
    waiting: Option<WaitSetRecv>,
}

/// A wait set and the idle subscribers it waits on beside the reply's (`IDLE_BESIDE` of them).
struct WaitSetRecv {
    set: ferry::WaitSet,
    idle: Vec<Subscriber>,
}

/// Idle subscribers in shm-block-waitset's wait set, beside the one that gets the replies.
const IDLE_BESIDE: usize = 7;

impl Endpoint for FerryEnd {
    fn send(&mut self, seq: u64, len: usize) -> Result<()> {
        let mut loan = self.out.loan(len)?;
        super::fill(loan.as_mut_slice(), super::pattern(seq, self.out_dir));
        loan.send()?;
        Ok(())
    }

    fn recv(&mut self, seq: u64, len: usize, slice: Duration) -> Result<bool> {
        let sample = match &mut self.waiting {
            None => self.inp.recv_timeout(slice)?,
            Some(w) => {
                let [a, b, c, d, e, f, g] = &mut w.idle[..] else {
                    unreachable!("made with {IDLE_BESIDE} idle subscribers")
                };
                let mut items: [&mut dyn ferry::Waitable; IDLE_BESIDE + 1] =
                    [&mut self.inp, a, b, c, d, e, f, g];
                if !w.set.wait(&mut items, Some(slice))?.contains(&0) {
                    return Ok(false);
                }
                self.inp.try_recv()?
            }
        };
        let Some(sample) = sample else {
            return Ok(false);
        };
        verify(&sample, seq, Some(sample.seq()), len, self.in_dir)?;
        Ok(true)
    }
}

/// A service's client as the main end of the round trip: a request out, its response in.
struct ClientEnd {
    client: ferry::Client,
    out_dir: Dir,
    in_dir: Dir,
}

impl Endpoint for ClientEnd {
    fn send(&mut self, seq: u64, len: usize) -> Result<()> {
        let mut loan = self.client.loan_request(len)?;
        super::fill(loan.as_mut_slice(), super::pattern(seq, self.out_dir));
        loan.send()?;
        Ok(())
    }

    fn recv(&mut self, seq: u64, len: usize, slice: Duration) -> Result<bool> {
        let Some(response) = self.client.recv_response(slice)? else {
            return Ok(false);
        };
        verify(&response, seq, None, len, self.in_dir)?;
        Ok(true)
    }
}

/// A service's server as the peer's end: a request in (read in place, then let go), its
/// response out (loaned and written in place).
struct ServerEnd {
    server: ferry::Server,
    answer_to: Option<ferry::ReplyTo>,
    out_dir: Dir,
    in_dir: Dir,
}

impl Endpoint for ServerEnd {
    fn send(&mut self, seq: u64, len: usize) -> Result<()> {
        let Some(to) = self.answer_to.take() else {
            bail!("response {seq} has no request to answer");
        };
        let Some(mut loan) = self.server.loan_response(to, len)? else {
            bail!("the client of request {seq} has gone");
        };
        super::fill(loan.as_mut_slice(), super::pattern(seq, self.out_dir));
        loan.send()?;
        Ok(())
    }

    fn recv(&mut self, seq: u64, len: usize, slice: Duration) -> Result<bool> {
        let Some(request) = self.server.recv_request(slice)? else {
            return Ok(false);
        };
        verify(&request, seq, None, len, self.in_dir)?;
        self.answer_to = Some(request.reply_to());
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------
// The peer

/// What the main side asks of the peer: answer `counts[i]` pings of `sizes[i]` bytes, in turn,
/// over the transport named, at the place named.
#[derive(Debug, Serialize, Deserialize)]
pub struct PeerRequest {
    transport: Subject,
    sizes: Vec<usize>,
    counts: Vec<usize>,
    cpu: Option<usize>,
    max_size: usize,
    /// The ferry transports' domain and topics.
    ferry: Option<FerryTopics>,
    /// The raw shared-memory channel's name.
    shm: Option<String>,
    /// The main process's raw UDP socket.
    udp: Option<SocketAddr>,
}

#[derive(Debug, Serialize, Deserialize)]
struct FerryTopics {
    domain: String,
    ping: String,
    pong: String,
    /// On two machines: the main process's machine, which the peer's discovery reaches.
    main_host: Option<std::net::Ipv4Addr>,
}

/// The peer side: answers every ping with a pong of the same size.
fn echo<E: Endpoint>(
    end: &mut E,
    args: &PeerRequest,
    main_alive: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    let mut seq = 0u64;
    for (&size, &count) in args.sizes.iter().zip(&args.counts) {
        for _ in 0..count {
            await_message(end, seq, size, PEER_TIMEOUT, main_alive)?;
            end.send(seq, size)?;
            seq += 1;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Results

/// How a latency run was made.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Setup {
    transports: Vec<Subject>,
    transport_descriptions: std::collections::BTreeMap<String, String>,
    sizes: Vec<usize>,
    samples_per_size: usize,
    rounds: usize,
    warmup: Warmup,
    pinning: Pinning,
    one_way: String,
    clock: String,
    processes: String,
    ferry: FerryConfig,
    /// Subject and size pairs that were not measured, and why.
    skipped: Vec<Skipped>,
    started_unix_s: u64,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Skipped {
    transport: Subject,
    size_bytes: usize,
    reason: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Warmup {
    min_round_trips: usize,
    round_trips_per_size: Vec<usize>,
    rule: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct FerryConfig {
    delivery: String,
    max_message_size: usize,
    /// Picked by ferry (`Qos::ring_capacity(0)`).
    ring_capacity_bytes: Option<usize>,
    /// The MTU of the UDP transports (1472-byte IPv4 / 1452-byte IPv6 datagrams).
    udp_mtu: usize,
    send: String,
    receive: String,
}

/// One transport at one size.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    pub transport: Subject,
    pub size_bytes: usize,
    /// Absent when the transport cannot carry this size (see `skipped`).
    #[serde(flatten)]
    pub summary: Option<Summary>,
    /// Why this row has no samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// The raw baseline of the same family, if it ran.
    pub baseline: Option<Subject>,
    /// The median over the rounds of p50 / the baseline's p50 in the same round.
    pub p50_ratio: Option<f64>,
    /// p50 / the baseline's p50 with all rounds pooled.
    pub p50_ratio_pooled: Option<f64>,
    /// The baseline as this row was compared with, all rounds pooled: in each round its own run,
    /// or the run of it made right after this row (`RoundRow::reference`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_beside: Option<Summary>,
    pub rounds: Vec<RoundRow>,
}

/// One round of a row.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RoundRow {
    pub round: usize,
    #[serde(flatten)]
    pub summary: Summary,
    /// p50 over the baseline's p50 in the same round.
    pub p50_ratio: Option<f64>,
    /// The baseline run again right after this row, because its own run in this round ended
    /// more than 10 s before this row's (the ratio is taken against this run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<Summary>,
    /// Unrecorded round trips before this round's samples (absent in results written before it
    /// was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_round_trips: Option<usize>,
}

fn build_rows(
    args: &Config,
    samples: &mut Samples,
    references: &References,
    warmed: &Warmed,
) -> Vec<Row> {
    // Summaries first (by transport, size), then ratios against them.
    let mut overall = Vec::new();
    let mut per_round = Vec::new();
    for by_size in samples.iter_mut() {
        let mut o = Vec::new();
        let mut r = Vec::new();
        for by_round in by_size.iter_mut() {
            r.push(
                by_round
                    .iter_mut()
                    .map(|v| Summary::of(v))
                    .collect::<Vec<_>>(),
            );
            let mut all: Vec<u64> = by_round.concat();
            o.push(Summary::of(&mut all));
        }
        overall.push(o);
        per_round.push(r);
    }
    let index = |t: Subject| args.transports.iter().position(|&x| x == t);
    let mut rows = Vec::new();
    for (ti, &transport) in args.transports.iter().enumerate() {
        let base = transport
            .baseline()
            .and_then(|b| index(b).map(|bi| (b, bi)));
        for (si, &size) in args.sizes.iter().enumerate() {
            if let Some(reason) = transport.cannot_carry(size) {
                rows.push(Row {
                    transport,
                    size_bytes: size,
                    summary: None,
                    skipped: Some(reason),
                    baseline: None,
                    p50_ratio: None,
                    p50_ratio_pooled: None,
                    baseline_beside: None,
                    rounds: Vec::new(),
                });
                continue;
            }
            // A baseline that skipped this size gives no ratio.
            let base = base.filter(|(b, _)| b.cannot_carry(size).is_none());
            let summary = overall[ti][si];
            let refs = references
                .get(ti)
                .and_then(|r| r.get(si))
                .map_or(&[][..], Vec::as_slice);
            let reference = |round: usize| refs.get(round).and_then(Option::as_ref);
            let rounds: Vec<RoundRow> = per_round[ti][si]
                .iter()
                .enumerate()
                .map(|(round, s)| {
                    let reference = reference(round).map(|v| Summary::of(&mut v.clone()));
                    let beside = base.map(|(_, bi)| {
                        reference.map_or(per_round[bi][si][round].p50_ns, |r| r.p50_ns)
                    });
                    RoundRow {
                        round,
                        summary: *s,
                        p50_ratio: beside.and_then(|b| ratio(s.p50_ns, b)),
                        reference,
                        warmup_round_trips: warmed
                            .get(ti)
                            .and_then(|w| w.get(si))
                            .and_then(|w| w.get(round).copied().flatten()),
                    }
                })
                .collect();
            // The baseline's samples this row was compared with, every round pooled.
            let baseline_beside = base.map(|(_, bi)| {
                let mut pooled: Vec<u64> = (0..samples[bi][si].len())
                    .flat_map(|round| {
                        reference(round)
                            .unwrap_or(&samples[bi][si][round])
                            .iter()
                            .copied()
                    })
                    .collect();
                Summary::of(&mut pooled)
            });
            rows.push(Row {
                transport,
                size_bytes: size,
                summary: Some(summary),
                skipped: None,
                baseline: base.map(|(b, _)| b),
                p50_ratio: median(rounds.iter().filter_map(|r| r.p50_ratio).collect()),
                p50_ratio_pooled: baseline_beside.and_then(|b| ratio(summary.p50_ns, b.p50_ns)),
                baseline_beside,
                rounds,
            });
        }
    }
    rows
}

impl Experiment for Latency {
    const NAME: &'static str = "latency";
    const TITLE: &'static str = "One-way latency";
    const ACROSS_MACHINES: bool = true;
    type Config = Config;
    type Setup = Setup;
    type Row = Row;
    type PeerRequest = PeerRequest;

    fn validate(args: &Config) -> Result<()> {
        SUBJECTS.check("--transport", &args.transports)?;
        if args.sizes.is_empty() {
            bail!("--sizes: give at least one size");
        }
        for (i, &s) in args.sizes.iter().enumerate() {
            if s == 0 || s > MAX_SIZE {
                bail!("--sizes: {s} bytes is out of range (1 byte to 256M)");
            }
            if args.sizes[..i].contains(&s) {
                bail!("--sizes: {s} is listed twice");
            }
        }
        if !(1..=MAX_ROUNDS).contains(&args.rounds) {
            bail!("--rounds must be between 1 and {MAX_ROUNDS}");
        }
        crate::experiment::check_counts(args.samples, args.warmup)?;
        if let Some(agent) = &args.remote {
            if let Some(t) = args.transports.iter().find(|t| !t.crosses_hosts()) {
                bail!(
                "--remote {agent}: {} cannot reach another machine; use udp4, udp4-key or raw-udp4",
                t.name()
            );
            }
        }
        if args.samples < args.rounds {
            bail!(
            "--samples ({}) must be at least --rounds ({}): every round records at least one round trip",
            args.samples,
            args.rounds
        );
        }
        Ok(())
    }

    fn run(args: &Config) -> Result<Measured<Self>> {
        let pinning = Pinning::resolve_for(args.pin, args.remote.is_some())?;
        if let Some(main_cpu) = pinning.main_cpu() {
            super::pin_to(main_cpu)?;
            if pinning.peer_cpu() == Some(main_cpu) {
                note!("ferry lab: both processes on CPU {main_cpu}: spinning transports will be very slow");
            }
        }
        let started = super::unix_time();
        let domain = format!("lab{}", std::process::id());
        let max_size = args.sizes.iter().copied().max().unwrap_or(1);
        // A service's messages carry a header: its rings are sized for the largest message with it.
        let header = match args.transports.iter().any(|t| t.is_service()) {
            true => ferry::service::HEADER_BYTES,
            false => 0,
        };
        let ring_capacity = if args.transports.iter().any(|t| t.is_ferry_shm()) {
            Some(ferry_ring_capacity(&domain, max_size + header)?)
        } else {
            None
        };
        let warmups: Vec<usize> = args
            .sizes
            .iter()
            .map(|&size| {
                args.warmup
                    .max(ring_capacity.map_or(0, |c| c.div_ceil(size)))
            })
            .collect();
        let machines = args
            .remote
            .as_deref()
            .map(crate::TwoMachines::resolve)
            .transpose()?;
        if let Some(m) = &machines {
            if args.transports.iter().any(|t| t.kind() == Kind::Ferry) {
                m.ipv4()?;
            }
        }
        // Other systems' binaries are built (once, minutes) before the first round, not between
        // two rows of it: the rounds are meant to be close in time.
        for t in args.transports.iter().filter(|t| t.kind() == Kind::Peer) {
            crate::peers::binary(t.name())?;
        }
        let mut ctx = Ctx {
            args,
            domain,
            max_size,
            pinning: &pinning,
            warmups: warmups.clone(),
            run_index: 0,
            machines,
        };
        note!(
            "ferry lab latency: {} transports × {} sizes × {} samples in {} rounds; {}",
            args.transports.len(),
            args.sizes.len(),
            args.samples,
            args.rounds,
            pinning.describe()
        );

        let mut samples: Samples =
            vec![vec![Vec::with_capacity(args.rounds); args.sizes.len()]; args.transports.len()];
        let mut references: References =
            vec![vec![Vec::with_capacity(args.rounds); args.sizes.len()]; args.transports.len()];
        let mut warmed: Warmed =
            vec![vec![Vec::with_capacity(args.rounds); args.sizes.len()]; args.transports.len()];
        let outcome = measure(&mut ctx, &mut samples, &mut references, &mut warmed);
        // Whatever an interrupted or failed run left in its own domain.
        let _ = ferry::admin::clean(Some(&ctx.domain));
        outcome?;

        let rows = build_rows(args, &mut samples, &references, &warmed);
        let setup = Setup {
            transports: args.transports.clone(),
            transport_descriptions: args
                .transports
                .iter()
                .map(|t| (t.name().to_owned(), t.describe().to_owned()))
                .collect(),
            sizes: args.sizes.clone(),
            samples_per_size: args.samples,
            rounds: args.rounds,
            warmup: Warmup {
                min_round_trips: args.warmup,
                round_trips_per_size: warmups,
                rule: format!("per transport, size and round: max(--warmup, ring capacity / size), so that every ferry ring is written once before recording (its first lap runs on cold caches and TLBs); the same for every transport, except that after its first run a transport that does not write ferry's ring (all but shm-spin, shm and shm-block) has its count cut to what {} s holds at its median round trip in its previous run (never below --warmup); each round's count is in its row (warmup_round_trips)", WARMUP_TIME.as_secs()),
            },
            pinning: pinning.clone(),
            one_way: "round trip / 2; the sender writes every payload byte, the receiver reads and checks every byte, then replies with a full payload".to_owned(),
            clock: "CLOCK_MONOTONIC (std::time::Instant) in the main process".to_owned(),
            processes: match &args.remote {
                None => "main process and a peer process (ferry lab-peer) on this machine".to_owned(),
                Some(agent) => format!("main process here, peer process on the machine of the lab agent at {agent}"),
            },
            ferry: FerryConfig {
                delivery: "reliable".to_owned(),
                max_message_size: ctx.max_size,
                ring_capacity_bytes: ring_capacity,
                udp_mtu: UDP_MTU,
                send: "loan (zero copy under shared memory; under UDP a pooled buffer that becomes the retransmit copy)".to_owned(),
                receive: "borrowed sample (in place)".to_owned(),
            },
            skipped: args
                .transports
                .iter()
                .flat_map(|&t| {
                    args.sizes.iter().filter_map(move |&size| {
                        t.cannot_carry(size).map(|reason| Skipped {
                            transport: t,
                            size_bytes: size,
                            reason,
                        })
                    })
                })
                .collect(),
            started_unix_s: started,
    };
        Ok(Measured { setup, rows })
    }

    fn run_peer(args: PeerRequest, link: &mut PeerLink) -> Result<()> {
        SUBJECTS.check("transport", &[args.transport])?;
        if link.for_agent() && !args.transport.crosses_hosts() {
            bail!(
                "{} cannot reach another machine; an agent serves udp4, udp4-key and raw-udp4",
                args.transport.name()
            );
        }
        if args.counts.len() != args.sizes.len() || args.sizes.is_empty() {
            bail!("the peer request needs one count per size");
        }
        if args.max_size > MAX_SIZE || args.sizes.iter().any(|&s| s == 0 || s > args.max_size) {
            bail!("the peer request's sizes are out of range (1 byte to {MAX_SIZE})");
        }
        if let Some(cpu) = args.cpu {
            super::pin_to(cpu)?;
        }
        let mut main_alive = link.watch();
        match args.transport.kind() {
            Kind::Peer => bail!(
                "{} runs its own two processes (ferry-peers); it has no ferry lab-peer side",
                args.transport.name()
            ),
            Kind::Ferry => {
                let Some(FerryTopics {
                    domain,
                    ping,
                    pong,
                    main_host,
                }) = &args.ferry
                else {
                    bail!("a ferry transport needs its domain and topics");
                };
                let qos = args
                    .transport
                    .ferry_qos(args.max_size)
                    .expect("a ferry transport has a QoS");
                let node = super::lab_node_reaching(
                    "lab-peer",
                    domain,
                    args.transport.keyed(),
                    super::discovery_reaching(*main_host),
                )?;
                let inp = node.subscriber(ping, &qos)?;
                let out = node.publisher(pong, &qos)?;
                let mut end = FerryEnd {
                    out,
                    inp,
                    out_dir: Dir::Pong,
                    in_dir: Dir::Ping,
                    waiting: None,
                };
                // Answer only once the pong publisher serves the main process's subscriber: on
                // another machine that takes a challenge round trip, and a reliable publisher keeps
                // for a subscriber only what it sends after it has proven itself.
                let deadline = Instant::now() + START_TIMEOUT;
                while end.out.subscriber_count() == 0 {
                    end.inp.publisher_count();
                    main_alive()?;
                    if Instant::now() >= deadline {
                        bail!(
                            "the main process's subscriber was not seen within {START_TIMEOUT:?}"
                        );
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                echo(&mut end, &args, &mut main_alive)?;
                // The main process drops its publisher first (see `run_transport`): answer it until
                // it is gone, at most a few seconds.
                let deadline = Instant::now() + START_TIMEOUT;
                while end.inp.publisher_count() > 0 && Instant::now() < deadline {
                    let _ = end.inp.recv_timeout(Duration::from_millis(1))?;
                    main_alive()?;
                }
                Ok(())
            }
            Kind::FerryService => {
                let Some(FerryTopics { domain, ping, .. }) = &args.ferry else {
                    bail!("a ferry service needs its domain and name");
                };
                let qos = args
                    .transport
                    .ferry_qos(args.max_size)
                    .expect("a ferry transport has a QoS");
                let node = super::lab_node_reaching(
                    "lab-peer",
                    domain,
                    false,
                    super::discovery_reaching(None),
                )?;
                let server = node.server(ping, &qos)?;
                let mut end = ServerEnd {
                    server,
                    answer_to: None,
                    out_dir: Dir::Pong,
                    in_dir: Dir::Ping,
                };
                echo(&mut end, &args, &mut main_alive)
            }
            Kind::RawShm { futex } => {
                let Some(name) = &args.shm else {
                    bail!("a raw shared-memory transport needs its channel's name");
                };
                let chan = RawChannel::open(name, args.max_size)?;
                let mut end = chan.endpoint(Dir::Pong, futex);
                echo(&mut end, &args, &mut main_alive)
            }
            Kind::RawUdp => {
                let Some(main) = args.udp else {
                    bail!("raw-udp4 needs the main process's address");
                };
                let mut end = RawUdpEnd::connect(main, args.max_size)?;
                echo(&mut end, &args, &mut main_alive)
            }
        }
    }

    fn table(results: &Results<Self>) -> String {
        let setup: &Setup = &results.config;
        let rows: &[Row] = &results.rows;
        let mut table = Table::new(&[
            "transport",
            ">size",
            ">samples",
            ">p50",
            ">p90",
            ">p99",
            ">p99.9",
            ">max",
            ">mean",
            "p50 / baseline: median of rounds (range)",
        ]);
        for row in rows {
            let Some(s) = &row.summary else {
                let mut cells = vec![row.transport.name().to_owned(), format_size(row.size_bytes)];
                cells.extend(vec![String::new(); 7]);
                cells.push(row.skipped.clone().unwrap_or_default());
                table.row(cells);
                continue;
            };
            let versus = match (row.baseline, row.p50_ratio) {
                (Some(base), Some(r)) => {
                    let per_round: Vec<f64> =
                        row.rounds.iter().filter_map(|r| r.p50_ratio).collect();
                    let lo = per_round.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = per_round.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    if per_round.len() > 1 {
                        format!("{r:.2} × {} ({lo:.2}–{hi:.2})", base.name())
                    } else {
                        format!("{r:.2} × {}", base.name())
                    }
                }
                // A floor; another system whose counterpart did not run has no ratio, as ferry's.
                _ if row.transport.baseline().is_none() => "(baseline)".to_owned(),
                _ => "-".to_owned(),
            };
            table.row(vec![
                row.transport.name().to_owned(),
                format_size(row.size_bytes),
                s.samples.to_string(),
                format_ns(s.p50_ns as f64),
                format_ns(s.p90_ns as f64),
                format_ns(s.p99_ns as f64),
                format_ns(s.p999_ns as f64),
                format_ns(s.max_ns as f64),
                format_ns(s.mean_ns),
                versus,
            ]);
        }
        let mut out = format!(
        "\nOne-way latency (round trip / 2), {} samples per row in {} interleaved rounds; {}.\n\n{}",
        setup.samples_per_size,
        setup.rounds,
        setup.pinning.describe(),
        table.render()
    );
        let note = state_note(rows);
        if !note.is_empty() {
            let _ = writeln!(out, "\n{note}");
        }
        out
    }

    /// The summary's lines: at the smallest size, ferry's best shared-memory and UDP transports
    /// beside their floors and the studies' figures.
    fn summary(results: &Results<Latency>) -> Vec<SummaryLine> {
        let Some(&size) = results.rows.iter().map(|r| &r.size_bytes).min() else {
            return Vec::new();
        };
        let at_size = || results.rows.iter().filter(move |r| r.size_bytes == size);
        let p50 = |r: &Row| r.summary.as_ref().map(|s| s.p50_ns);
        // The fastest measured row among `family`.
        let best = |family: &dyn Fn(Subject) -> bool| {
            at_size()
                .filter(|r| family(r.transport))
                .filter_map(|r| Some((p50(r)?, r)))
                .min_by_key(|(p, _)| *p)
        };
        let mut lines = Vec::new();
        /// A family's name, its ferry transports, its floors, and the study's figure.
        type Family = (
            &'static str,
            fn(Subject) -> bool,
            fn(Subject) -> bool,
            Option<String>,
        );
        let families: [Family; 2] = [
        (
            "shared memory",
            |t| t.is_ferry_shm(),
            |t| matches!(t, Subject::RawSpin | Subject::RawFutex),
            Some(format!(
                "shared memory faster than UDP at every size, 32 B to 1 MB (no figures in the text): {}",
                cite(&SHM_STREAM)
            )),
        ),
        (
            "UDP",
            |t| matches!(t, Subject::Udp4 | Subject::Udp6),
            |t| t == Subject::RawUdp4,
            Some(format!(
                "under 50 µs below 1 KB, DDS over Gigabit Ethernet between two machines: {}",
                cite(&VORTEX_LITE)
            )),
        ),
    ];
        for (what, ferry, floor, study) in families {
            let Some((ns, row)) = best(&ferry) else {
                continue;
            };
            let ratio = row
                .p50_ratio
                .zip(row.baseline)
                .map_or(String::new(), |(r, b)| format!(", {r:.2}× {}", b.name()));
            lines.push(SummaryLine {
                what: format!("one-way latency p50, {}, {what}", format_size(size)),
                ferry: format!("{} ({}{ratio})", format_ns(ns as f64), row.transport.name()),
                floor: best(&floor)
                    .map(|(ns, r)| format!("{} ({})", format_ns(ns as f64), r.transport.name())),
                best_peer: (what == "shared memory")
                    .then(|| best(&|t| t.kind() == Kind::Peer))
                    .flatten()
                    .map(|(ns, r)| format!("{} ({})", format_ns(ns as f64), r.transport.name())),
                study,
            });
        }
        lines
    }

    fn section(results: &Results<Self>) -> Result<Section> {
        let cells: Vec<_> = results
            .rows
            .iter()
            .map(|r| {
                (
                    r.transport.name().to_owned(),
                    r.size_bytes,
                    r.summary.as_ref().map(Glyph::of_summary),
                )
            })
            .collect();
        let (svg, phrase) = size_boxes(
            "One-way latency by message size (log scale)",
            "one-way latency (round trip / 2)",
            &cells,
        )?;
        Ok(Section {
            plots: vec![Plot {
                file: "latency.svg".to_owned(),
                svg,
                caption: "Box: p50 (black line) to p90; whiskers: min and p99; dot: p99.9. One colour per transport; raw-* are the hardware floors measured in the same rounds.".to_owned(),
            }],
            sentence: format!(
                "{} found both shared-memory streams faster than UDP IPv4/IPv6 at 32 B, 1 KB, 32 KB and 1 MB on an i7-9750H, the spinning one fastest; {} reports under 50 µs one-way below 1 KB across Gigabit Ethernet. Here, one-way p50 {phrase}.{}{}{}",
                cite_first(&SHM_STREAM),
                cite(&VORTEX_LITE),
                services_beside_ping_pong(&results.rows),
                versus_peers(&results.rows),
                match state_note(&results.rows) {
                    note if note.is_empty() => note,
                    note => format!(" {note}"),
                }
            ),
        })
    }
}

/// " ferry's services (request and response) beside its ping-pong of two topics …": for each
/// service transport that ran, its p50 as a ratio to the ping-pong that waits the same way (the
/// median over rounds) and the nanoseconds it adds at p50, per size; empty when none ran.
fn services_beside_ping_pong(rows: &[Row]) -> String {
    let mut parts = Vec::new();
    for t in [Subject::ShmSpinRr, Subject::ShmBlockRr, Subject::Udp4Rr] {
        let Some(base) = t.baseline() else { continue };
        let sizes: Vec<String> = rows
            .iter()
            .filter(|r| r.transport == t)
            .filter_map(|r| {
                let ratio = r.p50_ratio?;
                let own = r.summary.as_ref()?.p50_ns as f64;
                let beside = r.baseline_beside.as_ref()?.p50_ns as f64;
                Some(format!(
                    "{ratio:.2} × at {} ({} {})",
                    format_size(r.size_bytes),
                    if own >= beside { "+" } else { "−" },
                    format_ns((own - beside).abs())
                ))
            })
            .collect();
        if !sizes.is_empty() {
            parts.push(format!(
                "{} against {}: {}",
                t.name(),
                base.name(),
                sizes.join(", ")
            ));
        }
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!(
            " ferry's services (one request and its response per round trip) beside its ping-pong of two topics that waits the same way, p50 as the median ratio over rounds (and the p50 difference): {}.",
            parts.join("; ")
        ),
    }
}

/// " ferry (shm-spin) against iceoryx2, ...": for each other system that ran, where ferry's
/// shared memory that waits the same way (shm-spin; shm-block for iceoryx2-block; its spinning
/// service shm-spin-rr for the request/response of iceoryx2-rr and zenoh-rr) is ahead,
/// level or behind at p50 and p99 (each named where the two differ), with the p99.9 ratio beside
/// them, from the rows; empty when none ran beside it.
fn versus_peers(rows: &[Row]) -> String {
    let find = |t: Subject, size: usize| {
        rows.iter()
            .find(|r| r.transport == t && r.size_bytes == size)
            .and_then(|r| r.summary.as_ref())
    };
    let mut out = String::new();
    let mut peers: Vec<Subject> = rows
        .iter()
        .map(|r| r.transport)
        .filter(|t| t.kind() == Kind::Peer)
        .collect();
    peers.dedup();
    for peer in peers {
        let Some(ferry) = peer.ferry_counterpart() else {
            continue;
        };
        // Ahead, level and behind first; then each split of the two percentiles met, in order.
        let mut groups: Vec<(String, Vec<String>)> = ["ahead", "level", "behind"]
            .map(|word| (word.to_owned(), Vec::new()))
            .into();
        for row in rows.iter().filter(|r| r.transport == peer) {
            // ferry as run beside this row (see `Row::baseline_beside`), else its own row.
            let beside = row
                .baseline_beside
                .as_ref()
                .filter(|_| row.baseline == Some(ferry));
            let (Some(theirs), Some(ours)) = (
                row.summary.as_ref(),
                beside.or_else(|| find(ferry, row.size_bytes)),
            ) else {
                continue;
            };
            // p50 as the table gives it (the median over rounds of the ratio in each round)
            // where this row ran beside ferry; p99 from the pooled samples.
            let p50 = row
                .p50_ratio
                .filter(|_| row.baseline == Some(ferry))
                .unwrap_or(theirs.p50_ns as f64 / ours.p50_ns.max(1) as f64);
            let p99 = theirs.p99_ns as f64 / ours.p99_ns.max(1) as f64;
            // Given beside the others, not judged: a few samples in a thousand set it.
            let p999 = theirs.p999_ns as f64 / ours.p999_ns.max(1) as f64;
            // Within 2 % is level. Where the two percentiles disagree, the row says both
            // (a peer faster at p50 and slower at p99 is neither ahead nor level).
            let word = |ratio: f64| match ratio {
                r if r > 1.02 => "ahead",
                r if r < 0.98 => "behind",
                _ => "level",
            };
            let group = match (word(p50), word(p99)) {
                (at50, at99) if at50 == at99 => at50.to_owned(),
                (at50, at99) => format!("{at50} at p50 and {at99} at p99"),
            };
            let i = match groups.iter().position(|(word, _)| *word == group) {
                Some(i) => i,
                None => {
                    groups.push((group, Vec::new()));
                    groups.len() - 1
                }
            };
            groups[i].1.push(format!(
                "{} ({p50:.2} × / {p99:.2} × / {p999:.2} ×)",
                format_size(row.size_bytes)
            ));
        }
        let said: Vec<String> = groups
            .iter()
            .filter(|(_, sizes)| !sizes.is_empty())
            .map(|(word, sizes)| format!("{word} at {}", sizes.join(", ")))
            .collect();
        if !said.is_empty() {
            let _ = write!(
                out,
                " ferry ({}) against {} in the same rounds ({} p50 / p99 / p99.9 over ferry's): {}.",
                ferry.name(),
                peer.name(),
                peer.name(),
                said.join("; ")
            );
        }
    }
    out
}

/// A sentence naming the rows whose rounds ran in different states of the machine (see
/// `state_changes`); empty when there are none.
fn state_note(rows: &[Row]) -> String {
    let changed = state_changes(rows);
    if changed.is_empty() {
        return String::new();
    }
    format!(
        "Rounds far apart (one round's p50 more than {STATE_CHANGE} × another's): {}. The machine \
         changed state during the run (a shared virtual machine does), so these rows' pooled \
         figures mix two states; compare them round by round (`rounds` in the JSON), each against \
         the baseline of its own round.",
        changed.join("; ")
    )
}

/// How far apart two rounds of one row may lie (p50 over p50) before the table says that the
/// machine changed state between them. Rounds of a calm machine differ by tens of percent; the
/// development VM's swings are 3–17 ×.
const STATE_CHANGE: f64 = 3.0;

/// "raw-spin at 1 MiB (46.5 µs to 468 µs)" for each row whose rounds' p50 lie more than
/// `STATE_CHANGE` times apart.
fn state_changes(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .filter_map(|row| {
            let p50 = || row.rounds.iter().map(|r| r.summary.p50_ns);
            let (lo, hi) = (p50().min()?, p50().max()?);
            (hi as f64 > STATE_CHANGE * lo.max(1) as f64).then(|| {
                format!(
                    "{} at {} ({} to {})",
                    row.transport.name(),
                    format_size(row.size_bytes),
                    format_ns(lo as f64),
                    format_ns(hi as f64)
                )
            })
        })
        .collect()
}

/// Results of a small made-up run, for the report's tests.
#[cfg(test)]
pub(crate) fn example() -> Results<Latency> {
    example_with([
        [[[200, 210], [190, 220]], [[900, 950], [920, 940]]],
        [[[300, 320], [310, 290]], [[1000, 1100], [990, 1010]]],
    ])
}

/// The rows of a made-up run of `transports` at `sizes`: one-way times (ns) as
/// `samples[transport][size][round]`, the rounds and the samples per size taken from them.
#[cfg(test)]
fn rows_of(transports: &[Subject], sizes: &[usize], mut samples: Samples) -> Vec<Row> {
    let config = Config {
        transports: transports.to_vec(),
        sizes: sizes.to_vec(),
        samples: samples[0][0].iter().map(Vec::len).sum(),
        rounds: samples[0][0].len(),
        ..Config::default()
    };
    build_rows(&config, &mut samples, &References::new(), &Warmed::new())
}

/// A made-up run of raw-spin and shm at 32 B and 1 KiB, two rounds of two samples each:
/// `ns[transport][size][round]`.
#[cfg(test)]
fn example_with(ns: [[[[u64; 2]; 2]; 2]; 2]) -> Results<Latency> {
    let config = Config {
        transports: vec![Subject::RawSpin, Subject::Shm],
        sizes: vec![32, 1024],
        samples: 4,
        rounds: 2,
        ..Config::default()
    };
    let mut samples: Samples = ns
        .iter()
        .map(|sizes| {
            sizes
                .iter()
                .map(|rounds| rounds.iter().map(|r| r.to_vec()).collect())
                .collect()
        })
        .collect();
    let rows = build_rows(&config, &mut samples, &References::new(), &Warmed::new());
    let setup = Setup {
        transports: config.transports.clone(),
        transport_descriptions: Default::default(),
        sizes: config.sizes.clone(),
        samples_per_size: config.samples,
        rounds: config.rounds,
        warmup: Warmup {
            min_round_trips: 0,
            round_trips_per_size: vec![0, 0],
            rule: String::new(),
        },
        pinning: Pinning::None {
            reason: "example".to_owned(),
        },
        one_way: String::new(),
        clock: String::new(),
        processes: String::new(),
        ferry: FerryConfig {
            delivery: "reliable".to_owned(),
            max_message_size: 1024,
            ring_capacity_bytes: None,
            udp_mtu: UDP_MTU,
            send: String::new(),
            receive: String::new(),
        },
        skipped: Vec::new(),
        started_unix_s: 0,
    };
    Results::new(crate::Machine::probe(), config, Measured { setup, rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_rows_whose_rounds_ran_in_different_states_of_the_machine() {
        let calm = example();
        assert!(
            !Latency::table(&calm).contains("Rounds far apart"),
            "rounds within tens of percent are not flagged"
        );
        // raw-spin at 1 KiB: 900 ns in one round, 9.5 µs in the other.
        let stormy = example_with([
            [[[200, 210], [190, 220]], [[900, 950], [9_400, 9_500]]],
            [[[300, 320], [310, 290]], [[1000, 1100], [990, 1010]]],
        ]);
        let changed = state_changes(&stormy.rows);
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert!(
            changed[0].starts_with("raw-spin at 1 KiB ("),
            "{}",
            changed[0]
        );
        let table = Latency::table(&stormy);
        assert!(table.contains("Rounds far apart"), "{table}");
        assert!(table.contains("raw-spin at 1 KiB"), "{table}");
        // The report's section says it too.
        let section = Latency::section(&stormy).expect("section");
        assert!(
            section.sentence.contains("Rounds far apart"),
            "{}",
            section.sentence
        );
        let section = Latency::section(&calm).expect("section");
        assert!(!section.sentence.contains("Rounds far apart"));
    }

    #[test]
    fn the_section_says_where_ferry_is_ahead_of_another_system_level_or_behind() {
        let rows = rows_of(
            &[Subject::ShmSpin, Subject::Iceoryx2],
            &[32, 1024, 1 << 20],
            vec![
                vec![vec![vec![100; 3]], vec![vec![200; 3]], vec![vec![1000; 3]]],
                vec![vec![vec![250; 3]], vec![vec![201; 3]], vec![vec![500; 3]]],
            ],
        );
        let iceoryx2 = rows
            .iter()
            .find(|r| r.transport == Subject::Iceoryx2)
            .unwrap();
        assert_eq!(iceoryx2.baseline, Some(Subject::ShmSpin));
        assert_eq!(
            versus_peers(&rows),
            " ferry (shm-spin) against iceoryx2 in the same rounds (iceoryx2 p50 / p99 / p99.9 \
             over ferry's): ahead at 32 B (2.50 × / 2.50 × / 2.50 ×); level at 1 KiB (1.00 × / \
             1.00 × / 1.00 ×); behind at 1 MiB (0.50 × / 0.50 × / 0.50 ×)."
        );
        assert_eq!(versus_peers(&example().rows), "", "no other system ran");
    }

    #[test]
    fn a_peer_faster_at_p50_and_slower_at_p99_is_neither_ahead_nor_level() {
        // At 1 MiB the peer's p50 is 0.57 × ferry's and its p99 4.5 ×; at 32 B it takes 3 × both.
        let rows = rows_of(
            &[Subject::ShmSpin, Subject::ZenohShm],
            &[32, 1 << 20],
            vec![
                vec![vec![vec![100; 4]], vec![vec![1000, 1000, 1000, 2000]]],
                vec![vec![vec![300; 4]], vec![vec![570, 570, 570, 9000]]],
            ],
        );
        let peer = |size: usize| {
            rows.iter()
                .find(|r| r.transport == Subject::ZenohShm && r.size_bytes == size)
                .and_then(|r| r.summary.as_ref())
                .unwrap()
        };
        assert_eq!((peer(1 << 20).p50_ns, peer(1 << 20).p99_ns), (570, 9000));
        assert_eq!(
            versus_peers(&rows),
            " ferry (shm-spin) against zenoh-shm in the same rounds (zenoh-shm p50 / p99 / p99.9 \
             over ferry's): ahead at 32 B (3.00 × / 3.00 × / 3.00 ×); behind at p50 and ahead at \
             p99 at 1 MiB (0.57 × / 4.50 × / 4.50 ×)."
        );
    }

    #[test]
    fn other_systems_request_response_stands_against_ferrys_spinning_service() {
        use Subject::*;
        for peer in [Iceoryx2Rr, ZenohRr] {
            assert_eq!(peer.kind(), Kind::Peer);
            assert_eq!(peer.baseline(), Some(ShmSpinRr));
            assert_eq!(peer.ferry_counterpart(), Some(ShmSpinRr));
        }
        // ferry's service runs before them, after its own baseline.
        let given = [ZenohRr, Iceoryx2Rr, ShmSpinRr, ShmSpin];
        let order: Vec<Subject> = run_order(&given).into_iter().map(|i| given[i]).collect();
        assert_eq!(order, [ShmSpin, ShmSpinRr, ZenohRr, Iceoryx2Rr]);
        // At 1 KiB zenoh-rr's p50 is 0.80 × ferry's service's and its p99 10 ×.
        let rows = rows_of(
            &[ShmSpin, ShmSpinRr, Iceoryx2Rr, ZenohRr],
            &[32, 1024],
            vec![
                vec![vec![vec![100; 4]], vec![vec![200; 4]]],
                vec![vec![vec![120; 4]], vec![vec![250; 4]]],
                vec![vec![vec![300; 4]], vec![vec![250; 4]]],
                vec![vec![vec![6000; 4]], vec![vec![200, 200, 200, 2500]]],
            ],
        );
        let zenoh_rr = rows
            .iter()
            .find(|r| r.transport == ZenohRr && r.size_bytes == 1024)
            .unwrap();
        assert_eq!(zenoh_rr.baseline, Some(ShmSpinRr));
        assert_eq!(zenoh_rr.p50_ratio, Some(0.8));
        assert_eq!(
            versus_peers(&rows),
            " ferry (shm-spin-rr) against iceoryx2-rr in the same rounds (iceoryx2-rr p50 / p99 / \
             p99.9 over ferry's): ahead at 32 B (2.50 × / 2.50 × / 2.50 ×); level at 1 KiB (1.00 × \
             / 1.00 × / 1.00 ×). ferry (shm-spin-rr) against zenoh-rr in the same rounds (zenoh-rr \
             p50 / p99 / p99.9 over ferry's): ahead at 32 B (50.00 × / 50.00 × / 50.00 ×); behind \
             at p50 and ahead at p99 at 1 KiB (0.80 × / 10.00 × / 10.00 ×)."
        );
        // Without ferry's service beside them, nothing is said of them.
        let alone = rows_of(
            &[ShmSpin, Iceoryx2Rr],
            &[32],
            vec![vec![vec![vec![100; 4]]], vec![vec![vec![300; 4]]]],
        );
        assert_eq!(versus_peers(&alone), "");
    }

    #[test]
    fn services_are_set_beside_the_ping_pong_that_waits_the_same_way() {
        let rows = rows_of(
            &[Subject::ShmSpin, Subject::ShmSpinRr, Subject::ShmBlock],
            &[32],
            vec![
                vec![vec![vec![100; 4]]],
                vec![vec![vec![110; 4]]],
                vec![vec![vec![9000; 4]]],
            ],
        );
        assert_eq!(
            services_beside_ping_pong(&rows),
            " ferry's services (one request and its response per round trip) beside its \
             ping-pong of two topics that waits the same way, p50 as the median ratio over rounds \
             (and the p50 difference): shm-spin-rr against shm-spin: 1.10 × at 32 B (+ 10 ns)."
        );
        // No service ran: nothing said.
        assert_eq!(services_beside_ping_pong(&rows[..1]), "");
    }

    #[test]
    fn the_sentence_judges_p50_by_the_median_over_rounds_as_the_table_does() {
        // Per round the peer takes 1.1, 0.9 and 2.5 × ferry's p50: 1.1 × over the rounds. All
        // rounds pooled, its p50 (180) is below ferry's (200).
        let rows = rows_of(
            &[Subject::ShmSpin, Subject::Iceoryx2],
            &[32],
            vec![
                vec![vec![vec![100; 4], vec![200; 4], vec![400; 4]]],
                vec![vec![vec![110; 4], vec![180; 4], vec![1000; 4]]],
            ],
        );
        assert_eq!(rows[1].p50_ratio_pooled, Some(0.9));
        assert_eq!(
            versus_peers(&rows),
            " ferry (shm-spin) against iceoryx2 in the same rounds (iceoryx2 p50 / p99 / p99.9 \
             over ferry's): ahead at 32 B (1.10 × / 2.50 × / 2.50 ×)."
        );
    }

    #[test]
    fn iceoryx2_block_stands_against_ferrys_blocking_shm() {
        let rows = rows_of(
            &[Subject::ShmBlock, Subject::Iceoryx2Block],
            &[32],
            vec![vec![vec![vec![100; 3]]], vec![vec![vec![300; 3]]]],
        );
        assert_eq!(Subject::Iceoryx2Block.baseline(), Some(Subject::ShmBlock));
        assert_eq!(rows[1].p50_ratio, Some(3.0));
        assert_eq!(Subject::Iceoryx2Block.kind(), Kind::Peer);
        assert_eq!(
            versus_peers(&rows),
            " ferry (shm-block) against iceoryx2-block in the same rounds (iceoryx2-block p50 / \
             p99 / p99.9 over ferry's): ahead at 32 B (3.00 × / 3.00 × / 3.00 ×)."
        );
    }

    #[test]
    fn baselines_run_first_in_a_round() {
        use Subject::*;
        let given = [
            Zenoh,
            ShmSpin,
            Iceoryx2Block,
            RawSpin,
            ShmBlock,
            Udp4Key,
            Udp4,
        ];
        let order: Vec<Subject> = run_order(&given).into_iter().map(|i| given[i]).collect();
        // raw-futex and raw-udp4 do not run: shm-block and udp4 go first, with raw-spin.
        assert_eq!(
            order,
            [
                RawSpin,
                ShmBlock,
                Udp4,
                ShmSpin,
                Iceoryx2Block,
                Udp4Key,
                Zenoh
            ]
        );
    }

    #[test]
    fn a_warm_up_after_the_first_run_lasts_about_two_seconds_at_most() {
        let full = [131_072, 4_096, 200];
        // Before its first run a transport gets the full counts.
        let zenoh = |rtt: &[Option<u64>]| warmups_for(Subject::Zenoh, &full, 200, rtt);
        assert_eq!(zenoh(&[None; 3]), full);
        // Round trips of 200 ns and 500 ns fit far more than the counts in 2 s.
        assert_eq!(zenoh(&[Some(200), Some(500), Some(100_000)]), full);
        // Zenoh: 100 µs round trips, 20 000 in 2 s; never below --warmup; a size without a
        // figure keeps its count.
        assert_eq!(
            zenoh(&[Some(100_000), Some(50_000_000), None]),
            [20_000, 200, 200]
        );
        // ferry's shared memory keeps the whole lap of its ring, even asleep (45 µs round trips);
        // its floor does not write a ring and is cut like any other.
        let slow = [Some(45_000), Some(45_000), Some(45_000)];
        assert_eq!(warmups_for(Subject::ShmBlock, &full, 200, &slow), full);
        assert_eq!(
            warmups_for(Subject::RawFutex, &full, 200, &slow),
            [44_444, 4_096, 200]
        );
        assert_eq!(rtt_of(&[30, 10, 20]), Some(40));
        assert_eq!(rtt_of(&[]), None);
        // Each round's count travels with its row.
        let config = Config {
            transports: vec![Subject::Zenoh],
            sizes: vec![32],
            samples: 4,
            rounds: 2,
            ..Config::default()
        };
        let mut samples: Samples = vec![vec![vec![vec![50_000; 2], vec![50_000; 2]]]];
        let references: References = vec![vec![vec![None, None]]];
        let warmed: Warmed = vec![vec![vec![Some(131_072), Some(20_000)]]];
        let rows = build_rows(&config, &mut samples, &references, &warmed);
        let counts: Vec<_> = rows[0]
            .rounds
            .iter()
            .map(|r| r.warmup_round_trips)
            .collect();
        assert_eq!(counts, [Some(131_072), Some(20_000)]);
        let value = serde_json::to_value(&rows[0]).unwrap();
        assert_eq!(value["rounds"][1]["warmup_round_trips"], 20_000);
    }

    #[test]
    fn a_row_is_compared_with_the_baseline_run_beside_it() {
        let config = Config {
            transports: vec![Subject::ShmSpin, Subject::Zenoh],
            sizes: vec![32],
            samples: 6,
            rounds: 2,
            ..Config::default()
        };
        // ferry's own runs: 100 ns, then 400 ns (the machine slowed down during the Zenoh run of
        // round 2, and a run of ferry right after it found 200 ns).
        let mut samples: Samples = vec![
            vec![vec![vec![100; 3], vec![400; 3]]],
            vec![vec![vec![300; 3], vec![1000; 3]]],
        ];
        let references: References =
            vec![vec![vec![None, None]], vec![vec![None, Some(vec![200; 3])]]];
        let rows = build_rows(&config, &mut samples, &references, &Warmed::new());
        let zenoh = &rows[1];
        assert_eq!(zenoh.rounds[0].p50_ratio, Some(3.0));
        assert!(zenoh.rounds[0].reference.is_none());
        assert_eq!(zenoh.rounds[1].p50_ratio, Some(5.0));
        assert_eq!(zenoh.rounds[1].reference.map(|r| r.p50_ns), Some(200));
        assert_eq!(zenoh.p50_ratio, Some(4.0));
        let beside = zenoh.baseline_beside.unwrap();
        assert_eq!(
            (beside.samples, beside.min_ns, beside.max_ns),
            (6, 100, 200)
        );
        assert!(
            versus_peers(&rows).contains("ahead at 32 B"),
            "{}",
            versus_peers(&rows)
        );
        // ferry's own row keeps its own runs.
        assert_eq!(rows[0].summary.unwrap().max_ns, 400);
        // The references travel with the results.
        let value = serde_json::to_value(&rows[1]).unwrap();
        let back: Row = serde_json::from_value(value).unwrap();
        assert_eq!(back.rounds[1].reference.map(|r| r.p50_ns), Some(200));
    }

    #[test]
    fn example_results_read_back_and_draw() {
        let results = example();
        let value = serde_json::to_value(&results).unwrap();
        let back = Results::<Latency>::from_value(value).unwrap();
        assert_eq!(back.rows.len(), 4);
        let shm = &back.rows[2];
        assert_eq!((shm.transport, shm.size_bytes), (Subject::Shm, 32));
        assert_eq!(shm.baseline, Some(Subject::RawSpin));
        assert!(shm.p50_ratio.is_some_and(|r| r > 1.0));
        let section = Latency::section(&back).unwrap();
        assert_eq!(section.plots.len(), 1);
        assert!(section.plots[0].svg.contains("raw-spin"));
        assert!(Latency::table(&back).contains("× raw-spin"));
        let lines = Latency::summary(&back);
        assert_eq!(lines.len(), 1, "shared memory only: {lines:?}");
        assert_eq!(lines[0].what, "one-way latency p50, 32 B, shared memory");
        assert!(lines[0].ferry.contains("(shm, "), "{}", lines[0].ferry);
        assert!(lines[0]
            .floor
            .as_deref()
            .is_some_and(|f| f.contains("raw-spin")));
        assert!(lines[0]
            .study
            .as_deref()
            .is_some_and(|s| s.contains("cpp-shm-stream") || s.contains("Kabashima")));
    }

    #[test]
    fn transports_parse() {
        for &t in Subject::ALL {
            assert_eq!(t.name().parse(), Ok(t));
        }
        let err = "udp5".parse::<Subject>().unwrap_err();
        assert!(
            err.contains("raw-udp4") && err.contains("raw-futex"),
            "{err}"
        );
    }

    #[test]
    fn udp_transports() {
        assert_eq!(Subject::Udp4.baseline(), Some(Subject::RawUdp4));
        assert_eq!(Subject::Udp6.baseline(), Some(Subject::RawUdp4));
        assert!(Subject::RawUdp4.cannot_carry(65_507).is_none());
        assert!(Subject::RawUdp4.cannot_carry(65_508).is_some());
        assert!(Subject::Udp4.cannot_carry(1 << 20).is_none());
        let qos = Subject::Udp6.ferry_qos(100).unwrap();
        assert_eq!(qos.transport, ferry::Transport::Udp);
        assert_eq!(qos.ip_version, IpVersion::V6);
        assert_eq!(qos.wait, WaitStrategy::Block);
        assert!(Subject::RawUdp4.ferry_qos(100).is_none());
    }

    #[test]
    fn rounds_split_samples() {
        let split: Vec<usize> = (0..3).map(|r| samples_in_round(10, 3, r)).collect();
        assert_eq!(split, [4, 3, 3]);
        assert_eq!(
            (0..5)
                .map(|r| samples_in_round(10_000, 5, r))
                .sum::<usize>(),
            10_000
        );
    }
}
