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

use super::raw::RawChannel;
use super::rawudp::RawUdpEnd;
use super::{Dir, Pinning};
use crate::chart::{Glyph, Section, SizeBoxes, SummaryLine};
use crate::error::{bail, note, Result};
use crate::experiment::{head, Experiment, Measured, Results};
use crate::peer::PeerLink;
use crate::studies::{cite, cite_first, SHM_STREAM, VORTEX_LITE};
use crate::subject::Subject;
use crate::table::Table;
use crate::units::{format_ns, format_size};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

mod options;
mod peer;
mod report;
mod results;
mod run;

pub use options::*;
pub use peer::*;
use report::*;
pub use results::*;
use run::*;

impl Experiment for Latency {
    head!("latency", "One-way latency", across machines);

    fn validate(args: &Config) -> Result<()> {
        SUBJECTS.check("--transport", &args.transports)?;
        crate::experiment::check_sizes(&args.sizes, 1..=MAX_SIZE, "1 byte to 256M")?;
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
        let domain = ctx.domain.clone();
        crate::in_own_domain(&domain, || {
            measure(&mut ctx, &mut samples, &mut references, &mut warmed)
        })?;

        let rows = build_rows(args, &mut samples, &references, &warmed);
        let setup = Setup {
            transports: args.transports.clone(),
            transport_descriptions: crate::subject::descriptions(
                &args.transports,
                LatencySubject::describe,
            ),
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
                let (node, qos) = args.ferry_node(domain, args.transport.keyed(), *main_host)?;
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
                let (node, qos) = args.ferry_node(domain, false, None)?;
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
        let cells = results.rows.iter().map(|r| {
            let glyph = r.summary.as_ref().map(Glyph::of_summary);
            (r.transport.name(), r.size_bytes, glyph)
        });
        BOXES.section(cells, |phrase| {
            format!(
                "{} found both shared-memory streams faster than UDP IPv4/IPv6 at 32 B, 1 KB, 32 KB and 1 MB on an i7-9750H, the spinning one fastest; {} reports under 50 µs one-way below 1 KB across Gigabit Ethernet. Here, one-way p50 {phrase}.{}{}{}",
                cite_first(&SHM_STREAM),
                cite(&VORTEX_LITE),
                services_beside_ping_pong(&results.rows),
                versus_peers(&results.rows),
                match state_note(&results.rows) {
                    note if note.is_empty() => note,
                    note => format!(" {note}"),
                }
            )
        })
    }
}

/// The section's plot.
const BOXES: SizeBoxes = SizeBoxes {
    file: "latency.svg",
    title: "One-way latency by message size (log scale)",
    y_desc: "one-way latency (round trip / 2)",
    caption: "Box: p50 (black line) to p90; whiskers: min and p99; dot: p99.9. One colour per transport; raw-* are the hardware floors measured in the same rounds.",
};

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
mod tests;
