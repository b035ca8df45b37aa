//! Zenoh 1.10 as a transport of the lab: two sessions in peer mode on loopback (the main side
//! listens on a free TCP port of 127.0.0.1, the echo connects to it; no scouting), a publisher
//! and a subscriber each way, the subscriber's FIFO channel polled with `try_recv` in a spin
//! loop. Two systems:
//!
//! - `zenoh`: each message is a fresh `Vec` filled with memset, put (Zenoh takes ownership, no
//!   copy), carried over TCP;
//! - `zenoh-shm`: each message is allocated from a POSIX shared-memory provider (Zenoh's
//!   `ShmProvider`, garbage-collected and blocking when full) and filled in place; put, it
//!   travels as a reference to the segment, which the receiver maps.
//!
//! Publishers are `express` with `Block` congestion control, as Zenoh's own latency example
//! (`z_ping`) is. The receiver checks every byte in place (`to_bytes` borrows a contiguous
//! payload, a shared-memory one included).
//!
//! A third system, `zenoh-rr`, is Zenoh's request/response over the same pair of sessions: the
//! echo declares a queryable, the main side sends each request as the payload of a `get` and
//! spins on its reply channel; the queryable answers with a reply of the same size.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use zenoh::key_expr::KeyExpr;
use zenoh::qos::{CongestionControl, Reliability};
use zenoh::query::ConsolidationMode;
use zenoh::shm::{
    BlockOn, GarbageCollect, PosixShmProviderBackend, ShmProviderBuilder, ZAllocError,
    ZLayoutAllocError,
};
use zenoh::Wait;

use crate::{
    all_equal, check_payload, pin_to, spin_for, throughput, Error, Kid, Plan, MEET_TIMEOUT, TIMEOUT,
};

/// The probe both sides send until the other answers: one byte the runs never send (`byte`
/// gives 1..=255).
const PROBE: u8 = 0;

/// Zenoh's errors (`Send + Sync` boxes) as this binary's.
fn ze(e: zenoh::Error) -> Error {
    e.to_string().into()
}

/// The two ends of one side.
struct Ends {
    _session: zenoh::Session,
    publisher: zenoh::pubsub::Publisher<'static>,
    subscriber:
        zenoh::pubsub::Subscriber<zenoh::handlers::FifoChannelHandler<zenoh::sample::Sample>>,
    /// With `zenoh-shm`: the provider messages are allocated from.
    shm: Option<zenoh::shm::ShmProvider<PosixShmProviderBackend>>,
}

/// A session in peer mode: listening on `endpoint` (the main side) or connecting to it; Zenoh's
/// shared-memory transport on when `shm`.
fn session(endpoint: &str, listen: bool, shm: bool) -> Result<zenoh::Session, Error> {
    let mut config = zenoh::Config::default();
    let set = |c: &mut zenoh::Config, k: &str, v: &str| {
        c.insert_json5(k, v)
            .map_err(|e| format!("zenoh config {k}: {e}"))
    };
    set(&mut config, "mode", "\"peer\"")?;
    let endpoints = format!("[\"{endpoint}\"]");
    if listen {
        set(&mut config, "listen/endpoints", &endpoints)?;
    } else {
        set(&mut config, "connect/endpoints", &endpoints)?;
        // The main side may still be starting.
        set(&mut config, "connect/timeout_ms", "10000")?;
    }
    set(&mut config, "scouting/multicast/enabled", "false")?;
    set(
        &mut config,
        "transport/shared_memory/enabled",
        if shm { "true" } else { "false" },
    )?;
    zenoh::open(config).wait().map_err(ze)
}

/// A POSIX shared-memory provider of `bytes`.
fn provider(bytes: usize) -> Result<zenoh::shm::ShmProvider<PosixShmProviderBackend>, Error> {
    let backend = PosixShmProviderBackend::builder(bytes).wait().map_err(ze)?;
    Ok(ShmProviderBuilder::backend(backend).wait())
}

fn open(
    endpoint: &str,
    listen: bool,
    base: &str,
    main: bool,
    shm_bytes: usize,
) -> Result<Ends, Error> {
    let session = session(endpoint, listen, shm_bytes > 0)?;
    let (out, inp) = if main {
        ("ping", "pong")
    } else {
        ("pong", "ping")
    };
    let publisher = session
        .declare_publisher(format!("{base}/{out}"))
        .congestion_control(CongestionControl::Block)
        .express(true)
        .wait()
        .map_err(ze)?;
    let subscriber = session
        .declare_subscriber(format!("{base}/{inp}"))
        .wait()
        .map_err(ze)?;
    let shm = if shm_bytes > 0 {
        Some(provider(shm_bytes)?)
    } else {
        None
    };
    Ok(Ends {
        _session: session,
        publisher,
        subscriber,
        shm,
    })
}

impl Ends {
    /// Sends `size` bytes of `value`.
    fn send(&self, size: usize, value: u8) -> Result<(), Error> {
        match &self.shm {
            Some(provider) => {
                let mut buf = provider
                    .alloc(size)
                    .with_policy::<BlockOn<GarbageCollect>>()
                    .wait()
                    .map_err(|e| format!("zenoh shm alloc of {size} bytes: {e:?}"))?;
                buf.fill(value);
                self.publisher.put(buf).wait().map_err(ze)?;
            }
            None => self.publisher.put(vec![value; size]).wait().map_err(ze)?,
        }
        Ok(())
    }

    /// Spins for the next message that is not a probe and checks it is `size` bytes of `value`.
    fn recv_check(&self, size: usize, value: u8) -> Result<(), Error> {
        let sample = spin_for("message", || loop {
            // Probes are passed over without counting as a spin.
            match self.subscriber.try_recv().map_err(ze)? {
                Some(s) if s.payload().len() == 1 && s.payload().to_bytes()[0] == PROBE => {}
                got => return Ok(got),
            }
        })?;
        check_payload("message", &sample.payload().to_bytes(), size, value)
    }

    /// Probes until the other side answers (its subscriber and publisher are both matched).
    fn meet(&self) -> Result<(), Error> {
        let start = Instant::now();
        loop {
            if start.elapsed() > MEET_TIMEOUT {
                return Err("the two Zenoh sessions did not meet within 10 s".into());
            }
            self.publisher.put(vec![PROBE]).wait().map_err(ze)?;
            if let Some(sample) = self
                .subscriber
                .recv_timeout(Duration::from_millis(10))
                .map_err(ze)?
            {
                if sample.payload().to_bytes().as_ref() == [PROBE] {
                    return Ok(());
                }
            }
        }
    }

    /// The echo's half of `meet`: answers probes until the first real message, which it returns
    /// unchecked (the caller checks it).
    fn answer_probes(&self) -> Result<Vec<u8>, Error> {
        let start = Instant::now();
        loop {
            if start.elapsed() > MEET_TIMEOUT + TIMEOUT {
                return Err("no message from the main side".into());
            }
            if let Some(sample) = self
                .subscriber
                .recv_timeout(Duration::from_millis(10))
                .map_err(ze)?
            {
                let payload = sample.payload().to_bytes();
                if payload.as_ref() == [PROBE] {
                    self.publisher.put(vec![PROBE]).wait().map_err(ze)?;
                    continue;
                }
                return Ok(payload.into_owned());
            }
        }
    }
}

/// Shared memory enough for a few messages of the largest size in flight.
fn shm_bytes(plan: &Plan, shm: bool) -> usize {
    if shm {
        (plan.sizes.iter().copied().max().unwrap_or(1) * 8).max(1 << 20)
    } else {
        0
    }
}

/// A TCP endpoint on 127.0.0.1 at a port that was free a moment ago, for the main side to listen
/// on and the other side to connect to.
fn loopback_endpoint() -> Result<String, Error> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    Ok(format!("tcp/127.0.0.1:{port}"))
}

/// The main side of `zenoh` / `zenoh-shm`.
pub fn main_side(plan: &Plan, shm: bool) -> Result<Vec<Vec<u64>>, Error> {
    let endpoint = loopback_endpoint()?;
    let base = crate::run_name();
    let ends = open(&endpoint, true, &base, true, shm_bytes(plan, shm))?;
    let mut kid = Kid(crate::echo_command("zenoh-echo", plan)
        .args(["--endpoint", &endpoint, "--key", &base])
        .args(["--shm", if shm { "1" } else { "0" }])
        .spawn()?);
    // Only this thread: Zenoh's own threads, started with the session, stay unpinned.
    if let Some((main, _)) = plan.pin {
        pin_to(main)?;
    }
    ends.meet()?;
    let rows = crate::round_trips(
        plan,
        |size, value| ends.send(size, value),
        |size, value| ends.recv_check(size, value),
    )?;
    crate::wait_for(&mut kid)?;
    drop(ends);
    Ok(rows)
}

/// The echo side: answers every message with the same size and the pong's value.
pub fn echo_side(plan: &Plan, endpoint: &str, base: &str, shm: bool) -> Result<(), Error> {
    let ends = open(endpoint, false, base, false, shm_bytes(plan, shm))?;
    if let Some((_, peer)) = plan.pin {
        pin_to(peer)?;
    }
    // The first ping came with the probes' answers; the rest are read as they come.
    let mut first = Some(ends.answer_probes()?);
    crate::echo_round_trips(
        plan,
        |size, value| match first.take() {
            Some(m) if m.len() == size && all_equal(&m, value) => Ok(()),
            Some(_) => Err("the first message is not what was sent".into()),
            None => ends.recv_check(size, value),
        },
        |size, value| ends.send(size, value),
    )?;
    // Let the last reply leave before the session closes.
    std::thread::sleep(Duration::from_millis(100));
    Ok(())
}

/// Shared memory for the messages of a throughput run in flight: Zenoh's queues hold many.
fn throughput_shm_bytes(size: usize) -> usize {
    (size * 256).clamp(4 << 20, 256 << 20)
}

/// The main side of `zenoh-throughput` / `zenoh-shm-throughput`: a publisher without `express`
/// (Zenoh batches), reliable with `Block` congestion control, or `Drop` for latest delivery.
pub fn throughput_main(plan: &throughput::Plan, shm: bool) -> Result<throughput::Report, Error> {
    let endpoint = loopback_endpoint()?;
    let key = format!("{}/throughput", crate::run_name());
    let session = session(&endpoint, true, shm)?;
    let publisher = session
        .declare_publisher(key.clone())
        .reliability(if plan.reliable {
            Reliability::Reliable
        } else {
            Reliability::BestEffort
        })
        .congestion_control(if plan.reliable {
            CongestionControl::Block
        } else {
            CongestionControl::Drop
        })
        .wait()
        .map_err(ze)?;
    let provider = if shm {
        Some(provider(throughput_shm_bytes(plan.size))?)
    } else {
        None
    };
    let size = plan.size;
    let reliable = plan.reliable;
    throughput::main_side(
        plan,
        "zenoh-sink",
        &[
            "--endpoint",
            &endpoint,
            "--key",
            &key,
            "--shm",
            if shm { "1" } else { "0" },
        ],
        || Ok(publisher.matching_status().wait().map_err(ze)?.matching()),
        |seq| {
            match &provider {
                Some(provider) => {
                    // Reliable: wait for a buffer the sink has let go, as Zenoh's BlockOn policy
                    // waits (1 ms sleeps), at most 30 s. Latest: a full provider means the sink
                    // lags, and the message is dropped.
                    let start = Instant::now();
                    let mut buf = loop {
                        match provider.alloc(size).with_policy::<GarbageCollect>().wait() {
                            Ok(buf) => break buf,
                            Err(ZLayoutAllocError::Alloc(
                                ZAllocError::OutOfMemory | ZAllocError::NeedDefragment,
                            )) if !reliable => return Ok(()),
                            Err(ZLayoutAllocError::Alloc(
                                ZAllocError::OutOfMemory | ZAllocError::NeedDefragment,
                            )) if start.elapsed() < TIMEOUT => {
                                std::thread::sleep(Duration::from_millis(1))
                            }
                            Err(e) => {
                                return Err(format!("zenoh shm alloc of {size} bytes: {e:?}").into())
                            }
                        }
                    };
                    throughput::write_message(&mut buf, seq);
                    publisher.put(buf).wait().map_err(ze)?;
                }
                None => {
                    let mut buf = vec![0u8; size];
                    throughput::write_message(&mut buf, seq);
                    publisher.put(buf).wait().map_err(ze)?;
                }
            }
            Ok(())
        },
    )
}

/// The sink of a Zenoh throughput run: the subscriber's channel polled with `try_recv`.
pub fn throughput_sink(
    plan: &throughput::Plan,
    endpoint: &str,
    key: &str,
    shm: bool,
) -> Result<(), Error> {
    let session = session(endpoint, false, shm)?;
    let subscriber = session.declare_subscriber(key).wait().map_err(ze)?;
    if let Some((_, peer)) = plan.pin {
        pin_to(peer)?;
    }
    throughput::sink_side(plan, |tally| match subscriber.try_recv().map_err(ze)? {
        Some(sample) => {
            tally.take(&sample.payload().to_bytes())?;
            Ok(true)
        }
        None => Ok(false),
    })
}

/// The reply channel of one `get`.
type Replies = zenoh::handlers::FifoChannelHandler<zenoh::query::Reply>;

/// The main side of `zenoh-rr`: a session in peer mode listening on loopback, as `zenoh`'s; each
/// round trip a `get` on the echo's queryable with the request as its payload (a fresh buffer
/// filled with memset), express with `Block` congestion control as the `zenoh` publishers, and
/// consolidation `None`, so that the reply is handed over as it comes rather than held until the
/// query's end; its reply channel polled with `try_recv` in a spin loop.
pub fn rr_main_side(plan: &Plan) -> Result<Vec<Vec<u64>>, Error> {
    let endpoint = loopback_endpoint()?;
    let key = KeyExpr::try_from(format!("{}/rr", crate::run_name())).map_err(ze)?;
    let session = session(&endpoint, true, false)?;
    let mut kid = Kid(crate::echo_command("zenoh-rr-echo", plan)
        .args(["--endpoint", &endpoint, "--key", key.as_str()])
        .spawn()?);
    // Only this thread: Zenoh's own threads, started with the session, stay unpinned.
    if let Some((main, _)) = plan.pin {
        pin_to(main)?;
    }
    let get = |payload: Vec<u8>| -> Result<Replies, Error> {
        session
            .get(&key)
            .payload(payload)
            .consolidation(ConsolidationMode::None)
            .congestion_control(CongestionControl::Block)
            .express(true)
            .wait()
            .map_err(ze)
    };
    // Probes until the queryable answers one: before it is known here, a query ends at once
    // without a reply.
    let start = Instant::now();
    loop {
        if start.elapsed() > MEET_TIMEOUT {
            return Err("the two Zenoh sessions did not meet within 10 s".into());
        }
        let replies = get(vec![PROBE])?;
        match replies.recv_timeout(Duration::from_millis(10)) {
            Ok(Some(reply)) => {
                let sample = reply
                    .result()
                    .map_err(|e| format!("the queryable answered a probe with an error: {e:?}"))?;
                if sample.payload().to_bytes().as_ref() == [PROBE] {
                    break;
                }
            }
            // No reply yet, or the query ended without one.
            Ok(None) | Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    let pending: RefCell<Option<Replies>> = RefCell::new(None);
    let rows = crate::round_trips(
        plan,
        |size, value| {
            *pending.borrow_mut() = Some(get(vec![value; size])?);
            Ok(())
        },
        |size, value| {
            let replies = pending
                .borrow_mut()
                .take()
                .ok_or("no query awaits a reply")?;
            let reply = spin_for("reply", || {
                Ok(replies
                    .try_recv()
                    .map_err(|_| "a query ended without a reply")?)
            })?;
            let sample = reply
                .result()
                .map_err(|e| format!("the queryable answered with an error: {e:?}"))?;
            check_payload("reply", &sample.payload().to_bytes(), size, value)
        },
    )?;
    crate::wait_for(&mut kid)?;
    drop(session);
    Ok(rows)
}

/// The echo side of `zenoh-rr`: a session connecting to the main side's, a queryable on `key`
/// whose channel is polled with `try_recv` in a spin loop; every query's payload checked in
/// place and answered with a reply of the same size (a fresh buffer filled with memset). Probes
/// are answered with a probe.
pub fn rr_echo_side(plan: &Plan, endpoint: &str, key: &str) -> Result<(), Error> {
    let session = session(endpoint, false, false)?;
    let key = KeyExpr::try_from(key.to_owned()).map_err(ze)?;
    let queryable = session.declare_queryable(&key).wait().map_err(ze)?;
    if let Some((_, peer)) = plan.pin {
        pin_to(peer)?;
    }
    // The query being answered: dropped once answered, which ends it.
    let active: RefCell<Option<zenoh::query::Query>> = RefCell::new(None);
    let mut first = true;
    crate::echo_round_trips(
        plan,
        |size, value| {
            let start = Instant::now();
            let mut spins = 0u32;
            loop {
                if let Some(query) = queryable.try_recv().map_err(ze)? {
                    // Checked in place (`to_bytes` borrows a contiguous payload).
                    let (probe, len, equal) = {
                        let payload = query.payload().map(|p| p.to_bytes());
                        let payload = payload.as_deref().unwrap_or(&[]);
                        (payload == [PROBE], payload.len(), all_equal(payload, value))
                    };
                    if probe {
                        query.reply(&key, vec![PROBE]).wait().map_err(ze)?;
                        continue;
                    }
                    if len != size || !equal {
                        return Err(format!(
                            "a query of {len} bytes is not {size} bytes of {value}"
                        )
                        .into());
                    }
                    *active.borrow_mut() = Some(query);
                    first = false;
                    return Ok(());
                }
                spins = spins.wrapping_add(1);
                // The main side probes for up to 10 s before its first query.
                let limit = if first {
                    MEET_TIMEOUT + TIMEOUT
                } else {
                    TIMEOUT
                };
                if spins.is_multiple_of(4096) && start.elapsed() > limit {
                    return Err("no query within 30 s".into());
                }
                std::hint::spin_loop();
            }
        },
        |size, value| {
            let query = active.borrow_mut().take().ok_or("no query to answer")?;
            query.reply(&key, vec![value; size]).wait().map_err(ze)?;
            Ok(())
        },
    )?;
    // Let the last reply leave before the session closes.
    std::thread::sleep(Duration::from_millis(100));
    Ok(())
}
