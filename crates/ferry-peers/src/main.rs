//! `ferry-peers`: other middleware run the way `ferry lab latency` and `ferry lab throughput` run
//! ferry, so the lab can set them side by side in the same rounds.
//!
//! `ferry-peers SYSTEM --sizes S,.. --counts N,.. --warmups W,.. --pin MAIN,PEER|none` (SYSTEM:
//! `iceoryx2`, `iceoryx2-block` (the receiver sleeps on an iceoryx2 event instead of spinning),
//! `iceoryx2-rr` (iceoryx2's request-response: the main side is the client, the echo the
//! server), and with the `zenoh` feature `zenoh`, `zenoh-shm`, `zenoh-rr` (a queryable answering
//! `get`)) is the main side: it starts its echo (`ferry-peers SYSTEM-echo ...`, this binary
//! again), makes
//! `counts[i]` round trips of `sizes[i]` bytes, and prints `{"one_way_ns": [[..], ..]}` on
//! stdout: the one-way latencies (round trip / 2, ns) of the round trips after the first
//! `warmups[i]`, per size. Errors go to stderr with a non-zero exit status.
//!
//! The payload work is the lab's: the sender writes every byte of a loan (byte `seq % 255 + 1`,
//! the echo's reply shifted by 128), the receiver checks every byte of the sample in place.
//!
//! `ferry-peers SYSTEM-throughput ...` measures throughput instead (see `throughput`).

use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use iceoryx2::prelude::*;

mod iceoryx2_rr;
mod throughput;
#[cfg(feature = "zenoh")]
mod zenoh_peer;

/// The longest the main side waits for a reply, or the echo for a message.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(30);
/// The longest the two sides take to find each other.
pub(crate) const MEET_TIMEOUT: Duration = Duration::from_secs(10);
/// Round trips a run may ask for, in all (a bound on what the main side keeps).
const MAX_ROUND_TRIPS: usize = 10_000_000;
/// The largest message (as the lab's).
const MAX_SIZE: usize = 256 << 20;
/// Added to a ping's byte for its pong.
const PONG_SHIFT: u64 = 128;

pub(crate) type Error = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-peers: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What both sides are told.
pub(crate) struct Plan {
    pub sizes: Vec<usize>,
    pub counts: Vec<usize>,
    pub warmups: Vec<usize>,
    /// CPUs of the main side and of the echo.
    pub pin: Option<(usize, usize)>,
}

fn run(args: &[String]) -> Result<(), Error> {
    // iceoryx2 warns on stderr that it found no config file: its defaults are what is measured.
    set_log_level(LogLevel::Error);
    let (cmd, rest) = args.split_first().ok_or(USAGE)?;
    if cmd == "systems" {
        // What this build runs (the lab asks before it runs a system).
        println!("{}", SYSTEMS.join(" "));
        return Ok(());
    }
    let mut opts = Options::parse(rest)?;
    // The lab pins itself before it starts this binary, which inherits that one CPU: every
    // thread would share it, Zenoh's runtime threads with the measuring thread. The measuring
    // threads pin themselves; the others run wherever the machine lets them.
    unpin()?;
    if let Some(system) = cmd.strip_suffix("-throughput") {
        let plan = throughput::Plan::parse(&mut opts)?;
        opts.done()?;
        let report = match system {
            "iceoryx2" => throughput::iceoryx2_main(&plan)?,
            #[cfg(feature = "zenoh")]
            "zenoh" | "zenoh-shm" => zenoh_peer::throughput_main(&plan, system == "zenoh-shm")?,
            other => return Err(unknown(other)),
        };
        println!("{}", report.json());
        return Ok(());
    }
    if let Some(system) = cmd.strip_suffix("-sink") {
        let plan = throughput::Plan::parse(&mut opts)?;
        return match system {
            "iceoryx2" => {
                let service = opts.take("--service")?;
                opts.done()?;
                throughput::iceoryx2_sink(&plan, &service)
            }
            #[cfg(feature = "zenoh")]
            "zenoh" => {
                let (endpoint, key, shm) = opts.zenoh_side()?;
                zenoh_peer::throughput_sink(&plan, &endpoint, &key, shm)
            }
            other => Err(unknown(other)),
        };
    }
    let plan = Plan {
        sizes: list(&opts.take("--sizes")?)?,
        counts: list(&opts.take("--counts")?)?,
        warmups: list(&opts.take("--warmups")?)?,
        pin: pin(&opts.take("--pin")?)?,
    };
    check(&plan)?;
    match cmd.as_str() {
        "iceoryx2" | "iceoryx2-block" => {
            opts.done()?;
            let rows = iceoryx2_main(&plan, cmd == "iceoryx2-block")?;
            println!("{}", json(&rows));
            Ok(())
        }
        "iceoryx2-echo" => {
            let service = opts.take("--service")?;
            let events = opts.take("--events")? == "1";
            opts.done()?;
            iceoryx2_echo(&plan, &service, events)
        }
        "iceoryx2-rr" => {
            opts.done()?;
            let rows = iceoryx2_rr::main_side(&plan)?;
            println!("{}", json(&rows));
            Ok(())
        }
        "iceoryx2-rr-echo" => {
            let service = opts.take("--service")?;
            opts.done()?;
            iceoryx2_rr::echo_side(&plan, &service)
        }
        #[cfg(feature = "zenoh")]
        "zenoh" | "zenoh-shm" => {
            opts.done()?;
            let rows = zenoh_peer::main_side(&plan, cmd == "zenoh-shm")?;
            println!("{}", json(&rows));
            Ok(())
        }
        #[cfg(feature = "zenoh")]
        "zenoh-echo" => {
            let (endpoint, key, shm) = opts.zenoh_side()?;
            zenoh_peer::echo_side(&plan, &endpoint, &key, shm)
        }
        #[cfg(feature = "zenoh")]
        "zenoh-rr" => {
            opts.done()?;
            let rows = zenoh_peer::rr_main_side(&plan)?;
            println!("{}", json(&rows));
            Ok(())
        }
        #[cfg(feature = "zenoh")]
        "zenoh-rr-echo" => {
            let endpoint = opts.take("--endpoint")?;
            let key = opts.take("--key")?;
            opts.done()?;
            zenoh_peer::rr_echo_side(&plan, &endpoint, &key)
        }
        other => Err(unknown(other)),
    }
}

/// The error for a command this build does not run.
fn unknown(cmd: &str) -> Error {
    if !cfg!(feature = "zenoh") && cmd.starts_with("zenoh") {
        return "this ferry-peers was built without Zenoh; build it with: cargo build --release \
             --locked --manifest-path crates/ferry-peers/Cargo.toml --features zenoh"
            .into();
    }
    format!("unknown command {cmd:?}; {USAGE}").into()
}

const USAGE: &str = "usage: ferry-peers iceoryx2|iceoryx2-block|iceoryx2-rr|zenoh|zenoh-shm|\
     zenoh-rr --sizes S,.. --counts N,.. --warmups W,.. --pin MAIN,PEER|none; ferry-peers \
     iceoryx2-throughput|zenoh-throughput|zenoh-shm-throughput --size S --duration-ms D \
     --delivery reliable|latest --pin MAIN,PEER|none; or ferry-peers systems";

/// The systems this build runs (latency, then throughput).
#[cfg(feature = "zenoh")]
const SYSTEMS: &[&str] = &[
    "iceoryx2",
    "iceoryx2-block",
    "iceoryx2-rr",
    "zenoh",
    "zenoh-shm",
    "zenoh-rr",
    "iceoryx2-throughput",
    "zenoh-throughput",
    "zenoh-shm-throughput",
];
#[cfg(not(feature = "zenoh"))]
const SYSTEMS: &[&str] = &[
    "iceoryx2",
    "iceoryx2-block",
    "iceoryx2-rr",
    "iceoryx2-throughput",
];

/// `--name value` pairs, each given once.
pub(crate) struct Options(Vec<(String, String)>);

impl Options {
    fn parse(args: &[String]) -> Result<Options, Error> {
        if !args.len().is_multiple_of(2) {
            return Err(USAGE.into());
        }
        Ok(Options(
            args.chunks(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect(),
        ))
    }

    pub(crate) fn take(&mut self, name: &str) -> Result<String, Error> {
        let i = self
            .0
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| format!("{name} is missing; {USAGE}"))?;
        Ok(self.0.remove(i).1)
    }

    /// The last options of a Zenoh side: its endpoint, its key, and whether it uses Zenoh's
    /// shared memory (`--shm 1`).
    #[cfg(feature = "zenoh")]
    fn zenoh_side(mut self) -> Result<(String, String, bool), Error> {
        let endpoint = self.take("--endpoint")?;
        let key = self.take("--key")?;
        let shm = self.take("--shm")? == "1";
        self.done()?;
        Ok((endpoint, key, shm))
    }

    fn done(self) -> Result<(), Error> {
        match self.0.first() {
            Some((n, _)) => Err(format!("unknown or repeated option {n}").into()),
            None => Ok(()),
        }
    }
}

fn list(text: &str) -> Result<Vec<usize>, Error> {
    text.split(',')
        .map(|s| {
            s.parse()
                .map_err(|_| format!("{s:?} is not a number").into())
        })
        .collect()
}

pub(crate) fn pin(text: &str) -> Result<Option<(usize, usize)>, Error> {
    if text == "none" {
        return Ok(None);
    }
    match list(text)?.as_slice() {
        [a, b] => Ok(Some((*a, *b))),
        _ => Err(format!("--pin {text:?}: give MAIN,PEER or none").into()),
    }
}

fn check(plan: &Plan) -> Result<(), Error> {
    let n = plan.sizes.len();
    if n == 0 || plan.counts.len() != n || plan.warmups.len() != n {
        return Err(
            "--sizes, --counts and --warmups must list as many values, at least one".into(),
        );
    }
    if plan.sizes.iter().any(|&s| s == 0 || s > MAX_SIZE) {
        return Err(format!("sizes are 1 byte to {MAX_SIZE} bytes").into());
    }
    if plan.counts.iter().zip(&plan.warmups).any(|(c, w)| w >= c) {
        return Err("every count must be above its warm-up".into());
    }
    if plan.counts.iter().sum::<usize>() > MAX_ROUND_TRIPS {
        return Err(format!("at most {MAX_ROUND_TRIPS} round trips in all").into());
    }
    Ok(())
}

/// Keeps this thread on `cpu`.
pub(crate) fn pin_to(cpu: usize) -> Result<(), Error> {
    set_affinity([cpu], &format!("pin to CPU {cpu}"))
}

/// Lets this thread (and the threads it starts) run on every CPU this process may use: the
/// kernel keeps those of the full set that the process's cpuset allows.
fn unpin() -> Result<(), Error> {
    set_affinity(0..libc::CPU_SETSIZE as usize, "widen the CPU affinity")
}

/// Lets this thread run on `cpus` alone; the error says it could not `what`.
fn set_affinity(cpus: impl IntoIterator<Item = usize>, what: &str) -> Result<(), Error> {
    // SAFETY: a zeroed cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(format!("CPU {cpu} is out of range").into());
        }
        // SAFETY: `cpu` is below CPU_SETSIZE (checked above), inside the set.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size given; 0 is this thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(format!("cannot {what}: {}", std::io::Error::last_os_error()).into());
    }
    Ok(())
}

/// Whether `payload` is `size` bytes of `value`; an error naming the `what` (message, reply)
/// that came otherwise.
pub(crate) fn check_payload(
    what: &str,
    payload: &[u8],
    size: usize,
    value: u8,
) -> Result<(), Error> {
    if payload.len() != size || !all_equal(payload, value) {
        return Err(format!(
            "a {what} of {} bytes is not {size} bytes of {value}",
            payload.len()
        )
        .into());
    }
    Ok(())
}

/// Spins on `poll` until it gives something, for at most `TIMEOUT` (the clock is read every
/// 4096 spins); the error says that no `what` came.
pub(crate) fn spin_for<T>(
    what: &str,
    mut poll: impl FnMut() -> Result<Option<T>, Error>,
) -> Result<T, Error> {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        if let Some(got) = poll()? {
            return Ok(got);
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(4096) && start.elapsed() > TIMEOUT {
            return Err(format!("no {what} within 30 s").into());
        }
        std::hint::spin_loop();
    }
}

/// Reads the whole payload, 8 bytes at a time, and says whether every byte equals `byte`: the
/// lab's own check (`ferry_lab::check`), repeated here so that this workspace does not build the
/// lab.
pub(crate) fn all_equal(buf: &[u8], byte: u8) -> bool {
    let word = u64::from_ne_bytes([byte; 8]);
    let mut chunks = buf.chunks_exact(8);
    let mut diff = 0u64;
    for chunk in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        diff |= u64::from_ne_bytes(w) ^ word;
    }
    diff == 0 && chunks.remainder().iter().all(|&b| b == byte)
}

pub(crate) fn byte(seq: u64, pong: bool) -> u8 {
    ((seq + if pong { PONG_SHIFT } else { 0 }) % 255 + 1) as u8
}

/// The two services of one run: `<base>/ping` and `<base>/pong`, `[u8]` slices.
struct Ends {
    publisher: iceoryx2::port::publisher::Publisher<ipc::Service, [u8], ()>,
    subscriber: iceoryx2::port::subscriber::Subscriber<ipc::Service, [u8], ()>,
    out: iceoryx2::service::port_factory::publish_subscribe::PortFactory<ipc::Service, [u8], ()>,
    inp: iceoryx2::service::port_factory::publish_subscribe::PortFactory<ipc::Service, [u8], ()>,
    /// `iceoryx2-block`: an event service beside each publish/subscribe one.
    events: Option<Events>,
    _node: Node<ipc::Service>,
}

/// The sender notifies after every message; the receiver sleeps on its listener when there is
/// nothing to take.
struct Events {
    notifier: iceoryx2::port::notifier::Notifier<ipc::Service>,
    listener: iceoryx2::port::listener::Listener<ipc::Service>,
    out: iceoryx2::service::port_factory::event::PortFactory<ipc::Service>,
}

/// A publish-subscribe service of byte slices `name`, opened or made: one publisher, one
/// subscriber, no history, `buffer` samples in the subscriber's buffer; `safe_overflow`, where
/// given, says whether a full buffer's oldest sample is overwritten (else iceoryx2's default).
pub(crate) fn one_to_one_service(
    node: &Node<ipc::Service>,
    name: &str,
    buffer: usize,
    safe_overflow: Option<bool>,
) -> Result<PubSub, Error> {
    let name: ServiceName = name.try_into()?;
    let mut builder = node
        .service_builder(&name)
        .publish_subscribe::<[u8]>()
        .max_publishers(1)
        .max_subscribers(1)
        .history_size(0)
        .subscriber_max_buffer_size(buffer);
    if let Some(overwrite) = safe_overflow {
        builder = builder.enable_safe_overflow(overwrite);
    }
    Ok(builder.open_or_create()?)
}

/// An iceoryx2 publish-subscribe service of byte slices.
pub(crate) type PubSub =
    iceoryx2::service::port_factory::publish_subscribe::PortFactory<ipc::Service, [u8], ()>;

fn ends(base: &str, max_size: usize, main: bool, events: bool) -> Result<Ends, Error> {
    let node = NodeBuilder::new().create::<ipc::Service>()?;
    let service = |dir: &str| one_to_one_service(&node, &format!("{base}/{dir}"), 2, None);
    let (out, inp) = if main {
        (service("ping")?, service("pong")?)
    } else {
        (service("pong")?, service("ping")?)
    };
    let publisher = out
        .publisher_builder()
        .initial_max_slice_len(max_size)
        .create()?;
    let subscriber = inp.subscriber_builder().create()?;
    let events = if events {
        let event = |dir: &str| -> Result<_, Error> {
            let name: ServiceName = format!("{base}/{dir}-event").as_str().try_into()?;
            Ok(node
                .service_builder(&name)
                .event()
                .max_notifiers(1)
                .max_listeners(1)
                .open_or_create()?)
        };
        let (out_event, inp_event) = if main {
            (event("ping")?, event("pong")?)
        } else {
            (event("pong")?, event("ping")?)
        };
        Some(Events {
            notifier: out_event.notifier_builder().create()?,
            listener: inp_event.listener_builder().create()?,
            out: out_event,
        })
    } else {
        None
    };
    Ok(Ends {
        publisher,
        subscriber,
        out,
        inp,
        events,
        _node: node,
    })
}

impl Ends {
    /// Waits until the other side's subscriber and publisher are there.
    fn meet(&self) -> Result<(), Error> {
        let start = Instant::now();
        while self.out.dynamic_config().number_of_subscribers() < 1
            || self.inp.dynamic_config().number_of_publishers() < 1
            || self
                .events
                .as_ref()
                .is_some_and(|e| e.out.dynamic_config().number_of_listeners() < 1)
        {
            if start.elapsed() > MEET_TIMEOUT {
                return Err("the two iceoryx2 processes did not meet within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Sends `size` bytes of `value`, written into a loan.
    fn send(&self, size: usize, value: u8) -> Result<(), Error> {
        let mut sample = self.publisher.loan_slice_uninit(size)?;
        let bytes = sample.payload_mut();
        // SAFETY: `bytes` is the loan's `size` bytes, writable; write_bytes fills all of them (a
        // memset, as the lab fills ferry's loans).
        unsafe { std::ptr::write_bytes(bytes.as_mut_ptr().cast::<u8>(), value, bytes.len()) };
        // SAFETY: every byte was written just above.
        let sample = unsafe { sample.assume_init() };
        sample.send()?;
        if let Some(events) = &self.events {
            events.notifier.notify()?;
        }
        Ok(())
    }

    /// Spins (or, with events, sleeps on the listener) for the next message and checks that it
    /// is `size` bytes of `value`.
    fn recv_check(&self, size: usize, value: u8) -> Result<(), Error> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if let Some(sample) = self.subscriber.receive()? {
                return check_payload("message", sample.payload(), size, value);
            }
            if let Some(events) = &self.events {
                // A notification that came before the sample was taken wakes it at once: the
                // loop then finds nothing and sleeps again.
                let left = TIMEOUT.saturating_sub(start.elapsed());
                if left.is_zero() {
                    return Err("no message within 30 s".into());
                }
                events.listener.timed_wait(|_| {}, left)?;
                continue;
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(4096) && start.elapsed() > TIMEOUT {
                return Err("no message within 30 s".into());
            }
            std::hint::spin_loop();
        }
    }
}

/// A child killed if it is still running when dropped.
pub(crate) struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn joined(v: &[usize]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// A name for this run's services or keys, unique on this machine: the process id and the
/// clock's nanoseconds.
pub(crate) fn run_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("ferry-lab/{}/{nanos}", std::process::id())
}

fn iceoryx2_main(plan: &Plan, events: bool) -> Result<Vec<Vec<u64>>, Error> {
    let base = run_name();
    let max_size = plan.sizes.iter().copied().max().unwrap_or(1);
    let ends = ends(&base, max_size, true, events)?;
    let mut kid = Kid(echo_command("iceoryx2-echo", plan)
        .args(["--service", &base])
        .args(["--events", if events { "1" } else { "0" }])
        .spawn()?);
    if let Some((main, _)) = plan.pin {
        pin_to(main)?;
    }
    ends.meet()?;
    let rows = round_trips(
        plan,
        |size, value| ends.send(size, value),
        |size, value| ends.recv_check(size, value),
    )?;
    // Leaving is the echo's signal to end (it waits for it, so its last reply stays readable).
    drop(ends);
    wait_for(&mut kid)?;
    Ok(rows)
}

/// The main side's measurement: for each size, `counts` round trips (`send` a ping, `recv` and
/// check its pong), the first `warmups` unrecorded; the one-way latencies (ns) per size.
pub(crate) fn round_trips(
    plan: &Plan,
    mut send: impl FnMut(usize, u8) -> Result<(), Error>,
    mut recv: impl FnMut(usize, u8) -> Result<(), Error>,
) -> Result<Vec<Vec<u64>>, Error> {
    let mut seq = 0u64;
    let mut rows = Vec::with_capacity(plan.sizes.len());
    for ((&size, &count), &warmup) in plan.sizes.iter().zip(&plan.counts).zip(&plan.warmups) {
        let mut one_way = Vec::with_capacity(count - warmup);
        for i in 0..count {
            let start = Instant::now();
            send(size, byte(seq, false))?;
            recv(size, byte(seq, true))?;
            let took = start.elapsed().as_nanos() as u64;
            if i >= warmup {
                one_way.push(took / 2);
            }
            seq += 1;
        }
        rows.push(one_way);
    }
    Ok(rows)
}

/// The echo side's loop: each ping received and checked (`recv`), its pong sent (`send`).
pub(crate) fn echo_round_trips(
    plan: &Plan,
    mut recv: impl FnMut(usize, u8) -> Result<(), Error>,
    mut send: impl FnMut(usize, u8) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut seq = 0u64;
    for (&size, &count) in plan.sizes.iter().zip(&plan.counts) {
        for _ in 0..count {
            recv(size, byte(seq, false))?;
            send(size, byte(seq, true))?;
            seq += 1;
        }
    }
    Ok(())
}

/// This binary run as the echo side `cmd` of `plan` (the caller adds its own options).
pub(crate) fn echo_command(cmd: &str, plan: &Plan) -> Command {
    let pin_text = plan
        .pin
        .map_or("none".to_owned(), |(a, b)| format!("{a},{b}"));
    let exe = std::env::current_exe().unwrap_or_else(|_| "ferry-peers".into());
    let mut c = Command::new(exe);
    c.arg(cmd)
        .args(["--sizes", &joined(&plan.sizes)])
        .args(["--counts", &joined(&plan.counts)])
        .args(["--warmups", &joined(&plan.warmups)])
        .args(["--pin", &pin_text])
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    c
}

/// Waits up to 10 s for the echo to end; an error if it failed or did not end.
pub(crate) fn wait_for(kid: &mut Kid) -> Result<(), Error> {
    let deadline = Instant::now() + MEET_TIMEOUT;
    loop {
        if let Some(status) = kid.0.try_wait()? {
            if !status.success() {
                return Err(format!("the echo process failed ({status})").into());
            }
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("the echo process did not end within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn iceoryx2_echo(plan: &Plan, base: &str, events: bool) -> Result<(), Error> {
    if let Some((_, peer)) = plan.pin {
        pin_to(peer)?;
    }
    let max_size = plan.sizes.iter().copied().max().unwrap_or(1);
    let ends = ends(base, max_size, false, events)?;
    ends.meet()?;
    echo_round_trips(
        plan,
        |size, value| ends.recv_check(size, value),
        |size, value| ends.send(size, value),
    )?;
    // The last reply stays readable until the main side has taken it: wait for the main side to
    // leave (it does after its last receive), then end.
    let start = Instant::now();
    while ends.inp.dynamic_config().number_of_publishers() > 0 && start.elapsed() < MEET_TIMEOUT {
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

fn json(rows: &[Vec<u64>]) -> String {
    let rows: Vec<String> = rows
        .iter()
        .map(|r| {
            let v: Vec<String> = r.iter().map(|x| x.to_string()).collect();
            format!("[{}]", v.join(","))
        })
        .collect();
    format!("{{\"one_way_ns\":[{}]}}", rows.join(","))
}
