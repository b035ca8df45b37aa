//! Throughput, the way `ferry lab throughput` measures ferry: the main side publishes back to
//! back for a while, a sink in another process (this binary again) subscribes and counts.
//!
//! `ferry-peers SYSTEM-throughput --size S --duration-ms D --delivery reliable|latest --pin
//! MAIN,PEER|none` starts `ferry-peers SYSTEM-sink ...`, waits until the sink's subscriber is
//! matched, sends for D ms and prints one JSON object on stdout (see [`Report::json`]).
//!
//! The payload work is the lab's: the sender writes each message's sequence number (u64, little
//! endian) in bytes 0..8 and its pattern byte in all others; the sink checks the sequence number
//! of every message and every byte of every 64th.
//!
//! The two processes talk over the sink's standard streams: the sink prints `ready` once its
//! subscriber is there, the main side writes `done SENT` when it has finished, and the sink
//! answers with one `counts ...` line when it has seen the last message (or nothing came for a
//! while) and exits.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use iceoryx2::port::{BackpressureAction, BackpressureInfo};
use iceoryx2::prelude::*;

use crate::{
    all_equal, byte, one_to_one_service, pin_to, Error, Kid, PubSub, MEET_TIMEOUT, TIMEOUT,
};

/// Every this many messages (by sequence number) the sink checks every byte.
const CHECK_EVERY: u64 = 64;
/// After the main side said it has finished: how long the sink waits for more, at most.
const DRAIN_LIMIT: Duration = Duration::from_secs(20);
/// The longest send phase accepted.
const MAX_DURATION_MS: u64 = 600_000;
/// The largest message (as the lab's throughput experiment).
const MAX_SIZE: usize = 64 << 20;
/// The most the main side reads of the sink's output.
const SINK_OUTPUT_LIMIT: u64 = 4096;

/// What both sides of a throughput run are told.
pub(crate) struct Plan {
    pub size: usize,
    pub duration: Duration,
    /// `reliable`: nothing is dropped, the publisher waits; `latest`: dropped when the sink lags.
    pub reliable: bool,
    /// CPUs of the main side and of the sink.
    pub pin: Option<(usize, usize)>,
}

impl Plan {
    pub fn parse(opts: &mut crate::Options) -> Result<Plan, Error> {
        let size: usize = opts
            .take("--size")?
            .parse()
            .map_err(|_| "--size: a number")?;
        let ms: u64 = opts
            .take("--duration-ms")?
            .parse()
            .map_err(|_| "--duration-ms: a number")?;
        let reliable = match opts.take("--delivery")?.as_str() {
            "reliable" => true,
            "latest" => false,
            other => return Err(format!("--delivery {other:?}: reliable or latest").into()),
        };
        let pin = crate::pin(&opts.take("--pin")?)?;
        if !(8..=MAX_SIZE).contains(&size) {
            return Err(format!("--size: 8 bytes to {MAX_SIZE} bytes").into());
        }
        if ms == 0 || ms > MAX_DURATION_MS {
            return Err(format!("--duration-ms: 1 to {MAX_DURATION_MS}").into());
        }
        Ok(Plan {
            size,
            duration: Duration::from_millis(ms),
            reliable,
            pin,
        })
    }

    fn delivery(&self) -> &'static str {
        if self.reliable {
            "reliable"
        } else {
            "latest"
        }
    }
}

/// CLOCK_MONOTONIC in ns (the lab's clock: the two processes and the lab read the same one).
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Writes message `seq` into `buf`: its number in bytes 0..8, its pattern byte in the rest
/// (iceoryx2's loans are written through a pointer instead: they start uninitialised).
#[cfg(any(feature = "zenoh", test))]
pub(crate) fn write_message(buf: &mut [u8], seq: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    buf[8..].fill(byte(seq, false));
}

/// What the sink counts.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Tally {
    size: usize,
    delivered: u64,
    first_ns: u64,
    last_ns: u64,
    /// The highest sequence number delivered.
    last_seq: Option<u64>,
    /// Messages whose number was not above the last one's.
    out_of_order: u64,
    /// Messages of which every byte was checked.
    checked: u64,
}

impl Tally {
    pub fn new(size: usize) -> Tally {
        Tally {
            size,
            ..Tally::default()
        }
    }

    /// Takes one message; an error if it is damaged.
    pub fn take(&mut self, payload: &[u8]) -> Result<(), Error> {
        if payload.len() != self.size {
            return Err(format!(
                "a message of {} bytes arrived, expected {}",
                payload.len(),
                self.size
            )
            .into());
        }
        let mut num = [0u8; 8];
        num.copy_from_slice(&payload[..8]);
        let seq = u64::from_le_bytes(num);
        let now = monotonic_ns();
        if self.delivered == 0 && self.out_of_order == 0 {
            self.first_ns = now;
        }
        if self.last_seq.is_some_and(|l| seq <= l) {
            self.out_of_order += 1;
        } else {
            self.delivered += 1;
            self.last_seq = Some(seq);
            self.last_ns = now;
        }
        if seq.is_multiple_of(CHECK_EVERY) {
            if !all_equal(&payload[8..], byte(seq, false)) {
                return Err(format!("message {seq} is corrupt").into());
            }
            self.checked += 1;
        }
        Ok(())
    }

    fn line(&self) -> String {
        format!(
            "counts {} {} {} {} {}",
            self.delivered, self.first_ns, self.last_ns, self.out_of_order, self.checked
        )
    }

    fn from_line(line: &str, size: usize) -> Result<Tally, Error> {
        let bad = || format!("the sink's counts are malformed: {line:?}");
        let rest = line.strip_prefix("counts ").ok_or_else(bad)?;
        let v: Vec<u64> = rest
            .split(' ')
            .map(|s| s.parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        let [delivered, first_ns, last_ns, out_of_order, checked] = v[..] else {
            return Err(bad().into());
        };
        Ok(Tally {
            size,
            delivered,
            first_ns,
            last_ns,
            last_seq: None,
            out_of_order,
            checked,
        })
    }
}

/// What the main side prints.
pub(crate) struct Report {
    sent: u64,
    first_send_ns: u64,
    send_ns: u64,
    sink: Tally,
}

impl Report {
    /// `{"sent", "delivered", "bytes", "first_send_ns", "send_ns", "first_delivery_ns",
    /// "last_delivery_ns", "out_of_order", "checked"}`: counts of messages, times in ns
    /// (`*_ns` points in time are CLOCK_MONOTONIC; `send_ns` is how long the sending took).
    pub fn json(&self) -> String {
        let t = &self.sink;
        format!(
            "{{\"sent\":{},\"delivered\":{},\"bytes\":{},\"first_send_ns\":{},\"send_ns\":{},\
             \"first_delivery_ns\":{},\"last_delivery_ns\":{},\"out_of_order\":{},\"checked\":{}}}",
            self.sent,
            t.delivered,
            t.delivered * t.size as u64,
            self.first_send_ns,
            self.send_ns,
            t.first_ns,
            t.last_ns,
            t.out_of_order,
            t.checked
        )
    }
}

/// The main side's end of the sink: its standard streams.
struct Sink {
    kid: Kid,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Sink {
    /// Starts `cmd` (the sink of this system) with `extra` options of its own.
    fn start(cmd: &str, plan: &Plan, extra: &[&str]) -> Result<Sink, Error> {
        let exe = std::env::current_exe().unwrap_or_else(|_| "ferry-peers".into());
        let pin_text = plan
            .pin
            .map_or("none".to_owned(), |(a, b)| format!("{a},{b}"));
        let mut child = std::process::Command::new(exe)
            .arg(cmd)
            .args(["--size", &plan.size.to_string()])
            .args(["--duration-ms", &plan.duration.as_millis().to_string()])
            .args(["--delivery", plan.delivery()])
            .args(["--pin", &pin_text])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout.take(SINK_OUTPUT_LIMIT)).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Sink {
            kid: Kid(child),
            stdin,
            lines,
        })
    }

    fn line(&self, timeout: Duration, what: &str) -> Result<String, Error> {
        self.lines.recv_timeout(timeout).map_err(|_| {
            format!(
                "the sink did not send {what} within {} s",
                timeout.as_secs()
            )
            .into()
        })
    }
}

/// The main side: starts the sink, waits for it (`matched`: the system's own view that the
/// sink's subscriber is there), sends for the plan's duration (`send(seq)` sends message `seq`)
/// and collects the sink's counts.
pub(crate) fn main_side(
    plan: &Plan,
    sink_cmd: &str,
    extra: &[&str],
    matched: impl Fn() -> Result<bool, Error>,
    mut send: impl FnMut(u64) -> Result<(), Error>,
) -> Result<Report, Error> {
    let mut sink = Sink::start(sink_cmd, plan, extra)?;
    if let Some((main, _)) = plan.pin {
        pin_to(main)?;
    }
    let ready = sink.line(MEET_TIMEOUT, "that it is ready")?;
    if ready != "ready" {
        return Err(format!("the sink said {ready:?}, not ready").into());
    }
    let start = Instant::now();
    while !matched()? {
        if start.elapsed() > MEET_TIMEOUT {
            return Err("the sink's subscriber was not matched within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // The clock read every 16th small message: reading it after each would cost a good share.
    let every = if plan.size >= 4096 { 1 } else { 16 };
    let first_send_ns = monotonic_ns();
    let deadline = Instant::now() + plan.duration;
    let mut seq = 0u64;
    loop {
        send(seq)?;
        seq += 1;
        if seq.is_multiple_of(every) && Instant::now() >= deadline {
            break;
        }
    }
    let send_ns = monotonic_ns() - first_send_ns;
    writeln!(sink.stdin, "done {seq}")?;
    sink.stdin.flush()?;
    let counts = sink.line(DRAIN_LIMIT + MEET_TIMEOUT, "its counts")?;
    let tally = Tally::from_line(&counts, plan.size)?;
    crate::wait_for(&mut sink.kid)?;
    if tally.delivered > seq {
        return Err(format!("the sink counted {} of {seq} messages", tally.delivered).into());
    }
    Ok(Report {
        sent: seq,
        first_send_ns,
        send_ns,
        sink: tally,
    })
}

/// The sink: says it is ready, then takes messages (`recv` gives whether one came, after
/// handing it to the tally) until the main side's count has come and the last message with it,
/// or nothing came for a while; prints its counts.
pub(crate) fn sink_side(
    plan: &Plan,
    mut recv: impl FnMut(&mut Tally) -> Result<bool, Error>,
) -> Result<(), Error> {
    let (tx, done) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let stdin = std::io::stdin();
        let _ = stdin.lock().take(256).read_line(&mut line);
        let _ = tx.send(line);
    });
    println!("ready");
    std::io::stdout().flush()?;
    let mut tally = Tally::new(plan.size);
    // Latest delivery loses what it loses: a short silence ends the count. A reliable publisher
    // may still be pushing its last messages through.
    let idle = if plan.reliable {
        Duration::from_secs(2)
    } else {
        Duration::from_millis(200)
    };
    let started = Instant::now();
    let mut sent: Option<(u64, Instant)> = None;
    let mut last_progress = Instant::now();
    let mut seen_then = 0u64;
    let mut polls = 0u32;
    loop {
        let got = recv(&mut tally)?;
        polls = polls.wrapping_add(1);
        // The commands and the clock are looked at every 256th poll: a message's work is small.
        if !polls.is_multiple_of(256) {
            if !got {
                std::hint::spin_loop();
            }
            continue;
        }
        let now = Instant::now();
        let seen = tally.delivered + tally.out_of_order;
        if seen != seen_then {
            seen_then = seen;
            last_progress = now;
        }
        match sent {
            None => match done.try_recv() {
                Ok(line) => {
                    let n = line
                        .trim()
                        .strip_prefix("done ")
                        .and_then(|n| n.parse::<u64>().ok())
                        .ok_or_else(|| format!("the main side said {line:?}, not done N"))?;
                    sent = Some((n, now));
                }
                Err(mpsc::TryRecvError::Empty) => {
                    if started.elapsed() > plan.duration + MEET_TIMEOUT + TIMEOUT {
                        return Err("the main side did not finish in time".into());
                    }
                }
                Err(mpsc::TryRecvError::Disconnected) => {
                    return Err("the main side went away".into())
                }
            },
            Some((n, at)) => {
                let all = n == 0 || tally.last_seq.is_some_and(|l| l.saturating_add(1) >= n);
                if all
                    || now.duration_since(last_progress.max(at)) >= idle
                    || now.duration_since(at) >= DRAIN_LIMIT
                {
                    break;
                }
            }
        }
    }
    println!("{}", tally.line());
    std::io::stdout().flush()?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// iceoryx2

type Ipc = ipc::Service;

/// Messages the sink's buffer holds: as many as ferry's shared-memory ring of the lab's
/// throughput holds (2 × size, at least 64 KiB), at least 2.
pub(crate) fn buffer_slots(size: usize) -> usize {
    ((2 * size).max(64 << 10) / size).max(2)
}

/// The service of one run: `reliable` turns iceoryx2's safe overflow (the oldest sample in a
/// full buffer overwritten) off, so that the publisher's backpressure strategy applies.
fn iceoryx2_service(node: &Node<Ipc>, base: &str, plan: &Plan) -> Result<PubSub, Error> {
    one_to_one_service(node, base, buffer_slots(plan.size), Some(!plan.reliable))
}

pub(crate) fn iceoryx2_main(plan: &Plan) -> Result<Report, Error> {
    let base = format!("{}/throughput", crate::run_name());
    let node = NodeBuilder::new().create::<Ipc>()?;
    let service = iceoryx2_service(&node, &base, plan)?;
    let builder = service.publisher_builder().initial_max_slice_len(plan.size);
    let publisher = if plan.reliable {
        builder
            .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
            // A reliable send waits for room at most 30 s, then fails (a sink that went away).
            .set_backpressure_handler(|info: &BackpressureInfo| {
                if info.elapsed_time > TIMEOUT {
                    BackpressureAction::DiscardDataAndFail
                } else {
                    BackpressureAction::Retry
                }
            })
            .create()?
    } else {
        builder
            .backpressure_strategy(BackpressureStrategy::DiscardData)
            .create()?
    };
    let size = plan.size;
    main_side(
        plan,
        "iceoryx2-sink",
        &["--service", &base],
        || Ok(service.dynamic_config().number_of_subscribers() >= 1),
        |seq| {
            let mut sample = publisher.loan_slice_uninit(size)?;
            let bytes = sample.payload_mut();
            let seq_bytes = seq.to_le_bytes();
            let pattern = byte(seq, false);
            // SAFETY: `bytes` is the loan's `size` (>= 8) writable bytes: the number goes to
            // bytes 0..8, the pattern to every byte after them.
            unsafe {
                let p = bytes.as_mut_ptr().cast::<u8>();
                std::ptr::copy_nonoverlapping(seq_bytes.as_ptr(), p, 8);
                std::ptr::write_bytes(p.add(8), pattern, size - 8);
            }
            // SAFETY: every byte was written just above.
            let sample = unsafe { sample.assume_init() };
            sample.send().map_err(|e| {
                format!("iceoryx2 send: {e:?} (the sink took nothing for 30 s, or went away)")
            })?;
            Ok(())
        },
    )
}

pub(crate) fn iceoryx2_sink(plan: &Plan, base: &str) -> Result<(), Error> {
    if let Some((_, peer)) = plan.pin {
        pin_to(peer)?;
    }
    let node = NodeBuilder::new().create::<Ipc>()?;
    let service = iceoryx2_service(&node, base, plan)?;
    let subscriber = service.subscriber_builder().create()?;
    sink_side(plan, |tally| match subscriber.receive()? {
        Some(sample) => {
            tally.take(sample.payload())?;
            Ok(true)
        }
        None => Ok(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tally_counts_checks_and_travels_as_a_line() {
        let mut buf = vec![0u8; 64];
        let mut tally = Tally::new(64);
        for seq in [0, 1, 2, 2, 64] {
            write_message(&mut buf, seq);
            tally.take(&buf).unwrap();
        }
        assert_eq!(
            (tally.delivered, tally.out_of_order, tally.checked),
            (4, 1, 2)
        );
        let back = Tally::from_line(&tally.line(), 64).unwrap();
        assert_eq!((back.delivered, back.checked), (4, 2));
        write_message(&mut buf, 128);
        buf[40] ^= 1;
        assert!(tally.take(&buf).is_err(), "every 64th is checked");
        assert!(tally.take(&buf[..32]).is_err(), "the size is checked");
        assert!(Tally::from_line("counts 1 2 3", 64).is_err());
    }

    #[test]
    fn the_buffer_holds_what_ferrys_ring_holds() {
        assert_eq!(buffer_slots(64), 1024);
        assert_eq!(buffer_slots(1024), 64);
        assert_eq!(buffer_slots(64 << 10), 2);
        assert_eq!(buffer_slots(1 << 20), 2);
    }
}
