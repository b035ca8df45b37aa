//! What the Zenoh bridge adds: two sites (network namespaces joined by one veth pair, each with
//! a /dev/shm of its own), and in the same interleaved rounds
//!
//! - **direct**: ferry over UDP between the sites (`FERRY_PEERS` set);
//! - **bridged**: ferry over shared memory in each site, `ferry-zenoh` in each (site B's
//!   listening, site A's connecting to it over TCP on the same veth);
//! - **zenoh**: Zenoh alone, the same ping-pong between a Zenoh session in each site (B's
//!   listening, A's a client of it): what the bridge adds beyond Zenoh is bridged - zenoh.
//!
//! Latency: a ping-pong of `--samples` messages per size, one-way = round trip / 2, p50 and p99.
//! Throughput: `--flood` messages per size sent reliably as fast as the path takes them, in
//! messages per second at the receiver. Needs root (namespaces, mounts).
//!
//! ```sh
//! cargo build --release --manifest-path crates/ferry-peers/Cargo.toml -p ferry-zenoh --examples --bins
//! sudo crates/ferry-peers/target/release/examples/bridge_cost --rounds 5
//! ```

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use ferry::{Delivery, Node, Qos, Transport};
use ferry_zenoh::sites::{Links, Site, Sites};
use zenoh::Wait;

const ROLE: &str = "FERRY_ZENOH_BENCH_ROLE";
const PROBE: u64 = u64::MAX;
const MODES: [&str; 3] = ["direct", "bridged", "zenoh"];
/// Where site B listens in the zenoh mode (the bridges use ZENOH_PORT - 1).
const ZENOH_PORT: u16 = 17448;

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

fn qos(mode: &str, size: usize) -> Qos {
    Qos::default()
        .transport(if mode == "direct" {
            Transport::Udp
        } else {
            Transport::Shm
        })
        .delivery(Delivery::Reliable)
        .max_message_size(size.max(64))
        .send_timeout(Duration::from_secs(30))
}

fn message(seq: u64, size: usize) -> Vec<u8> {
    let mut m = vec![0u8; size.max(8)];
    m[..8].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in m[8..].iter_mut().enumerate() {
        *b = (seq as u8) ^ (i as u8);
    }
    m
}

fn seq_of(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[..8].try_into().unwrap())
}

/// One end of a path: a ferry publisher and subscriber (direct, bridged), or a Zenoh
/// publisher and subscriber (zenoh). One per process: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum End {
    Ferry(ferry::Publisher, ferry::Subscriber),
    Zenoh(
        // Kept open while its publisher and subscriber are in use.
        #[allow(dead_code)] zenoh::Session,
        zenoh::pubsub::Publisher<'static>,
        zenoh::pubsub::Subscriber<zenoh::handlers::FifoChannelHandler<zenoh::sample::Sample>>,
    ),
}

impl End {
    /// Sends on `bench/<mode>/<out>`, receives on `bench/<mode>/<back>`.
    fn open(role: &str, mode: &str, size: usize, out: &str, back: &str) -> End {
        let (out, back) = (
            format!("bench/{mode}/{out}"),
            format!("bench/{mode}/{back}"),
        );
        if mode == "zenoh" {
            // Site A connects to site B, which listens (as the bridges do).
            let mut c = zenoh::Config::default();
            let endpoint = format!("[\"tcp/{}:{}\"]", var("BENCH_B_ADDR"), ZENOH_PORT);
            let (key, mode_name) = if var("BENCH_SITE") == "a" {
                ("connect/endpoints", "\"client\"")
            } else {
                ("listen/endpoints", "\"peer\"")
            };
            c.insert_json5(key, &endpoint).unwrap();
            // Site B's session may still be starting.
            c.insert_json5("connect/timeout_ms", "30000").unwrap();
            c.insert_json5("mode", mode_name).unwrap();
            c.insert_json5("scouting/multicast/enabled", "false")
                .unwrap();
            let session = zenoh::open(c).wait().unwrap();
            let publisher = session
                .declare_publisher(out)
                .congestion_control(zenoh::qos::CongestionControl::Block)
                .wait()
                .unwrap();
            let subscriber = session.declare_subscriber(back).wait().unwrap();
            return End::Zenoh(session, publisher, subscriber);
        }
        let node = Node::with_domain(role, &var("FERRY_DOMAIN")).unwrap();
        let publisher = node.publisher(&out, &qos(mode, size)).unwrap();
        let subscriber = node.subscriber(&back, &qos(mode, size)).unwrap();
        End::Ferry(publisher, subscriber)
    }

    fn send(&mut self, bytes: &[u8]) {
        match self {
            End::Ferry(p, _) => p.send(bytes).unwrap(),
            End::Zenoh(_, p, _) => p.put(bytes).wait().unwrap(),
        }
    }

    /// Waits up to `timeout` for a message and gives it to `f`; false if none came.
    fn recv(&mut self, timeout: Duration, f: impl FnOnce(&[u8])) -> bool {
        match self {
            End::Ferry(_, s) => match s.recv_timeout(timeout).unwrap() {
                Some(sample) => {
                    f(&sample);
                    true
                }
                None => false,
            },
            End::Zenoh(_, _, s) => match s.recv_timeout(timeout).unwrap() {
                Some(sample) => {
                    f(&sample.payload().to_bytes());
                    true
                }
                None => false,
            },
        }
    }
}

/// Probes until the other end answers with a probe (or anything, `any`).
fn handshake(end: &mut End, size: usize, any: bool, mode: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "no answer within 60 s ({mode})");
        end.send(&message(PROBE, size));
        let mut answered = false;
        end.recv(Duration::from_millis(20), |b| {
            answered = any || seq_of(b) == PROBE
        });
        if answered {
            return;
        }
    }
}

/// Site A: round trips through the pong in site B; prints the round trips in ns.
fn ping(mode: &str, size: usize, samples: usize, warmup: usize) {
    let mut end = End::open("ping", mode, size, "ping", "pong");
    handshake(&mut end, size, false, mode);
    let mut rtts = Vec::with_capacity(samples);
    for seq in 0..(warmup + samples) as u64 {
        let m = message(seq, size);
        let t0 = Instant::now();
        end.send(&m);
        let mut done = false;
        while !done {
            let came = end.recv(Duration::from_secs(10), |b| {
                // Late answers to probes are passed over.
                if seq_of(b) == seq {
                    assert_eq!(b, &m[..], "every byte back");
                    done = true;
                }
            });
            assert!(came, "no reply to {seq} within 10 s ({mode})");
        }
        if seq >= warmup as u64 {
            rtts.push(t0.elapsed().as_nanos() as u64);
        }
    }
    let list: Vec<String> = rtts.iter().map(|r| r.to_string()).collect();
    println!("rtt_ns {}", list.join(","));
}

/// Site B: answers every ping with the same bytes until none comes for 5 s.
fn pong(mode: &str, size: usize) {
    let mut end = End::open("pong", mode, size, "pong", "ping");
    let mut buf = Vec::new();
    while end.recv(Duration::from_secs(5), |b| {
        buf.clear();
        buf.extend_from_slice(b)
    }) {
        end.send(&buf);
    }
}

/// Site A: probes until the drain answers, then sends `count` messages as fast as it can.
fn flood(mode: &str, size: usize, count: u64) {
    let mut end = End::open("flood", mode, size, "flood", "ack");
    handshake(&mut end, size, true, mode);
    for seq in 0..count {
        end.send(&message(seq, size));
    }
    // Until the drain has it all (it may read from this publisher's ring).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut finished = false;
    while !finished && Instant::now() < deadline {
        end.recv(Duration::from_millis(100), |b| finished = b == [2]);
    }
}

/// Site B: answers probes, then counts `count` messages; prints messages per second.
fn drain(mode: &str, size: usize, count: u64) {
    let mut end = End::open("drain", mode, size, "ack", "flood");
    let (mut got, mut first, mut last) = (0u64, None, Instant::now());
    let deadline = Instant::now() + Duration::from_secs(120);
    while got < count && Instant::now() < deadline {
        let mut probe = false;
        let came = end.recv(Duration::from_millis(20), |b| {
            if seq_of(b) == PROBE {
                probe = true;
            } else {
                let now = Instant::now();
                first.get_or_insert(now);
                last = now;
                got += 1;
            }
        });
        if came && probe {
            end.send(&[1]);
        }
    }
    // Tells the flood it may go (several times: a lost one would hold it 60 s).
    for _ in 0..3 {
        end.send(&[2]);
    }
    let secs = first.map_or(0.0, |f| (last - f).as_secs_f64());
    println!("flood {got} {secs}");
}

fn child_main(role: &str) {
    let (mode, size) = (var("BENCH_MODE"), var("BENCH_SIZE").parse().unwrap());
    let n = |k: &str| var(k).parse::<u64>().unwrap();
    match role {
        "ping" => ping(
            &mode,
            size,
            n("BENCH_SAMPLES") as usize,
            n("BENCH_WARMUP") as usize,
        ),
        "pong" => pong(&mode, size),
        "flood" => flood(&mode, size, n("BENCH_COUNT")),
        "drain" => drain(&mode, size, n("BENCH_COUNT")),
        other => panic!("unknown role {other}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The parent

struct Args {
    rounds: usize,
    sizes: Vec<usize>,
    samples: usize,
    warmup: usize,
    flood_bytes: u64,
    bridge: std::path::PathBuf,
}

fn parse_size(t: &str) -> usize {
    let t = t.trim();
    let (d, m) = match t.chars().last() {
        Some('K') | Some('k') => (&t[..t.len() - 1], 1024),
        Some('M') | Some('m') => (&t[..t.len() - 1], 1 << 20),
        _ => (t, 1),
    };
    d.parse::<usize>().expect("a size such as 64, 1K, 64K") * m
}

fn args() -> Args {
    let exe = std::env::current_exe().unwrap();
    let mut a = Args {
        rounds: 3,
        sizes: vec![64, 1024, 64 * 1024],
        samples: 2000,
        warmup: 200,
        flood_bytes: 64 << 20,
        // target/release/examples/bridge_cost -> target/release/ferry-zenoh
        bridge: exe.parent().unwrap().parent().unwrap().join("ferry-zenoh"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--rounds" => a.rounds = value().parse().unwrap(),
            "--sizes" => a.sizes = value().split(',').map(parse_size).collect(),
            "--samples" => a.samples = value().parse().unwrap(),
            "--warmup" => a.warmup = value().parse().unwrap(),
            "--flood-bytes" => a.flood_bytes = parse_size(&value()) as u64,
            "--bridge" => a.bridge = value().into(),
            _ => panic!(
                "usage: bridge_cost [--rounds N] [--sizes 64,1K,64K] [--samples N] [--warmup N] \
                 [--flood-bytes 64M] [--bridge PATH]"
            ),
        }
    }
    a
}

fn spawn(site: &Site, role: &str, env: &[(&str, String)]) -> Child {
    let mut cmd = Sites::command(site, std::env::current_exe().unwrap());
    cmd.env(ROLE, role)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("start a child in a site")
}

fn output(child: Child, what: &str) -> String {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{what} failed: {}", out.status);
    String::from_utf8(out.stdout).unwrap()
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i] as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    if let Ok(role) = std::env::var(ROLE) {
        child_main(&role);
        return;
    }
    let a = args();
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "this needs root (namespaces, mounts)");
    assert!(
        a.bridge.is_file(),
        "no bridge at {} (build it: cargo build --release -p ferry-zenoh; or give --bridge)",
        a.bridge.display()
    );
    let sites = Sites::create(Links::Direct, 204, std::process::id() % 10_000).unwrap();
    let domain = format!("bridgecost{}", std::process::id());
    let port = ZENOH_PORT - 1;
    let bridge = |site: &Site, how: &str| {
        let endpoint = format!("tcp/{}:{port}", sites.b.addr);
        let mut cmd = Sites::command(site, &a.bridge);
        cmd.args(["--domain", &domain, how, &endpoint])
            .args(["--no-multicast-scouting", "--delivery", "reliable"])
            .args(["--topics", "bench/bridged/**", "--scan-interval", "0.1"])
            .args(["--max-message-size", "16M"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd.spawn().expect("start ferry-zenoh")
    };
    let mut bridge_b = bridge(&sites.b, "--listen");
    std::thread::sleep(Duration::from_millis(500));
    let mut bridge_a = bridge(&sites.a, "--connect");
    let base = |mode: &str, size: usize, site: &Site| {
        let mut env = vec![
            ("FERRY_DOMAIN", domain.clone()),
            ("BENCH_MODE", mode.to_owned()),
            ("BENCH_SIZE", size.to_string()),
            ("BENCH_SAMPLES", a.samples.to_string()),
            ("BENCH_WARMUP", a.warmup.to_string()),
            (
                "BENCH_COUNT",
                (a.flood_bytes / size as u64)
                    .clamp(1000, 100_000)
                    .to_string(),
            ),
            ("BENCH_B_ADDR", sites.b.addr.clone()),
            (
                "BENCH_SITE",
                if site.ns == sites.a.ns { "a" } else { "b" }.to_owned(),
            ),
        ];
        if mode == "direct" {
            env.push(("FERRY_PEERS", site.other_end.clone()));
        }
        env
    };
    // (mode, size) -> per round: (p50, p99, msgs/s)
    type PerRound = Vec<(f64, f64, f64)>;
    let mut results: std::collections::BTreeMap<(usize, &str), PerRound> = Default::default();
    for round in 0..a.rounds {
        for &size in &a.sizes {
            // Alternate which goes first.
            // A different one first each round.
            for k in 0..MODES.len() {
                let mode = MODES[(round + k) % MODES.len()];
                let pong = spawn(&sites.b, "pong", &base(mode, size, &sites.b));
                let ping = spawn(&sites.a, "ping", &base(mode, size, &sites.a));
                let out = output(ping, "ping");
                let _ = output(pong, "pong");
                let mut rtts: Vec<u64> = out
                    .trim()
                    .strip_prefix("rtt_ns ")
                    .unwrap()
                    .split(',')
                    .map(|x| x.parse().unwrap())
                    .collect();
                rtts.sort_unstable();
                let drain = spawn(&sites.b, "drain", &base(mode, size, &sites.b));
                let flood = spawn(&sites.a, "flood", &base(mode, size, &sites.a));
                let _ = output(flood, "flood");
                let d = output(drain, "drain");
                let f: Vec<&str> = d.split_whitespace().collect();
                let (got, secs): (f64, f64) = (f[1].parse().unwrap(), f[2].parse().unwrap());
                let rate = if secs > 0.0 { (got - 1.0) / secs } else { 0.0 };
                let (p50, p99) = (percentile(&rtts, 0.5) / 2.0, percentile(&rtts, 0.99) / 2.0);
                eprintln!(
                    "round {} {size:>6} B {mode:>8}: one-way p50 {:>8.1} us p99 {:>8.1} us, \
                     {:>9.0} msg/s",
                    round + 1,
                    p50 / 1e3,
                    p99 / 1e3,
                    rate
                );
                results
                    .entry((size, mode))
                    .or_default()
                    .push((p50, p99, rate));
            }
        }
    }
    let _ = bridge_a.kill();
    let _ = bridge_b.kill();
    let _ = bridge_a.wait();
    let _ = bridge_b.wait();
    println!(
        "| size | ferry UDP p50 / p99 (us) | bridged p50 / p99 (us) | Zenoh alone p50 / p99 \
         (us) | added p50 (us) | ferry UDP msg/s | bridged msg/s | Zenoh alone msg/s | \
         bridged / ferry UDP |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for &size in &a.sizes {
        let m = |mode: &str, k: usize| {
            median(
                results[&(size, mode)]
                    .iter()
                    .map(|r| [r.0, r.1, r.2][k])
                    .collect(),
            )
        };
        println!(
            "| {size} B | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | {:+.1} | {:.0} | {:.0} \
             | {:.0} | {:.2} |",
            m("direct", 0) / 1e3,
            m("direct", 1) / 1e3,
            m("bridged", 0) / 1e3,
            m("bridged", 1) / 1e3,
            m("zenoh", 0) / 1e3,
            m("zenoh", 1) / 1e3,
            (m("bridged", 0) - m("direct", 0)) / 1e3,
            m("direct", 2),
            m("bridged", 2),
            m("zenoh", 2),
            m("bridged", 2) / m("direct", 2),
        );
    }
    drop(sites);
}
