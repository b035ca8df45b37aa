//! Helpers shared by the multi-process test binaries: unique domains, payload patterns that
//! catch any torn byte, child processes (the test binary re-run with a role), bounded waits.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ferry::{Delivery, Impairment, IpVersion, Node, NodeConfig, Qos, Transport, WaitStrategy};

pub const ROLE: &str = "FERRY_TEST_ROLE";

/// A unique domain per test (and per run).
pub fn domain(test: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        &test[..test.len().min(12)]
    )
}

/// The payload of message `seq` of `len` bytes: u64 words derived from seq, so any torn or
/// misplaced byte is caught.
pub fn fill(seq: u64, buf: &mut [u8]) {
    let mut chunks = buf.chunks_exact_mut(8);
    for (i, c) in (&mut chunks).enumerate() {
        c.copy_from_slice(&(seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i as u64).to_le_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b = (seq as u8).wrapping_add(i as u8);
    }
}

pub fn check(seq: u64, buf: &[u8]) -> bool {
    let mut want = vec![0u8; buf.len()];
    fill(seq, &mut want);
    want == buf
}

/// Message sizes: a deterministic pseudo-random sequence in [1, max].
pub fn size_of_msg(seq: u64, max: usize) -> usize {
    match var("SIZES").as_str() {
        "log" => return log_size(seq, max),
        "max" => {
            return if seq % 2 == 0 {
                max
            } else {
                1 + seq as usize % 100
            }
        }
        _ => {}
    }
    let mut x = seq
        .wrapping_add(0x1234_5678)
        .wrapping_mul(6364136223846793005);
    x ^= x >> 29;
    // Mix small and large: half the messages below 4 KiB.
    if x & 1 == 0 {
        1 + (x >> 8) as usize % 4096.min(max)
    } else {
        1 + (x >> 8) as usize % max
    }
}

/// Sizes spread evenly on a log scale over [1, max]: mostly small, some near `max`.
pub fn log_size(seq: u64, max: usize) -> usize {
    let mut x = seq.wrapping_add(0xABCD).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 31;
    let frac = (x >> 11) as f64 / (1u64 << 53) as f64;
    ((max as f64).powf(frac) as usize).clamp(1, max)
}

/// A QoS from `spin,reliable,max=…` words; shared memory unless `udp`, `udp6` or `auto` is named.
/// A raw type named `name`, with no schema.
pub fn raw_type(name: &str) -> ferry::TopicType {
    ferry::TopicType::new(name, ferry::MessageEncoding::Raw, "").unwrap()
}

pub fn parse_qos(s: &str) -> Qos {
    let mut qos = Qos::default().transport(Transport::Shm);
    for part in s.split(',') {
        match part.split_once('=').unwrap_or((part, "")) {
            ("spin", _) => qos = qos.wait(WaitStrategy::Spin),
            ("block", _) => qos = qos.wait(WaitStrategy::Block),
            ("adaptive", _) => qos = qos.wait(WaitStrategy::Adaptive),
            ("reliable", _) => qos = qos.delivery(Delivery::Reliable),
            ("latest", _) => qos = qos.delivery(Delivery::Latest),
            ("udp", _) => qos = qos.transport(Transport::Udp),
            ("auto", _) => qos = qos.transport(Transport::Auto),
            ("shm", _) => qos = qos.transport(Transport::Shm),
            ("udp6", _) => qos = qos.transport(Transport::Udp).ip_version(IpVersion::V6),
            ("mtu", v) => qos = qos.mtu(v.parse().unwrap()),
            ("mcast", v) => {
                // group:port, on the loopback interface (tests never leave the machine).
                qos = qos.multicast(ferry::MulticastGroup::parse(v, Some("127.0.0.1"), 1).unwrap());
            }
            ("max", v) => qos = qos.max_message_size(v.parse().unwrap()),
            ("ring", v) => qos = qos.ring_capacity(v.parse().unwrap()),
            ("history", v) => qos = qos.history(v.parse().unwrap()),
            // A type by name alone (raw, no schema): what ends compare is its hash.
            ("type", v) => qos = qos.topic_type(raw_type(v)),
            ("timeout", v) => qos = qos.send_timeout(Duration::from_millis(v.parse().unwrap())),
            ("", _) => {}
            (other, _) => panic!("unknown qos part {other}"),
        }
    }
    qos
}

/// A QoS that blocks on `transport`, for messages of up to `max` bytes.
pub fn blocking_qos(transport: Transport, max: usize) -> Qos {
    Qos::default()
        .transport(transport)
        .wait(WaitStrategy::Block)
        .max_message_size(max)
}

/// A child's settings for `topic` of domain `dom` with `qos` (as `parse_qos` reads it), then
/// `more`.
pub fn topic_vars(
    (dom, topic, qos): (&str, &str, &str),
    more: &[(&'static str, String)],
) -> Vec<(&'static str, String)> {
    let mut vars = vec![
        ("DOMAIN", dom.to_owned()),
        ("TOPIC", topic.to_owned()),
        ("QOS", qos.to_owned()),
    ];
    vars.extend_from_slice(more);
    vars
}

/// Starts this test binary as a child in `role` on a topic, with `more` settings (as
/// `topic_vars` makes them).
pub fn spawn_on(role: &str, on: (&str, &str, &str), more: &[(&'static str, String)]) -> Child {
    spawn(role, &topic_vars(on, more))
}

/// Starts this test binary as a child in `role` with `KEY=VALUE` settings.
pub fn spawn(role: &str, vars: &[(&str, String)]) -> Child {
    spawn_with_env(role, vars, &[])
}

/// As `spawn`, with environment variables of ferry's own (`FERRY_PEERS`, …) for the child.
pub fn spawn_with_env(role: &str, vars: &[(&str, String)], env: &[(&str, String)]) -> Child {
    let mut cmd = child_command(&[], role, vars);
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    cmd.spawn().expect("spawn child")
}

/// This test binary, run behind `wrapper` (a program and its arguments that start it:
/// `ip netns exec NS`, `unshare …`; none: started directly), running only its ignored test
/// `entry`.
pub fn test_binary(wrapper: &[&str], entry: &str) -> Command {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = match wrapper.split_first() {
        Some((program, args)) => {
            let mut cmd = Command::new(program);
            cmd.args(args).arg(exe);
            cmd
        }
        None => Command::new(exe),
    };
    cmd.args([
        "--exact",
        entry,
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    cmd
}

/// The command that starts this test binary (behind `wrapper`, as in `test_binary`) as a child
/// in `role` with `KEY=VALUE` settings, its output piped.
pub fn child_command(wrapper: &[&str], role: &str, vars: &[(&str, String)]) -> Command {
    let mut cmd = test_binary(wrapper, "child_entry");
    cmd.env(ROLE, role)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in vars {
        cmd.env(format!("FERRY_TEST_{k}"), v);
    }
    cmd
}

pub fn var(k: &str) -> String {
    std::env::var(format!("FERRY_TEST_{k}")).unwrap_or_default()
}

pub fn var_u64(k: &str, default: u64) -> u64 {
    var(k).parse().unwrap_or(default)
}

/// Reads the child's stdout until a line starting with `prefix` (panics after `timeout` or at
/// its end).
pub fn wait_for_line(child: &mut Child, prefix: &str, timeout: Duration) {
    let out = child.stdout.take().expect("stdout piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.starts_with(prefix) => return,
            Ok(_) => {}
            Err(_) => panic!("the child did not say {prefix:?} within {timeout:?}"),
        }
    }
}

/// Waits for a child to exit, killing it after `timeout`. Returns its stdout lines.
pub fn finish(mut child: Child, timeout: Duration) -> (bool, Vec<String>) {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = BufReader::new(child.stdout.take().unwrap())
                .lines()
                .map_while(Result::ok)
                .collect();
            return (status.success(), out);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn kill9(child: &mut Child) {
    // SAFETY: kill(2) with a pid we spawned and still own (not yet reaped).
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    let _ = child.wait();
}

/// Polls `cond` until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    cond()
}

/// A subscriber and a publisher of one process that meet within `timeout`: each counts the
/// other (a subscriber attaches to a publisher when it looks for publishers).
pub fn meet(sub: &mut ferry::Subscriber, publ: &ferry::Publisher, timeout: Duration) -> bool {
    wait_until(timeout, || {
        sub.publisher_count() >= 1 && publ.subscriber_count() >= 1
    })
}

pub fn subscriber_count(domain: &str, topic: &str) -> usize {
    ferry::admin::topic(domain, topic)
        .ok()
        .flatten()
        .map_or(0, |t| t.subscribers.iter().filter(|s| s.alive).count())
}

/// The body of a child process started by `spawn` (each test binary has an `#[ignore]`d
/// `child_entry` test that calls this).
pub fn run_child() {
    let role = std::env::var(ROLE).expect("started without a role");
    // Die with the test process, whatever happens to it.
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes plain integers and affects only this process.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
    // Loss injection is a setting of the node: every endpoint of this child applies it.
    let impairment = Some(var("IMPAIR"))
        .filter(|spec| !spec.is_empty())
        .map(|spec| Impairment::parse(&spec).unwrap());
    let config = NodeConfig::from_env()
        .unwrap()
        .with_domain(&var("DOMAIN"))
        .with_impairment(impairment);
    let node = Node::with_config(&role, config).unwrap();
    let qos = match (role.as_str(), var("PUB_QOS")) {
        ("publisher", q) if !q.is_empty() => parse_qos(&q),
        _ => parse_qos(&var("QOS")),
    };
    let topic = var("TOPIC");
    let count = var_u64("COUNT", u64::MAX);
    let max = var_u64("MAXSIZE", 1024) as usize;
    match role.as_str() {
        "publisher" => {
            let mut p = node.publisher(&topic, &qos).unwrap();
            let subs = var_u64("WAIT_SUBS", 0) as usize;
            assert!(wait_until(Duration::from_secs(20), || p.subscriber_count() >= subs));
            println!("READY");
            let pace = Duration::from_micros(var_u64("PACE_US", 0));
            for seq in 0..count {
                let len = size_of_msg(seq, max);
                let mut loan = p.loan(len).unwrap();
                fill(seq, loan.as_mut_slice());
                loan.send().unwrap();
                if !pace.is_zero() {
                    std::thread::sleep(pace);
                }
            }
            println!("SENT {count}");
            // Stay, quiet, for subscribers that join afterwards (history).
            std::thread::sleep(Duration::from_millis(var_u64("LINGER_MS", 0)));
        }
        "subscriber" => {
            let mut s = node.subscriber(&topic, &qos).unwrap();
            println!("READY");
            let slow = Duration::from_micros(var_u64("SLOW_US", 0));
            let stop_after = var_u64("STOP_AFTER", u64::MAX);
            // Keep the first message of 16 KiB or more (held in place under latest delivery) and
            // stay alive holding it.
            let hold_large = var("HOLD_LARGE") == "1";
            let (mut received, mut skipped, mut last) = (0u64, 0u64, None::<u64>);
            while received < count {
                if received == stop_after {
                    // Stop reading, stay alive: a reliable publisher must wait for us.
                    std::thread::sleep(Duration::from_secs(600));
                }
                // Latest delivery may lose the last messages for good: a quiet stream ends it.
                let latest = var("QOS").contains("latest");
                let wait = if latest && received > 0 { 3 } else { 30 };
                let Some(sample) = s.recv_timeout(Duration::from_secs(wait)).unwrap() else {
                    assert!(latest, "no message within {wait} s");
                    break;
                };
                let seq = sample.seq();
                assert!(
                    check(seq, &sample),
                    "torn or wrong payload for seq {seq} ({} bytes)",
                    sample.len()
                );
                assert_eq!(sample.len(), size_of_msg(seq, max));
                if let Some(l) = last {
                    assert!(seq > l, "out of order: {seq} after {l}");
                    assert_eq!(sample.skipped(), seq - l - 1, "skip count");
                }
                if hold_large && sample.len() >= 16 << 10 {
                    println!("HOLDING {seq}");
                    std::thread::sleep(Duration::from_secs(600));
                }
                skipped += sample.skipped();
                last = Some(seq);
                received += 1;
                drop(sample);
                if !slow.is_zero() {
                    std::thread::sleep(slow);
                }
                if last == Some(count - 1) {
                    break;
                }
            }
            println!(
                "RESULT received={received} skipped={skipped} last={}",
                last.unwrap_or(0)
            );
        }
        other => panic!("unknown role {other}"),
    }
}

pub fn result_of(lines: &[String]) -> (u64, u64, u64) {
    let line = lines
        .iter()
        .find(|l| l.starts_with("RESULT"))
        .expect("child printed a result");
    let get = |k: &str| -> u64 {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(&format!("{k}=")))
            .unwrap()
            .parse()
            .unwrap()
    };
    (get("received"), get("skipped"), get("last"))
}

/// Runs one subscriber child and one publisher child; returns the subscriber's result.
pub fn exchange(test: &str, qos: &str, count: u64, max: usize, slow_us: u64) -> (u64, u64, u64) {
    exchange_with(test, qos, count, max, slow_us, &[])
}

/// `exchange` with more settings for both children (e.g. `IMPAIR`, `SIZES`).
pub fn exchange_with(
    test: &str,
    qos: &str,
    count: u64,
    max: usize,
    slow_us: u64,
    more: &[(&'static str, String)],
) -> (u64, u64, u64) {
    let dom = domain(test);
    let vars = |extra: Vec<(&'static str, String)>| {
        let mut v = topic_vars(
            (&dom, "data", qos),
            &[("COUNT", count.to_string()), ("MAXSIZE", max.to_string())],
        );
        v.extend(more.iter().cloned());
        v.extend(extra);
        v
    };
    let sub = spawn("subscriber", &vars(vec![("SLOW_US", slow_us.to_string())]));
    let publ = spawn("publisher", &vars(vec![("WAIT_SUBS", "1".into())]));
    let (pub_ok, _) = finish(publ, Duration::from_secs(600));
    let (sub_ok, lines) = finish(sub, Duration::from_secs(600));
    assert!(
        pub_ok && sub_ok,
        "children failed (publisher ok: {pub_ok}, subscriber ok: {sub_ok})"
    );
    let r = result_of(&lines);
    assert!(
        ferry::admin::topic(&dom, "data").unwrap().is_none(),
        "the last participant removes the topic"
    );
    r
}
