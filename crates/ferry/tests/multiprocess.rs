//! Whole behaviours across real processes: the test binary re-runs itself as publisher or
//! subscriber children (see `child_entry`), each test in its own domain so segments never clash.
//! Every wait has a deadline; no test asserts a timing.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ferry::{Delivery, Node, Qos, WaitStrategy};

const ROLE: &str = "FERRY_TEST_ROLE";

/// A unique domain per test (and per run).
fn domain(test: &str) -> String {
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
fn fill(seq: u64, buf: &mut [u8]) {
    let mut chunks = buf.chunks_exact_mut(8);
    for (i, c) in (&mut chunks).enumerate() {
        c.copy_from_slice(&(seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i as u64).to_le_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b = (seq as u8).wrapping_add(i as u8);
    }
}

fn check(seq: u64, buf: &[u8]) -> bool {
    let mut want = vec![0u8; buf.len()];
    fill(seq, &mut want);
    want == buf
}

/// Message sizes: a deterministic pseudo-random sequence in [1, max].
fn size_of_msg(seq: u64, max: usize) -> usize {
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

fn parse_qos(s: &str) -> Qos {
    let mut qos = Qos::default();
    for part in s.split(',') {
        match part.split_once('=').unwrap_or((part, "")) {
            ("spin", _) => qos = qos.wait(WaitStrategy::Spin),
            ("block", _) => qos = qos.wait(WaitStrategy::Block),
            ("adaptive", _) => qos = qos.wait(WaitStrategy::Adaptive),
            ("reliable", _) => qos = qos.delivery(Delivery::Reliable),
            ("latest", _) => qos = qos.delivery(Delivery::Latest),
            ("max", v) => qos = qos.max_message_size(v.parse().unwrap()),
            ("ring", v) => qos = qos.ring_capacity(v.parse().unwrap()),
            ("timeout", v) => qos = qos.send_timeout(Duration::from_millis(v.parse().unwrap())),
            ("", _) => {}
            (other, _) => panic!("unknown qos part {other}"),
        }
    }
    qos
}

/// Starts this test binary as a child in `role` with `KEY=VALUE` settings.
fn spawn(role: &str, vars: &[(&str, String)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child_entry",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(ROLE, role)
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    for (k, v) in vars {
        cmd.env(format!("FERRY_TEST_{k}"), v);
    }
    cmd.spawn().expect("spawn child")
}

fn var(k: &str) -> String {
    std::env::var(format!("FERRY_TEST_{k}")).unwrap_or_default()
}

fn var_u64(k: &str, default: u64) -> u64 {
    var(k).parse().unwrap_or(default)
}

/// Waits for a child to exit, killing it after `timeout`. Returns its stdout lines.
fn finish(mut child: Child, timeout: Duration) -> (bool, Vec<String>) {
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

fn kill9(child: &mut Child) {
    // SAFETY: kill(2) with a pid we spawned and still own (not yet reaped).
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    let _ = child.wait();
}

/// Polls `cond` until it holds or `timeout` passes.
fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    cond()
}

fn subscriber_count(domain: &str, topic: &str) -> usize {
    ferry::admin::topic(domain, topic)
        .ok()
        .flatten()
        .map_or(0, |t| t.subscribers.iter().filter(|s| s.alive).count())
}

/// The children. Not a test of its own: the tests below start it with a role.
#[test]
#[ignore = "entry point of child processes started by the other tests"]
fn child_entry() {
    let role = std::env::var(ROLE).expect("started without a role");
    // Die with the test process, whatever happens to it.
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes plain integers and affects only this process.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
    let node = Node::with_domain(&role, &var("DOMAIN")).unwrap();
    let qos = parse_qos(&var("QOS"));
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
        }
        "subscriber" => {
            let mut s = node.subscriber(&topic, &qos).unwrap();
            println!("READY");
            let slow = Duration::from_micros(var_u64("SLOW_US", 0));
            let stop_after = var_u64("STOP_AFTER", u64::MAX);
            let (mut received, mut skipped, mut last) = (0u64, 0u64, None::<u64>);
            while received < count {
                if received == stop_after {
                    // Stop reading, stay alive: a reliable publisher must wait for us.
                    std::thread::sleep(Duration::from_secs(600));
                }
                let sample = s
                    .recv_timeout(Duration::from_secs(30))
                    .unwrap()
                    .expect("message within 30 s");
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

fn result_of(lines: &[String]) -> (u64, u64, u64) {
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
fn exchange(test: &str, qos: &str, count: u64, max: usize, slow_us: u64) -> (u64, u64, u64) {
    let dom = domain(test);
    let vars = |extra: Vec<(&'static str, String)>| {
        let mut v = vec![
            ("DOMAIN", dom.clone()),
            ("TOPIC", "data".to_owned()),
            ("QOS", qos.to_owned()),
            ("COUNT", count.to_string()),
            ("MAXSIZE", max.to_string()),
        ];
        v.extend(extra);
        v
    };
    let sub = spawn("subscriber", &vars(vec![("SLOW_US", slow_us.to_string())]));
    let publ = spawn("publisher", &vars(vec![("WAIT_SUBS", "1".into())]));
    let (pub_ok, _) = finish(publ, Duration::from_secs(120));
    let (sub_ok, lines) = finish(sub, Duration::from_secs(120));
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

#[test]
fn every_delivery_and_wait_strategy_across_processes() {
    for wait in ["spin", "block", "adaptive"] {
        let (received, skipped, last) = exchange(
            "combo",
            &format!("{wait},reliable,max=65536"),
            3000,
            65536,
            0,
        );
        assert_eq!(
            (received, skipped, last),
            (3000, 0, 2999),
            "reliable + {wait} delivers everything"
        );
        let (received, skipped, last) =
            exchange("combo", &format!("{wait},latest,max=65536"), 3000, 65536, 0);
        assert_eq!(last, 2999, "latest + {wait} sees the last message");
        assert!(
            received > 0 && received + skipped <= 3000,
            "latest + {wait}: {received} + {skipped}"
        );
    }
}

#[test]
fn random_sizes_up_to_8_mib_arrive_intact() {
    let max = 8 << 20;
    let (received, skipped, _) =
        exchange("big", &format!("adaptive,reliable,max={max}"), 120, max, 0);
    assert_eq!((received, skipped), (120, 0));
}

#[test]
fn a_latest_subscriber_slower_than_its_publisher_skips_and_counts_but_never_tears() {
    // A 64 KiB ring, messages up to 8 KiB, and a reader that naps after each message.
    let (received, skipped, last) = exchange(
        "slow",
        "block,latest,max=8192,ring=65536",
        20_000,
        8192,
        200,
    );
    println!("latest, slow subscriber: 20000 sent, {received} received intact, {skipped} skipped (counted)");
    assert_eq!(last, 19_999);
    assert!(
        skipped > 0,
        "a slow latest subscriber must be lapped (received {received})"
    );
    assert!(received < 20_000);
}

#[test]
fn subscriber_survives_sigkill_of_the_publisher_and_a_restart_resumes_the_topic() {
    let dom = domain("pubkill");
    let node = Node::with_domain("reader", &dom).unwrap();
    let max = 256 << 10;
    let qos = parse_qos(&format!("adaptive,reliable,max={max}"));
    let mut sub = node.subscriber("data", &qos).unwrap();
    for round in 0..4u64 {
        let mut publ = spawn(
            "publisher",
            &[
                ("DOMAIN", dom.clone()),
                ("TOPIC", "data".into()),
                ("QOS", format!("adaptive,reliable,max={max}")),
                ("MAXSIZE", max.to_string()),
                ("WAIT_SUBS", "1".into()),
            ],
        );
        // Read a while, then kill the publisher at an arbitrary point of its stream.
        let mut got = 0;
        let mut last = None;
        while got < 200 + round * 37 {
            let s = sub
                .recv_timeout(Duration::from_secs(20))
                .unwrap()
                .expect("publisher sends");
            assert!(check(s.seq(), &s), "intact payload");
            if let Some(l) = last {
                assert_eq!(s.seq(), l + 1, "reliable: no gap");
            }
            last = Some(s.seq());
            got += 1;
        }
        kill9(&mut publ);
        // Whatever it committed before dying still arrives intact; then the topic goes quiet.
        while let Some(s) = sub.recv_timeout(Duration::from_millis(300)).unwrap() {
            assert!(check(s.seq(), &s), "intact payload after the kill");
        }
        assert!(
            wait_until(Duration::from_secs(5), || sub.publisher_count() == 0),
            "the subscriber sees the publisher gone"
        );
    }
    // The dead publishers' data segments are gone.
    let left: Vec<_> = ferry::sys::shm_list(&format!("ferry.{dom}.data@")).unwrap();
    assert!(left.is_empty(), "stale data segments: {left:?}");
}

#[test]
fn a_reliable_publisher_stops_waiting_for_a_subscriber_killed_by_sigkill() {
    let dom = domain("subkill");
    let node = Node::with_domain("writer", &dom).unwrap();
    let qos = parse_qos("block,reliable,max=1024,ring=65536,timeout=20000");
    let mut publ = node.publisher("data", &qos).unwrap();
    let mut sub = spawn(
        "subscriber",
        &[
            ("DOMAIN", dom.clone()),
            ("TOPIC", "data".into()),
            ("QOS", "block,reliable".into()),
            ("MAXSIZE", "1024".into()),
            ("STOP_AFTER", "10".into()),
        ],
    );
    assert!(wait_until(Duration::from_secs(30), || publ
        .subscriber_count()
        == 1));
    // The subscriber reads 10 messages and stalls; once the publisher is seen waiting on the full
    // ring, a watcher kills the subscriber.
    let watch_dom = dom.clone();
    let killer = std::thread::spawn(move || {
        let waiting = wait_until(Duration::from_secs(30), || {
            ferry::admin::topic(&watch_dom, "data")
                .ok()
                .flatten()
                .is_some_and(|t| t.publishers.first().is_some_and(|p| p.waits >= 1))
        });
        std::thread::sleep(Duration::from_millis(50));
        kill9(&mut sub);
        waiting
    });
    // 5000 messages of up to 1 KiB cannot fit a 64 KiB ring: the sends must wait, and go on once
    // the dead subscriber is evicted (well within the 20 s send timeout).
    for seq in 0..5000 {
        let len = size_of_msg(seq, 1024);
        let mut loan = publ
            .loan(len)
            .expect("no timeout: the dead subscriber is evicted");
        fill(seq, loan.as_mut_slice());
        loan.send().unwrap();
    }
    assert!(
        killer.join().unwrap(),
        "the publisher waited for the stalled subscriber"
    );
    let snap = ferry::admin::topic(&dom, "data").unwrap().unwrap();
    assert_eq!(snap.publishers[0].evictions, 1, "one eviction counted");
    assert_eq!(snap.publishers[0].timeouts, 0);
    assert!(snap.publishers[0].waits >= 1);
    assert!(
        snap.subscribers.is_empty(),
        "the dead subscriber's slot is freed"
    );
}

#[test]
fn a_reliable_publisher_times_out_on_a_live_stalled_subscriber() {
    let dom = domain("stall");
    let node = Node::with_domain("writer", &dom).unwrap();
    let mut publ = node
        .publisher(
            "data",
            &parse_qos("spin,reliable,max=1024,ring=4096,timeout=200"),
        )
        .unwrap();
    let _stalled = node
        .subscriber("data", &parse_qos("block,reliable"))
        .unwrap();
    let mut result = Ok(());
    for _ in 0..100 {
        result = publ.send(&[1u8; 1000]);
        if result.is_err() {
            break;
        }
    }
    assert_eq!(
        result,
        Err(ferry::SendError::Timeout(Duration::from_millis(200)))
    );
    let snap = ferry::admin::topic(&dom, "data").unwrap().unwrap();
    assert_eq!(snap.publishers[0].timeouts, 1);
    assert!(snap.publishers[0].waits >= 1);
}

fn write_segment(name: &str, bytes: &[u8]) {
    std::fs::write(format!("/dev/shm/{name}"), bytes).unwrap();
}

#[test]
fn foreign_truncated_and_other_version_segments_are_refused() {
    let dom = domain("foreign");
    let node = Node::with_domain("n", &dom).unwrap();
    let qos = Qos::default();

    write_segment(&format!("ferry.{dom}.garbage"), &[0xAB; 8192]);
    let e = node.publisher("garbage", &qos).unwrap_err();
    assert!(matches!(e, ferry::Error::Foreign { .. }), "{e}");
    assert!(e.to_string().contains("not a ferry segment"));

    write_segment(&format!("ferry.{dom}.short"), &[1, 2, 3]);
    let e = node.subscriber("short", &qos).unwrap_err();
    assert!(matches!(e, ferry::Error::Truncated { .. }), "{e}");

    // A real control segment, then its version changed under it.
    drop(node.publisher("versioned", &qos).unwrap());
    let _keep = node.subscriber("versioned", &qos).unwrap();
    let path = format!("/dev/shm/ferry.{dom}.versioned");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8..12].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let e = node.publisher("versioned", &qos).unwrap_err();
    assert!(matches!(e, ferry::Error::Version { found: 99, .. }), "{e}");

    for t in ["garbage", "short", "versioned"] {
        let _ = ferry::sys::shm_unlink(&format!("ferry.{dom}.{t}"));
    }
}

#[test]
fn a_corrupt_record_is_an_error_for_that_publisher_only() {
    let dom = domain("corrupt");
    let node = Node::with_domain("n", &dom).unwrap();
    let qos = parse_qos("spin,reliable,max=1024");
    let mut sub = node.subscriber("data", &qos).unwrap();
    let mut bad = node.publisher("data", &qos).unwrap();
    let mut good = node.publisher("data", &qos).unwrap();
    assert_eq!(sub.publisher_count(), 2);
    bad.send(b"first").unwrap();
    // Scribble over the record header of `bad`'s first message, as a foreign writer would.
    let seg = ferry::sys::shm_list(&format!("ferry.{dom}.data@")).unwrap();
    let header = ferry::sys::page_size() * 3; // data block header is at most 16 KiB
    let mut hit = false;
    for name in seg {
        let path = format!("/dev/shm/{name}");
        let mut bytes = std::fs::read(&path).unwrap();
        for off in (0..=header).step_by(ferry::sys::page_size()) {
            if bytes.len() > off + 21 && &bytes[off + 16..off + 21] == b"first" {
                bytes[off + 8..off + 16].copy_from_slice(&[0xFF; 8]);
                std::fs::write(&path, &bytes).unwrap();
                hit = true;
            }
        }
    }
    assert!(hit, "found the record to corrupt");
    good.send(b"second").unwrap();
    let mut errors = 0;
    let mut got = Vec::new();
    for _ in 0..4 {
        match sub.try_recv() {
            Ok(Some(s)) => got.push(s.to_vec()),
            Ok(None) => {}
            Err(ferry::RecvError::Corrupt { .. }) => errors += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(errors, 1, "the corrupt ring is reported once");
    assert_eq!(
        got,
        vec![b"second".to_vec()],
        "the healthy publisher is still read"
    );
    assert_eq!(sub.refused_publishers().len(), 1);
}

#[test]
fn segments_are_owner_only_and_clean_removes_what_the_dead_left() {
    use std::os::unix::fs::PermissionsExt;
    let dom = domain("clean");
    let mut publ = spawn(
        "publisher",
        &[
            ("DOMAIN", dom.clone()),
            ("TOPIC", "data".into()),
            ("QOS", "block,reliable".into()),
            ("PACE_US", "1000".into()),
        ],
    );
    let mut sub = spawn(
        "subscriber",
        &[
            ("DOMAIN", dom.clone()),
            ("TOPIC", "data".into()),
            ("QOS", "block,reliable".into()),
            ("MAXSIZE", "1024".into()),
        ],
    );
    assert!(wait_until(Duration::from_secs(30), || subscriber_count(
        &dom, "data"
    ) == 1));
    let names = ferry::sys::shm_list(&format!("ferry.{dom}.")).unwrap();
    assert_eq!(names.len(), 2, "a control and a data segment: {names:?}");
    for n in &names {
        let mode = std::fs::metadata(format!("/dev/shm/{n}"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{n} is owner-only");
    }
    kill9(&mut publ);
    kill9(&mut sub);
    let report = ferry::admin::clean(Some(&dom)).unwrap();
    assert!(report.freed_slots >= 1, "{report:?}");
    assert!(
        ferry::sys::shm_list(&format!("ferry.{dom}."))
            .unwrap()
            .is_empty(),
        "{report:?}"
    );
}

#[test]
fn a_dead_participants_slot_is_reclaimed_when_the_topic_is_opened_again() {
    let dom = domain("reclaim");
    let mut sub = spawn(
        "subscriber",
        &[
            ("DOMAIN", dom.clone()),
            ("TOPIC", "data".into()),
            ("QOS", "block".into()),
        ],
    );
    assert!(wait_until(Duration::from_secs(30), || subscriber_count(
        &dom, "data"
    ) == 1));
    kill9(&mut sub);
    let node = Node::with_domain("n", &dom).unwrap();
    let publ = node.publisher("data", &Qos::default()).unwrap();
    let snap = ferry::admin::topic(&dom, "data").unwrap().unwrap();
    assert!(
        snap.subscribers.is_empty(),
        "opening the topic swept the dead subscriber"
    );
    drop(publ);
    assert!(ferry::sys::shm_list(&format!("ferry.{dom}."))
        .unwrap()
        .is_empty());
}

#[test]
fn pid_reuse_cannot_fool_liveness() {
    let me = ferry::sys::ProcessId::current();
    assert!(me.is_alive());
    let impostor = ferry::sys::ProcessId {
        start_time: me.start_time + 1,
        ..me
    };
    assert!(
        !impostor.is_alive(),
        "same pid, other start time: another process"
    );
}
