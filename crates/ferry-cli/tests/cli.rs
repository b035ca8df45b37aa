//! Runs the built `ferry` binary: pub/echo exchanging messages, topics/stats/clean on live and
//! dead topics, argument errors, and a short latency lab run. Every test uses its own domain and
//! every wait is bounded; children are killed if a test fails.

use std::time::{Duration, Instant};

use rustix::process::Signal;

mod common;

use common::running::{domain, pub_args, spawn, spawn_in, spawn_in_unread, Running, LONG};
use common::{check_contains, Ended, IMU_SCHEMA};

/// The arguments of `ferry echo TOPIC ARGS` that fails after 30 s without a message.
fn echo_args<'a>(topic: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    [&["echo", topic], args, &["--timeout", "30"]].concat()
}

/// `ferry echo TOPIC ARGS` in domain `d`, failing after 30 s without a message.
fn start_echo(d: &str, topic: &str, args: &[&str]) -> Running {
    spawn(&[echo_args(topic, args), vec!["--domain", d]].concat())
}

/// `ferry pub TOPIC ARGS` in domain `d`, from when `subscribers` are attached (within 30 s).
fn start_pub(d: &str, topic: &str, subscribers: &str, args: &[&str]) -> Running {
    spawn(&[pub_args(topic, subscribers, args), vec!["--domain", d]].concat())
}

/// `ferry serve SERVICE ARGS` in domain `d`, once it serves.
fn start_server(d: &str, service: &str, args: &[&str]) -> Running {
    let server = spawn(&[&["serve", service], args, &["--domain", d]].concat());
    server.await_line(true, "serving", LONG);
    server
}

/// `ferry call SERVICE ARGS` in domain `d`, waiting up to 20 s for a server.
fn start_call(d: &str, service: &str, args: &[&str]) -> Running {
    let wait = ["--wait-server", "20", "--domain", d];
    spawn(&[&["call", service], args, &wait].concat())
}

fn run(args: &[&str], timeout: Duration) -> Ended {
    spawn(args).finish(timeout)
}

fn run_ok(args: &[&str]) -> String {
    let out = run(args, Duration::from_secs(30));
    assert!(
        out.status.success(),
        "ferry {} failed: {}",
        args.join(" "),
        out.stderr
    );
    out.stdout
}

/// Runs `ferry ARGS`, which must fail saying `expected`.
fn fails_saying(args: &[&str], expected: &str) -> Ended {
    let out = run(args, LONG);
    assert!(
        !out.status.success(),
        "ferry {} should fail",
        args.join(" ")
    );
    assert!(
        out.stderr.contains(expected),
        "ferry {}: expected {expected:?} in: {}",
        args.join(" "),
        out.stderr
    );
    out
}

/// Polls `check` until it holds, at most `timeout`.
fn wait_until(timeout: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn topics_json(domain: &str) -> serde_json::Value {
    serde_json::from_str(&run_ok(&["topics", "--domain", domain, "--json"])).expect("topics JSON")
}

#[test]
fn help_reads_well() {
    let top = run_ok(&["--help"]);
    let commands = ["pub", "echo", "topics", "stats", "clean", "lab"];
    check_contains("--help", &top, &commands);
    assert!(!top.contains("lab-peer"), "the peer command is hidden");
    let lab = run_ok(&["lab", "latency", "--help"]);
    let options = [
        "--transport",
        "--sizes",
        "--samples",
        "--rounds",
        "--pin",
        "--json",
    ];
    check_contains("lab latency --help", &lab, &options);
}

#[test]
fn pub_and_echo_exchange_messages() {
    let d = domain("pe");
    let json_echo = start_echo(&d, "demo/x", &["--count", "5", "--json"]);
    let text_echo = start_echo(&d, "demo/x", &["--count", "5"]);
    let publisher = start_pub(
        &d,
        "demo/x",
        "2",
        &["--size", "16", "--rate", "200", "--count", "5"],
    );
    let p = publisher.succeed();
    assert!(p.stderr.contains("sent 5 messages"), "{}", p.stderr);

    let j = json_echo.succeed();
    check_five_json_messages(&j.stdout);

    let t = text_echo.succeed();
    let text: Vec<&str> = t.stdout.lines().collect();
    assert_eq!(text.len(), 5, "{}", t.stdout);
    assert_eq!(
        text[2],
        "seq 2  size 16  02000000 00000000 02020202 02020202"
    );
}

#[test]
fn a_typed_topic_is_echoed_by_field_name_and_a_subscriber_of_another_type_is_refused() {
    let d = domain("typed");
    let json_echo = start_echo(&d, "imu", &["--count", "3", "--json"]);
    let text_echo = start_echo(&d, "imu", &["--count", "3"]);
    let raw_echo = start_echo(&d, "imu", &["--count", "3", "--raw"]);
    let publisher = start_pub(
        &d,
        "imu",
        "3",
        &[
            "--type",
            "sensor_msgs/msg/Imu",
            "--schema",
            IMU_SCHEMA,
            "--yaml",
            "{header: {stamp: {sec: 12, nanosec: 34}, frame_id: imu_link}, orientation: {w: 1.0}, \
             angular_velocity: {y: -1.25}, linear_acceleration_covariance: [1, 2, 3, 4, 5, 6, 7, 8, 9]}",
            "--rate",
            "100",
            "--count",
            "3",
            "--keep-alive",
            "30",
        ],
    );
    let j = json_echo.succeed();
    let lines: Vec<&str> = j.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", j.stdout);
    for (i, line) in lines.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["seq"], i as u64);
        let m = &v["message"];
        assert_eq!(m["header"]["frame_id"], "imu_link", "{line}");
        assert_eq!(m["header"]["stamp"]["nanosec"], 34, "{line}");
        assert_eq!(m["orientation"]["w"], 1.0, "{line}");
        assert_eq!(m["angular_velocity"]["y"], -1.25, "{line}");
        assert_eq!(m["linear_acceleration_covariance"][8], 9.0, "{line}");
    }
    let t = text_echo.succeed();
    assert!(
        t.stdout
            .starts_with("seq 0  size 324\nheader:\n  stamp:\n    sec: 12\n"),
        "{}",
        t.stdout
    );
    assert!(
        t.stdout.contains("\n  frame_id: \"imu_link\"\n"),
        "{}",
        t.stdout
    );
    assert_eq!(t.stdout.matches("---\n").count(), 3, "{}", t.stdout);
    let r = raw_echo.succeed();
    assert!(
        r.stdout.starts_with("seq 0  size 324  00010000 0c000000"),
        "{}",
        r.stdout
    );

    // The topic shows its type; a subscriber declaring another is refused, naming both.
    let listed = run_ok(&["topics", "--domain", &d]);
    assert!(listed.contains("sensor_msgs/msg/Imu (cdr)"), "{listed}");
    let v3 = std::env::temp_dir().join(format!("ferry-vector3-{}.msg", std::process::id()));
    std::fs::write(&v3, "float64 x\nfloat64 y\nfloat64 z\n").unwrap();
    let refused = run(
        &[
            "echo",
            "imu",
            "--type",
            "geometry_msgs/msg/Vector3",
            "--schema",
            v3.to_str().unwrap(),
            "--timeout",
            "5",
            "--domain",
            &d,
        ],
        LONG,
    );
    let _ = std::fs::remove_file(&v3);
    assert!(!refused.status.success());
    check_contains(
        "echo of another type",
        &refused.stderr,
        &[
            "carries type sensor_msgs/msg/Imu",
            "declares geometry_msgs/msg/Vector3",
        ],
    );
    drop(publisher);

    // Text that does not fit the type is refused by field, before anything is published.
    fails_saying(
        &[
            "pub",
            "imu2",
            "--type",
            "sensor_msgs/msg/Imu",
            "--schema",
            IMU_SCHEMA,
            "--yaml",
            "{header: {stamp: {sec: soon}}}",
            "--domain",
            &d,
        ],
        "header.stamp.sec",
    );
}

#[test]
fn a_protobuf_topic_is_echoed_by_field_name() {
    let d = domain("proto");
    let schema = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../ferry-types/tests/data/reading.pb"
    );
    let echo = start_echo(&d, "reading", &["--count", "2", "--json"]);
    let publisher = start_pub(
        &d,
        "reading",
        "1",
        &[
            "--type",
            "ferry.test.Reading",
            "--encoding",
            "protobuf",
            "--schema",
            schema,
            "--yaml",
            "{frame_id: imu, stamp_ns: 7, values: [0.5, 1.5], kind: KIND_FAST, inner: {label: a}}",
            "--count",
            "2",
            "--rate",
            "100",
        ],
    );
    publisher.succeed();
    let e = echo.succeed();
    for line in e.stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let m = &v["message"];
        assert_eq!(m["frame_id"], "imu", "{line}");
        assert_eq!(m["stamp_ns"], 7, "{line}");
        assert_eq!(m["values"][1], 1.5, "{line}");
        assert_eq!(m["kind"], "KIND_FAST", "{line}");
        assert_eq!(m["inner"]["label"], "a", "{line}");
        assert_eq!(m["inner"]["next"], serde_json::Value::Null, "{line}");
    }
    assert_eq!(e.stdout.lines().count(), 2, "{}", e.stdout);
}

#[test]
fn one_echo_reads_several_topics_each_line_naming_its_topic() {
    let d = domain("many");
    let echo = spawn_in(&d, &echo_args("a", &["b", "c", "--count", "6", "--json"]));
    let pubs: Vec<Running> = ["a", "b", "c"]
        .iter()
        .map(|t| {
            spawn_in(
                &d,
                &pub_args(t, "1", &["--size", "16", "--rate", "100", "--count", "2"]),
            )
        })
        .collect();
    for p in pubs {
        p.succeed();
    }
    let out = echo.succeed();
    let mut per_topic = std::collections::BTreeMap::<String, Vec<u64>>::new();
    for line in out.stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        per_topic
            .entry(
                v["topic"]
                    .as_str()
                    .expect("a topic on each line")
                    .to_owned(),
            )
            .or_default()
            .push(v["seq"].as_u64().unwrap());
    }
    let want: std::collections::BTreeMap<String, Vec<u64>> = ["a", "b", "c"]
        .iter()
        .map(|t| (t.to_string(), vec![0, 1]))
        .collect();
    assert_eq!(per_topic, want, "{}", out.stdout);
}

#[test]
fn echo_that_starts_late_gets_what_pub_kept_then_the_live_ones() {
    echo_late_over("auto");
}

#[test]
fn over_udp_echo_that_starts_late_gets_what_pub_kept() {
    echo_late_over("udp");
}

fn echo_late_over(transport: &str) {
    let d = domain("hist");
    // Twenty messages at once, kept five, then quiet for a while.
    let publisher = spawn_in(
        &d,
        &[
            "pub",
            "cfg",
            "--size",
            "16",
            "--rate",
            "0",
            "--count",
            "20",
            "--history",
            "5",
            "--keep-alive",
            "30",
            "--transport",
            transport,
        ],
    );
    publisher.await_line(true, "staying", LONG);
    let out = run(
        &[
            "echo",
            "cfg",
            "--history",
            "3",
            "--count",
            "3",
            "--json",
            "--timeout",
            "20",
            "--domain",
            &d,
            "--transport",
            transport,
        ],
        LONG,
    );
    assert!(out.status.success(), "echo failed: {}", out.stderr);
    let seqs = common::json_seqs(&out.stdout);
    assert_eq!(
        seqs,
        vec![17, 18, 19],
        "the last three kept: {}",
        out.stdout
    );
    publisher.stop_with(Signal::INT);
}

#[test]
fn echo_events_names_the_publisher_that_appears_and_the_one_that_closes() {
    let d = domain("ev");
    // Six messages from two publishers in turn: the first one's close is seen before the
    // second one's messages are all read.
    let echo = start_echo(&d, "ev/x", &["--events", "--count", "6"]);
    for _ in 0..2 {
        let publisher = start_pub(&d, "ev/x", "1", &["--count", "3", "--rate", "100"]);
        publisher.succeed();
        // Time for the echo to see this publisher leave before the next one comes.
        std::thread::sleep(Duration::from_millis(300));
    }
    let e = echo.succeed();
    let lines: Vec<&str> = e.stdout.lines().collect();
    let appeared: Vec<&&str> = lines
        .iter()
        .filter(|l| l.starts_with("publisher shm:") && l.contains(" appeared (node \"ferry-pub"))
        .collect();
    assert_eq!(appeared.len(), 2, "{}", e.stdout);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("publisher shm:") && l.ends_with(" gone: closed")),
        "{}",
        e.stdout
    );
    assert_eq!(lines.iter().filter(|l| l.starts_with("seq ")).count(), 6);
}

#[test]
fn echo_counts_the_deadline_periods_without_a_message() {
    let d = domain("dl");
    // Nobody publishes: every 50 ms period passes without a message until the echo gives up.
    let e = spawn(&[
        "echo",
        "dl/x",
        "--events",
        "--deadline",
        "0.05",
        "--timeout",
        "0.5",
        "--domain",
        &d,
    ])
    .finish(LONG);
    assert!(!e.status.success(), "no message: the echo times out");
    let missed: Vec<u64> = e
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("deadline missed ("))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    assert!(!missed.is_empty(), "{}", e.stdout);
    // Counted in order, one line per check, at most one period per 50 ms waited.
    assert!(missed.windows(2).all(|w| w[0] < w[1]), "{missed:?}");
    assert!(*missed.last().unwrap() <= 11, "{missed:?}");
}

/// A publisher over shared memory only cannot reach a subscriber of its host that listens over
/// UDP only: `ferry pub` says so instead of ending as if they had been delivered; over `auto` it
/// reaches it and says nothing.
#[test]
fn pub_warns_of_a_subscriber_its_transport_cannot_reach() {
    let d = domain("mix");
    let echo = start_echo(&d, "mix/x", &["--transport", "udp"]);
    wait_until(LONG, "the UDP subscriber to appear", || {
        topics_json(&d)[0]["subscribers"][0]["alive"] == true
    });
    let out = spawn(&[
        "pub",
        "mix/x",
        "--transport",
        "shm",
        "--count",
        "3",
        "--rate",
        "0",
        "--domain",
        &d,
    ])
    .finish(LONG);
    assert!(out.status.success(), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("of this host listens over UDP only: it got none of these messages"),
        "{}",
        out.stderr
    );
    let out = spawn(&[
        "pub",
        "mix/x",
        "--transport",
        "auto",
        "--count",
        "1",
        "--domain",
        &d,
    ])
    .finish(LONG);
    assert!(out.status.success(), "{}", out.stderr);
    assert!(!out.stderr.contains("listens over"), "{}", out.stderr);
    let e = echo.stop_with(Signal::TERM);
    assert!(e.stdout.starts_with("seq 0 "), "{}", e.stdout);
}

/// `ferry pub --deadline` says in its summary how many periods passed without a send: none at
/// a rate well inside the period, some at one well outside it.
#[test]
fn pub_counts_its_deadline_periods_without_a_send() {
    let d = domain("pdl");
    let summary = |rate: &str, deadline: &str| {
        let out = spawn(&[
            "pub",
            "pdl/x",
            "--rate",
            rate,
            "--count",
            "4",
            "--deadline",
            deadline,
            "--domain",
            &d,
        ])
        .finish(LONG);
        assert!(out.status.success(), "{}", out.stderr);
        let line = out
            .stderr
            .lines()
            .find(|l| l.starts_with("sent 4 messages"))
            .unwrap_or_else(|| panic!("no summary in {}", out.stderr))
            .to_owned();
        let n: u64 = line
            .split("; ")
            .find_map(|part| part.strip_suffix(" without a send"))
            .and_then(|c| c.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no deadline count in {line:?}"));
        n
    };
    // Four sends 250 ms apart against a 50 ms deadline: each gap misses periods.
    assert!(summary("4", "0.05") >= 3);
    // Four sends as fast as they go against a 10 s deadline: none.
    assert_eq!(summary("0", "10"), 0);
}

#[test]
fn pub_and_echo_exchange_messages_over_udp() {
    let d = domain("udp");
    let echo = spawn_in(
        &d,
        &echo_args("demo/u", &["--transport", "udp", "--count", "5", "--json"]),
    );
    let publisher = spawn_in(
        &d,
        &pub_args(
            "demo/u",
            "1",
            &[
                "--transport",
                "udp",
                "--size",
                "16",
                "--rate",
                "100",
                "--count",
                "5",
            ],
        ),
    );
    let p = publisher.succeed();
    assert!(p.stderr.contains("sent 5 messages"), "{}", p.stderr);
    let e = echo.succeed();
    check_five_json_messages(&e.stdout);
}

/// `ferry echo --json` printed messages 0..5 of 16 bytes, none skipped, each payload starting
/// with its sequence number (little endian).
fn check_five_json_messages(stdout: &str) {
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 5, "{stdout}");
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["seq"], i as u64, "{stdout}");
        assert_eq!(line["size"], 16);
        assert_eq!(line["skipped"], 0);
        let head = line["head"].as_str().unwrap();
        assert!(
            head.starts_with(&format!("{i:02x}00000000000000")),
            "{head}"
        );
    }
}

#[test]
fn an_unknown_transport_is_refused_by_pub_and_echo() {
    let d = domain("tr");
    for command in ["pub", "echo"] {
        let out = run(
            &[command, "t", "--transport", "bogus", "--domain", &d],
            LONG,
        );
        assert_eq!(
            out.status.code(),
            Some(2),
            "ferry {command}: {}",
            out.stderr
        );
        for expected in [
            "invalid value 'bogus' for '--transport",
            "possible values: shm, udp, auto",
        ] {
            assert!(
                out.stderr.contains(expected),
                "ferry {command}: expected {expected:?} in: {}",
                out.stderr
            );
        }
        assert!(out.stdout.is_empty(), "{}", out.stdout);
    }
    // Nothing was created.
    assert_eq!(topics_json(&d), serde_json::json!([]));
}

#[test]
fn echo_times_out_with_a_message() {
    let d = domain("to");
    let out = fails_saying(
        &[
            "echo",
            "quiet",
            "--count",
            "1",
            "--timeout",
            "0.3",
            "--domain",
            &d,
        ],
        "no message on topic",
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn topics_stats_and_clean() {
    let d = domain("ts");
    let echo = spawn(&["echo", "cars/speed", "--timeout", "60", "--domain", &d]);
    let publisher = spawn(&[
        "pub",
        "cars/speed",
        "--rate",
        "100",
        "--wait-subscribers",
        "1",
        "--domain",
        &d,
    ]);
    wait_until(LONG, "a live publisher and subscriber with traffic", || {
        // The topic exists once the first of the two processes has come up.
        let out = run(
            &["stats", "cars/speed", "--domain", &d, "--json"],
            Duration::from_secs(30),
        );
        if !out.status.success() {
            return false;
        }
        let stats: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        let t = &stats[0];
        t["publishers"][0]["sent"].as_u64() > Some(0)
            && t["subscribers"][0]["received"].as_u64() > Some(0)
    });

    let listing = topics_json(&d);
    let t = &listing[0];
    assert_eq!(t["topic"], "cars/speed");
    assert_eq!(t["transport"], "shm");
    assert_eq!(t["publishers"][0]["alive"], true);
    assert_eq!(t["publishers"][0]["pid"], publisher.pid());
    assert_eq!(t["subscribers"][0]["alive"], true);
    assert_eq!(t["subscribers"][0]["pid"], echo.pid());

    let text = run_ok(&["topics", "--domain", &d]);
    let words = [
        "cars/speed",
        "shm",
        "publisher",
        "subscriber",
        "alive",
        "ferry-pub",
        "ferry-echo",
    ];
    check_contains("topics", &text, &words);
    let stats = run_ok(&["stats", "--domain", &d]);
    let words = [
        "cars/speed",
        "TRANSPORT",
        "SENT/RECEIVED",
        "TIMEOUTS",
        "EVICTIONS",
        "SKIPPED",
    ];
    check_contains("stats", &stats, &words);

    // Killed processes leave their shared memory behind, seen as dead, until `ferry clean`. The
    // subscriber goes first: a live subscriber frees a dead publisher's slot when it notices it
    // (a publisher killed first could be gone from the listing before the subscriber is).
    drop(echo);
    drop(publisher);
    let listing = topics_json(&d);
    assert_eq!(listing[0]["publishers"][0]["alive"], false, "{listing}");
    assert_eq!(listing[0]["subscribers"][0]["alive"], false, "{listing}");
    assert!(run_ok(&["topics", "--domain", &d]).contains("ferry clean"));

    let cleaned = run_ok(&["clean", "--domain", &d]);
    assert!(cleaned.contains("removed"), "{cleaned}");
    assert_eq!(topics_json(&d), serde_json::json!([]));
    assert!(run_ok(&["topics", "--domain", &d]).contains("no topics"));
    assert!(run_ok(&["clean", "--domain", &d]).contains("nothing to clean"));
}

#[test]
fn pub_stops_cleanly_on_ctrl_c() {
    let d = domain("ci");
    let publisher = spawn(&["pub", "ticks", "--rate", "50", "--domain", &d]);
    wait_until(LONG, "the publisher to appear", || {
        topics_json(&d)[0]["publishers"][0]["alive"] == true
    });
    let out = publisher.stop_with(Signal::INT);
    assert!(out.stderr.contains("sent"), "{}", out.stderr);
    assert!(out.stderr.contains("stopped by SIGINT"), "{}", out.stderr);
    // It closed its topic on the way out.
    assert_eq!(topics_json(&d), serde_json::json!([]));
}

/// `timeout` (and supervisors like it) send their SIGTERM to the process and then to its
/// process group: the copy that comes a moment later is not a second Ctrl-C, and the stop stays
/// clean (before, 3 of 5 such stops through `timeout` were cut short and left the topic's shared
/// memory behind).
#[test]
fn a_signal_that_comes_twice_at_once_still_stops_cleanly() {
    for signal in [Signal::TERM, Signal::INT] {
        let d = domain("tw");
        let publisher = spawn(&["pub", "twice", "--rate", "50", "--domain", &d]);
        wait_until(LONG, "the publisher to appear", || {
            topics_json(&d)[0]["publishers"][0]["alive"] == true
        });
        publisher.signal(signal);
        // Well within the 200 ms that make it a copy, and after the first was taken.
        std::thread::sleep(Duration::from_millis(20));
        let out = publisher.stop_with(signal);
        assert!(out.stderr.contains("sent"), "{}", out.stderr);
        assert_eq!(topics_json(&d), serde_json::json!([]));
    }
}

/// `ferry echo` and `ferry pub --rate` exchanging messages over each transport stop within the
/// bound of a SIGTERM or a SIGINT, with the status that says which, and close their topics.
#[test]
fn echo_and_pub_stop_on_sigterm_and_sigint() {
    for (transport, echo_signal, pub_signal) in [
        ("shm", Signal::TERM, Signal::INT),
        ("udp", Signal::INT, Signal::TERM),
    ] {
        let d = domain("sg");
        let echo = spawn_in(&d, &["echo", "sig", "--transport", transport]);
        let publisher = spawn_in(
            &d,
            &pub_args("sig", "1", &["--transport", transport, "--rate", "50"]),
        );
        echo.await_line(false, "seq ", LONG);
        let e = echo.stop_with(echo_signal);
        assert!(e.stdout.starts_with("seq 0 "), "{transport}: {}", e.stdout);
        let p = publisher.stop_with(pub_signal);
        assert!(p.stderr.contains("sent "), "{transport}: {}", p.stderr);
        // Both closed their topic on the way out: nothing is left behind, dead or alive.
        assert_eq!(topics_json(&d), serde_json::json!([]), "{transport}");
    }
}

/// A reliable subscriber that stopped reading (SIGSTOP) holds a fast publisher back, over shared
/// memory (its ring is full), or leaves it messages to linger for when it closes, over UDP; the
/// publisher still stops on a signal in time.
#[test]
fn pub_held_back_by_a_frozen_subscriber_stops_on_a_signal() {
    for (transport, signal) in [("shm", Signal::TERM), ("udp", Signal::INT)] {
        let d = domain("fz");
        let echo = spawn_in(&d, &["echo", "fz", "--transport", transport]);
        let publisher = spawn_in(
            &d,
            &pub_args(
                "fz",
                "1",
                &["--transport", transport, "--size", "1K", "--rate", "1000"],
            ),
        );
        echo.await_line(false, "seq ", LONG);
        echo.signal(Signal::STOP);
        if transport == "shm" {
            // The publisher says so once the subscriber made no room for a second, naming it.
            let note = publisher.await_line(true, "has made no room", LONG);
            assert!(
                note.contains(&format!("node \"ferry-echo\" (pid {})", echo.pid())),
                "{note}"
            );
        } else {
            // UDP's window is larger than what a few messages fill; enough that the frozen
            // subscriber has messages it never confirmed.
            let sent = || {
                let out = run_ok(&["stats", "fz", "--domain", &d, "--json"]);
                let stats: serde_json::Value = serde_json::from_str(&out).expect("stats JSON");
                stats[0]["publishers"][0]["sent"].as_u64().unwrap_or(0)
            };
            let frozen_at = sent();
            wait_until(LONG, "messages sent after the freeze", || {
                sent() >= frozen_at + 20
            });
        }
        let p = publisher.stop_with(signal);
        assert!(p.stderr.contains("sent "), "{transport}: {}", p.stderr);
        echo.signal(Signal::CONT);
        echo.stop_with(Signal::TERM);
        assert_eq!(topics_json(&d), serde_json::json!([]), "{transport}");
    }
}

/// `ferry echo` whose output nobody reads (the pipe is full, its writes wait) stops on a signal.
#[test]
fn echo_with_unread_output_stops_on_a_signal() {
    let d = domain("ur");
    let echo = spawn_in_unread(&d, &["echo", "ur", "--transport", "shm"]);
    let publisher = spawn_in(
        &d,
        &pub_args(
            "ur",
            "1",
            &["--transport", "shm", "--size", "1K", "--rate", "0"],
        ),
    );
    // echo stops reading once its output is full; the reliable publisher then says it waits.
    publisher.await_line(true, "has made no room", LONG);
    echo.stop_with(Signal::INT);
    publisher.stop_with(Signal::TERM);
    assert_eq!(topics_json(&d), serde_json::json!([]));
}

/// A lab experiment stopped by a signal in the middle of a run ends within the bound, kills and
/// reaps its peer process, and leaves nothing in its domain.
#[test]
fn an_interrupted_lab_ends_its_peer() {
    let lab = spawn(&["lab", "idle", "--wait", "block", "--seconds", "60"]);
    let d = format!("labidle{}", lab.pid());
    let mut peer = None;
    wait_until(LONG, "the lab's peer to subscribe", || {
        peer = topics_json(&d)[0]["subscribers"][0]["pid"].as_u64();
        peer.is_some()
    });
    let peer = peer.unwrap();
    lab.stop_with(Signal::TERM);
    assert!(
        !std::path::Path::new(&format!("/proc/{peer}")).exists(),
        "the peer process {peer} outlived the lab"
    );
    assert_eq!(topics_json(&d), serde_json::json!([]));
}

#[test]
fn bad_arguments_are_refused_clearly() {
    let d = domain("ba");
    let cases: &[(&[&str], &str)] = &[
        (&["pub", "t", "--size", "12X"], "invalid size"),
        (&["pub", "t", "--rate=-1"], "invalid rate"),
        (
            &["pub", "t", "--transport", "carrier-pigeon"],
            "invalid value",
        ),
        (
            &["pub", "bad topic!", "--count", "1", "--domain", &d],
            "invalid topic name",
        ),
        (&["pub", "t", "--domain", "no/slash"], "invalid domain"),
        (&["echo", "t", "--timeout", "0"], "invalid duration"),
        (&["echo", "t", "--count", "many"], "invalid value"),
        (&["stats", "nosuch", "--domain", &d], "no topic \"nosuch\""),
        (&["nonsense"], "unrecognized subcommand"),
    ];
    // `ferry lab latency` with these.
    let lab_cases: &[(&[&str], &str)] = &[
        (&["--transport", "udp9"], "unknown transport \"udp9\""),
        (&["--transport", "udp9"], "valid transports: "),
        (&["--transport", "shm,shm"], "listed twice"),
        (&["--sizes", "0"], "out of range"),
        (&["--sizes", "1Q"], "invalid size"),
        (
            &["--samples", "1", "--rounds", "2"],
            "--samples (1) must be at least --rounds (2)",
        ),
        (&["--rounds", "0"], "--rounds must be between 1 and 10000"),
        (
            &["--samples", "200000000"],
            "--samples must be at most 100000000",
        ),
        (&["--json", "/dev/null"], "/dev/null is not a regular file"),
        (&["--pin", "0"], "invalid pinning"),
        (&["--pin", "9999,0"], "CPU 9999 is not available"),
    ];
    let lab_cases = lab_cases
        .iter()
        .map(|(args, expected)| ([&["lab", "latency"], *args].concat(), *expected));
    for (args, expected) in cases.iter().map(|(a, e)| (a.to_vec(), *e)).chain(lab_cases) {
        let out = fails_saying(&args, expected);
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    }
}

#[test]
fn lab_latency_writes_contract_json() {
    let (out, json) = common::lab_results(
        "latency",
        &[
            "--samples",
            "200",
            "--rounds",
            "2",
            "--sizes",
            "32,1K",
            "--transport",
            "shm-spin,shm-block,shm,raw-spin,raw-futex",
        ],
        Duration::from_secs(300),
    );
    check_lab_json(&json);
    for key in ["cpus", "cpu_model", "kernel"] {
        assert!(!json["machine"][key].is_null(), "machine.{key} missing");
    }
    assert_eq!(json["config"]["rounds"], 2);

    let rows = json["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 10);
    let mut seen = Vec::new();
    for row in rows {
        let transport = row["transport"].as_str().unwrap();
        let size = row["size_bytes"].as_u64().unwrap();
        seen.push((transport.to_owned(), size));
        assert_eq!(row["samples"], 200, "{row}");
        for key in ["p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns", "mean_ns"] {
            assert!(row[key].as_f64().is_some_and(|v| v > 0.0), "{key} in {row}");
        }
        let p = |k: &str| row[k].as_f64().unwrap();
        assert!(p("p50_ns") <= p("p90_ns") && p("p90_ns") <= p("p99_ns"));
        assert!(p("p99_ns") <= p("p999_ns") && p("p999_ns") <= p("max_ns"));
        let rounds = row["rounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 2);
        for (i, r) in rounds.iter().enumerate() {
            assert_eq!(r["round"], i);
            assert_eq!(r["samples"], 100);
            assert!(r["p50_ns"].as_f64().is_some());
        }
        let expected_base = match transport {
            "shm-spin" | "shm" => Some("raw-spin"),
            "shm-block" => Some("raw-futex"),
            _ => None,
        };
        assert_eq!(row["baseline"].as_str(), expected_base);
        assert_eq!(row["p50_ratio"].is_number(), expected_base.is_some());
    }
    for t in ["shm-spin", "shm-block", "shm", "raw-spin", "raw-futex"] {
        for s in [32, 1024] {
            assert!(seen.contains(&(t.to_owned(), s)), "row {t} {s} missing");
        }
    }
    // The table went to the terminal.
    assert!(out.stdout.contains("p99.9") && out.stdout.contains("raw-futex"));
}

#[test]
fn an_idle_blocking_subscriber_does_not_spin() {
    let (_, json) = common::lab_results(
        "idle",
        &["--wait", "block,adaptive", "--seconds", "0.5"],
        Duration::from_secs(60),
    );
    let rows = json["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    for row in rows {
        // A subscriber that busy-waits while idle burns ~100 % of a CPU; a blocked one ~0. The
        // bound is loose on purpose: this checks behaviour, not speed.
        let cpu = row["cpu_percent"].as_f64().expect("cpu_percent");
        assert!(
            cpu < 50.0,
            "an idle {} subscriber used {cpu} % of a CPU",
            row["wait"]
        );
    }
}

/// Checks the results format's top level (`common::lab_results` checked the experiment).
fn check_lab_json(json: &serde_json::Value) {
    assert!(json["ferry_version"].is_string());
    assert!(json["machine"]["cpus"].is_number());
    assert!(json["config"]["pinning"]["mode"].is_string());
}

#[test]
fn lab_latency_over_udp_writes_contract_json() {
    let (_, json) = common::lab_results(
        "latency",
        &[
            "--transport",
            "raw-udp4,udp4",
            "--sizes",
            "64,100K",
            "--samples",
            "100",
            "--rounds",
            "1",
            "--warmup",
            "20",
        ],
        Duration::from_secs(120),
    );
    check_lab_json(&json);
    let rows = json["rows"].as_array().expect("rows");
    let row = |t: &str, s: u64| {
        rows.iter()
            .find(|r| r["transport"] == t && r["size_bytes"] == s)
            .unwrap_or_else(|| panic!("row {t} {s} missing: {rows:?}"))
    };
    for t in ["raw-udp4", "udp4"] {
        let r = row(t, 64);
        assert_eq!(r["samples"], 100, "{r}");
        for key in ["p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns", "mean_ns"] {
            assert!(r[key].as_f64().is_some_and(|v| v > 0.0), "{key} in {r}");
        }
    }
    assert_eq!(row("udp4", 64)["baseline"], "raw-udp4");
    assert!(row("udp4", 64)["p50_ratio"].is_number());
    // ferry cuts a 100 KiB message into frames; one plain datagram cannot carry it.
    assert_eq!(row("udp4", 102_400)["samples"], 100);
    let skipped = row("raw-udp4", 102_400);
    assert!(
        skipped["skipped"].as_str().unwrap().contains("65507"),
        "{skipped}"
    );
    assert!(skipped["p50_ns"].is_null());
    assert!(row("udp4", 102_400)["p50_ratio"].is_null());
    assert_eq!(json["config"]["skipped"].as_array().unwrap().len(), 1);
}

#[test]
fn lab_throughput_writes_contract_json() {
    let (out, json) = common::lab_results(
        "throughput",
        &[
            &["--transport", "udp4,shm,raw-udp4"][..],
            &common::SHORT_THROUGHPUT,
        ]
        .concat(),
        Duration::from_secs(120),
    );
    check_lab_json(&json);
    assert_eq!(json["config"]["delivery"], "reliable");
    let rows = json["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 3);
    for r in rows {
        for key in [
            "transport",
            "size_bytes",
            "delivery",
            "loss_percent",
            "round",
            "duration_s",
            "messages_sent",
            "messages_delivered",
            "messages_per_s",
            "delivered_gbps",
            "lost",
            "retransmitted",
            "kernel_drops",
        ] {
            assert!(r.get(key).is_some(), "{key} missing in {r}");
        }
        assert_eq!(r["size_bytes"], 1024);
        assert_eq!(r["round"], 0);
        let sent = r["messages_sent"].as_u64().unwrap();
        let delivered = r["messages_delivered"].as_u64().unwrap();
        assert!(delivered > 0 && delivered <= sent, "{r}");
        assert_eq!(r["lost"].as_u64(), Some(sent - delivered));
        assert!(r["delivered_gbps"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["out_of_order"], 0, "{r}");
    }
    let by = |t: &str| common::row_of(rows, t);
    // Reliable delivery loses nothing (shared memory and UDP alike).
    for t in ["shm", "udp4"] {
        assert_eq!(by(t)["lost"], 0, "{}", by(t));
        assert_eq!(by(t)["delivery"], "reliable");
    }
    assert_eq!(by("udp4")["datagram_bytes"], 1024 + 48);
    assert!(by("udp4")["retransmitted"].is_u64());
    assert_eq!(by("raw-udp4")["delivery"], "none");
    assert!(by("udp4")["ratios"]["raw-udp4"].is_number());
    assert!(out.stdout.contains("Gbit/s"), "{}", out.stdout);
}

#[test]
fn lab_throughput_refuses_bad_arguments() {
    let cases: &[(&[&str], &str)] = &[
        (&["--transport", "tcp4"], "valid transports"),
        (&["--transport", "tcp"], "--hosts 2 only"),
        (&["--period", "100ms"], "needs --hosts 2"),
        (&["--sizes", "4"], "out of range"),
        (&["--loss", "100"], "invalid loss"),
        (&["--delivery", "maybe"], "invalid value"),
        (&["--rounds", "0"], "at least 1"),
    ];
    for (args, expected) in cases {
        fails_saying(&[&["lab", "throughput"], *args].concat(), expected);
    }
}

#[test]
fn call_without_a_server_fails_at_once_with_a_clear_message() {
    let d = domain("nosrv");
    let started = Instant::now();
    let out = run(&["call", "map/tile", "--domain", &d], LONG);
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("no server for service map/tile"),
        "{}",
        out.stderr
    );
    // In the command line's words: its flag, not the library's setting.
    assert!(out.stderr.contains("--wait-server"), "{}", out.stderr);
    assert!(!out.stderr.contains("Client::"), "{}", out.stderr);
    assert!(started.elapsed() < LONG);
}

/// A request larger than the client's limit is refused before it is made (a size of gigabytes
/// is not allocated first), naming the flag; one larger than the server's limit is refused by
/// the server, naming the server's flag.
#[test]
fn call_refuses_a_request_past_either_limit_naming_the_flag() {
    let started = Instant::now();
    let out = fails_saying(
        &["call", "any", "--size", "3G", "--domain", &domain("big")],
        "larger than this client's limit of 1 MiB (raise --max-size",
    );
    assert!(!out.stderr.contains("Qos"), "{}", out.stderr);
    assert!(started.elapsed() < LONG);

    let d = domain("lim");
    let _server = start_server(&d, "small", &["--max-size", "1K", "--quiet"]);
    let out = start_call(&d, "small", &["--size", "2K", "--max-size", "4K"]).finish(LONG);
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("refused request 0") && out.stderr.contains("the server's --max-size"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("Qos"), "{}", out.stderr);
}

/// A call that times out is counted and the next one goes out; the command then exits non-zero
/// with the count.
#[test]
fn call_counts_timeouts_and_goes_on() {
    let d = domain("late");
    let _server = start_server(&d, "slow", &["--delay", "1", "--size", "8"]);
    let out = start_call(&d, "slow", &["--timeout", "200ms", "--count", "2"]).finish(LONG);
    assert!(!out.status.success());
    let late: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.contains("no response within"))
        .collect();
    assert_eq!(late.len(), 2, "{}", out.stdout);
    assert!(out.stdout.starts_with("request 0: "), "{}", out.stdout);
    assert!(
        out.stderr.contains("no call answered; 2 calls timed out"),
        "{}",
        out.stderr
    );
}

#[test]
fn serve_and_call_answer_and_show_in_topics_and_stats() {
    let d = domain("srv");
    let _server = start_server(&d, "map/tile", &["--size", "100"]);
    let out = start_call(&d, "map/tile", &["--count", "5", "--size", "32"]).finish(LONG);
    assert!(out.status.success(), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", out.stdout);
    assert!(
        lines[4].starts_with("response 4 (100 bytes) in "),
        "{}",
        lines[4]
    );
    assert!(
        out.stderr.contains("5 calls answered, round trip p50 "),
        "{}",
        out.stderr
    );
    // Text in, text back from an echo server.
    let _echo = start_server(&d, "echo/me", &["--echo", "--quiet"]);
    let out = start_call(&d, "echo/me", &["--data", "hello"]).finish(LONG);
    assert!(out.status.success(), "{}", out.stderr);
    assert!(
        out.stdout.contains("(5 bytes)") && out.stdout.contains("\"hello\""),
        "{}",
        out.stdout
    );

    let topics = run_ok(&["topics", "--domain", &d]);
    assert!(topics.contains("services:"), "{topics}");
    assert!(
        topics
            .lines()
            .any(|l| l.contains("map/tile") && l.contains("server") && l.contains("ferry-serve")),
        "{topics}"
    );
    let stats = run_ok(&["stats", "--domain", &d]);
    // The service's own topics are counted in its table, not listed as topics again.
    assert!(!stats.contains(".srv/"), "{stats}");
    let server_row = stats
        .lines()
        .find(|l| l.contains("map/tile") && l.contains(" server "))
        .unwrap_or_else(|| panic!("no server row in\n{stats}"));
    let cells: Vec<&str> = server_row.split_whitespace().collect();
    // DOMAIN SERVICE ROLE NODE PID STATE REQUESTS RESPONSES ...
    assert_eq!(&cells[6..8], &["5", "5"], "{server_row}");
}

#[test]
fn a_call_whose_server_is_killed_exits_non_zero_saying_so() {
    let d = domain("srvkill");
    // A server that answers after 30 s: the call is pending when the server is killed.
    let server = start_server(&d, "slow", &["--delay", "30", "--size", "8"]);
    let call = start_call(&d, "slow", &["--timeout", "60"]);
    server.await_line(false, "request 0", LONG);
    server.signal(Signal::KILL);
    let out = call.finish(LONG);
    assert!(!out.status.success());
    assert!(out.stderr.contains("went away"), "{}", out.stderr);
}

#[test]
fn pub_over_udp_fails_when_a_subscriber_would_refuse_its_messages_and_succeeds_when_it_takes_them()
{
    let d = domain("limit");
    // Two messages of 2 MiB over UDP to an echo given `echo_args`, once it listens.
    let exchange = |echo_args: &[&str]| {
        let udp = ["--transport", "udp", "--count", "2"];
        let echo = start_echo(&d, "big", &[&udp, echo_args].concat());
        let publisher = start_pub(&d, "big", "1", &[&udp[..], &["--size", "2M"]].concat());
        (echo, publisher.finish(LONG))
    };
    let (echo, out) = exchange(&[]);
    assert!(
        !out.status.success(),
        "a refused message was reported sent: {}",
        out.stderr
    );
    assert!(
        out.stderr.contains(
            "a message of 2 MiB is larger than a reliable subscriber takes (node \"ferry-echo\" \
             of this host: at most 1 MiB; `ferry echo` takes more with --max-size)"
        ),
        "{}",
        out.stderr
    );
    drop(echo);
    // With the limit raised, both arrive, and pub says so only after they did.
    let (echo, out) = exchange(&["--max-size", "4M"]);
    assert!(out.status.success(), "{}", out.stderr);
    let e = echo.finish(LONG);
    assert!(e.status.success(), "{}", e.stderr);
    assert_eq!(e.stdout.lines().count(), 2, "{}", e.stdout);
}

/// Whether this machine caps a UDP socket's receive buffer below the 16 MiB ferry asks for.
fn rmem_capped() -> bool {
    std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .is_some_and(|max| max < 16 << 20)
}

#[test]
fn echo_warns_about_the_udp_receive_buffer_only_when_udp_traffic_could_suffer() {
    let d = domain("rmem");
    let echo = start_echo(&d, "t", &["--count", "1"]);
    let out = start_pub(&d, "t", "1", &["--transport", "shm", "--count", "1"]).finish(LONG);
    assert!(out.status.success(), "{}", out.stderr);
    let e = echo.finish(LONG);
    assert!(e.status.success(), "{}", e.stderr);
    assert!(
        !e.stderr.contains("receive buffer"),
        "a subscriber that read shared memory only was warned about UDP: {}",
        e.stderr
    );
    if rmem_capped() {
        // Over UDP only, the warning is said, once.
        let e = run(
            &[
                "echo",
                "t",
                "--transport",
                "udp",
                "--timeout",
                "0.2",
                "--domain",
                &d,
            ],
            LONG,
        );
        assert_eq!(
            e.stderr.matches("receive buffer").count(),
            1,
            "{}",
            e.stderr
        );
    }
}
