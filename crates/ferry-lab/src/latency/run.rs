//! The main side: for each round, size and transport, a ping-pong with the peer process, its baselines first.

use super::options::{
    ferry_qos, Config, Kind, Latency, LatencySubject, REPLY_TIMEOUT, START_TIMEOUT,
};
use super::peer::{FerryTopics, PeerRequest};
use crate::baseline::{baselines_first, BASELINE_GAP};
use crate::error::{bail, note, Context, Result};
use crate::peer::{Peer, Place};
use crate::raw::RawChannel;
use crate::rawudp::{self, RawUdpEnd};
use crate::signal;
use crate::subject::Subject;
use crate::units::format_size;
use crate::{await_message, verify, Dir, Endpoint, Pinning};
use ferry::{Node, Publisher, Subscriber, WaitStrategy};
use std::time::{Duration, Instant};

/// Recorded round trips of round `round`: the samples split evenly, the first rounds taking the
/// remainder.
pub(super) fn samples_in_round(samples: usize, rounds: usize, round: usize) -> usize {
    samples / rounds + usize::from(round < samples % rounds)
}

/// What the lab needs to run one transport's share of a round.
pub(super) struct Ctx<'a> {
    pub(super) args: &'a Config,
    pub(super) domain: String,
    pub(super) max_size: usize,
    pub(super) pinning: &'a Pinning,
    /// Unrecorded round trips, per size, before any cut (see `warmups_for`).
    pub(super) warmups: Vec<usize>,
    /// Counts transport runs, to name their topics and objects uniquely.
    pub(super) run_index: usize,
    /// The two machines of a `--remote` run.
    pub(super) machines: Option<crate::TwoMachines>,
}

/// One-way latencies in ns, by transport, size and round (rounds are pushed in order).
pub(super) type Samples = Vec<Vec<Vec<Vec<u64>>>>;

/// Runs of a row's baseline made right after the row, by transport, size and round (`None`
/// where the row was compared with the baseline's own run of that round).
pub(super) type References = Vec<Vec<Vec<Option<Vec<u64>>>>>;

/// Unrecorded round trips before each run's samples, by transport, size and round (`None` where
/// the size was not run).
pub(super) type Warmed = Vec<Vec<Vec<Option<usize>>>>;

/// The round trip (ns) of a run: twice its median one-way latency.
pub(super) fn rtt_of(one_way: &[u64]) -> Option<u64> {
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
pub(super) const WARMUP_TIME: Duration = Duration::from_secs(2);

/// The warm-up of each size for `transport` in its next run (`full` counts, never cut below
/// `min`), after a run whose median round trips (ns) were `last_rtt` (none before its first run,
/// which gets the full counts).
pub(super) fn warmups_for(
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
pub(super) fn run_order(transports: &[Subject]) -> Vec<usize> {
    baselines_first(transports, |t| t.baseline().into_iter().collect())
}

/// Runs every round: each transport in turn (`run_order`), every size. A row whose baseline's
/// last run in the round ended more than `BASELINE_GAP` before it is followed by another run of
/// the baseline, which it is compared with (`references`).
pub(super) fn measure(
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
pub(super) fn run_one(
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
pub(super) fn run_transport(
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
            let node = crate::lab_node_reaching(
                "lab-main",
                &ctx.domain,
                transport.keyed(),
                crate::discovery_reaching(there),
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
            let node = crate::lab_node_reaching(
                "lab-main",
                &ctx.domain,
                false,
                crate::discovery_reaching(None),
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
pub(super) fn ferry_ring_capacity(domain: &str, max_size: usize) -> Result<usize> {
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

pub(super) fn topics(run_index: usize) -> (String, String) {
    (format!("ping{run_index}"), format!("pong{run_index}"))
}

/// The main side: `warmups[i] + recorded` round trips for size `i`; returns the recorded
/// one-way latencies (ns) per size.
pub(super) fn drive<E: Endpoint>(
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
pub(super) struct FerryEnd {
    pub(super) out: Publisher,
    pub(super) inp: Subscriber,
    pub(super) out_dir: Dir,
    pub(super) in_dir: Dir,
    /// shm-block-waitset: the replies are waited for in a wait set, beside idle subscribers.
    pub(super) waiting: Option<WaitSetRecv>,
}

/// A wait set and the idle subscribers it waits on beside the reply's (`IDLE_BESIDE` of them).
pub(super) struct WaitSetRecv {
    pub(super) set: ferry::WaitSet,
    pub(super) idle: Vec<Subscriber>,
}

/// Idle subscribers in shm-block-waitset's wait set, beside the one that gets the replies.
pub(super) const IDLE_BESIDE: usize = 7;

impl Endpoint for FerryEnd {
    fn send(&mut self, seq: u64, len: usize) -> Result<()> {
        let mut loan = self.out.loan(len)?;
        crate::fill(loan.as_mut_slice(), crate::pattern(seq, self.out_dir));
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
pub(super) struct ClientEnd {
    pub(super) client: ferry::Client,
    pub(super) out_dir: Dir,
    pub(super) in_dir: Dir,
}

impl Endpoint for ClientEnd {
    fn send(&mut self, seq: u64, len: usize) -> Result<()> {
        let mut loan = self.client.loan_request(len)?;
        crate::fill(loan.as_mut_slice(), crate::pattern(seq, self.out_dir));
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
pub(super) struct ServerEnd {
    pub(super) server: ferry::Server,
    pub(super) answer_to: Option<ferry::ReplyTo>,
    pub(super) out_dir: Dir,
    pub(super) in_dir: Dir,
}

impl Endpoint for ServerEnd {
    fn send(&mut self, seq: u64, len: usize) -> Result<()> {
        let Some(to) = self.answer_to.take() else {
            bail!("response {seq} has no request to answer");
        };
        let Some(mut loan) = self.server.loan_response(to, len)? else {
            bail!("the client of request {seq} has gone");
        };
        crate::fill(loan.as_mut_slice(), crate::pattern(seq, self.out_dir));
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
