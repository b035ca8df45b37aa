//! `ferry record`, `play`, `hz`, `bw` as a user runs them: `ferry pub` at 100 Hz recorded, the
//! file read back by the mcap crate's reader, played to `ferry echo` (every byte, and the
//! arrival of 90 % of the messages within 1 ms of where the recorded timing puts them), Ctrl-C closing
//! a complete file, a foreign file refused. Every wait is bounded; children are killed if a test
//! fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::process::Signal;

mod common;

use common::running::{domain, pub_args, spawn_in};

/// The tests of this file run one at a time: the timing test shares 2 CPUs with nothing of
/// its own making.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// A domain and a scratch directory no other test uses.
fn fresh(tag: &str) -> (String, PathBuf) {
    let dir = common::tmp_path(&format!("record-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    (domain(tag), dir)
}

/// Runs `ferry pub TOPIC ARGS` in `domain` from when `subscribers` are attached (within 30 s);
/// it must succeed within 60 s.
fn publish(domain: &str, topic: &str, args: &[&str], subscribers: &str) {
    spawn_in(domain, &pub_args(topic, subscribers, args)).succeed();
}

/// What `ferry pub` sends as message `seq` of `len` bytes: its low byte, then seq (u64 LE) first.
fn pub_payload(seq: u64, len: usize) -> Vec<u8> {
    let mut v = vec![seq as u8; len];
    v[..8].copy_from_slice(&seq.to_le_bytes());
    v
}

/// Metadata records by name (the first of each name).
type Metadata = BTreeMap<String, BTreeMap<String, String>>;

/// Every message of a file, by the mcap crate's reader: (log time, payload after the framing).
fn read_back(path: &Path) -> (Vec<(u64, Vec<u8>)>, Metadata) {
    let bytes = std::fs::read(path).unwrap();
    let mut messages = Vec::new();
    for m in mcap::MessageStream::new(&bytes).unwrap() {
        let m = m.unwrap();
        assert_eq!(m.channel.message_encoding, "cdr");
        assert_eq!(&m.data[..4], &[0, 1, 0, 0]);
        assert_eq!(m.publish_time, m.log_time);
        messages.push((m.log_time, m.data[8..].to_vec()));
    }
    let summary = mcap::Summary::read(&bytes)
        .unwrap()
        .expect("a summary section");
    let mut metadata = BTreeMap::new();
    for index in &summary.metadata_indexes {
        let m = mcap::read::metadata(&bytes, index).unwrap();
        metadata.entry(m.name).or_insert(m.metadata);
    }
    (messages, metadata)
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    sorted[((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn record_play_echo_keeps_every_byte_and_the_timing_at_100_hz() {
    let _serial = one_at_a_time();
    let (dom, dir) = fresh("rt");
    let file = dir.join("run.mcap");
    let file_s = file.to_str().unwrap();
    const N: u64 = 200;
    const SIZE: usize = 1024;
    let record = spawn_in(&dom, &["record", "lidar", "-o", file_s, "--count", "200"]);
    publish(
        &dom,
        "lidar",
        &["--size", "1K", "--rate", "100", "--count", "200"],
        "1",
    );
    let rec = record.succeed();
    assert!(rec.stderr.contains("lidar: 200 messages"), "{}", rec.stderr);

    let (recorded, metadata) = read_back(&file);
    assert_eq!(recorded.len() as u64, N);
    for (seq, (_, data)) in recorded.iter().enumerate() {
        assert_eq!(
            data,
            &pub_payload(seq as u64, SIZE),
            "recorded message {seq}"
        );
    }
    assert_eq!(metadata["ferry.topic"]["messages"], "200");
    assert_eq!(metadata["ferry.topic"]["skipped"], "0");
    assert_eq!(metadata["ferry"]["delivery"], "latest");

    let echo = spawn_in(
        &dom,
        &[
            "echo",
            "lidar",
            "--json",
            "--full",
            "--timestamps",
            "--count",
            "200",
        ]
        .into_iter()
        .chain(["--timeout", "30"])
        .collect::<Vec<_>>(),
    );
    let play = spawn_in(
        &dom,
        &[
            "play",
            file_s,
            "--wait-subscribers",
            "1",
            "--wait-timeout",
            "30",
        ],
    );
    let played = play.succeed();
    assert!(
        played.stderr.contains("sent 200 messages"),
        "{}",
        played.stderr
    );
    let echoed = echo.succeed();

    let lines: Vec<serde_json::Value> = echoed
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len() as u64, N);
    let mut times = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["seq"], i as u64);
        assert_eq!(line["skipped"], 0);
        let bytes = unhex(line["head"].as_str().unwrap());
        assert_eq!(bytes, recorded[i].1, "played message {i}: every byte");
        times.push(line["time_ns"].as_u64().unwrap());
    }
    // Each message's arrival against where the recorded timing puts it: its offset from its
    // recorded log time, less the median offset (the two clocks' and the pipeline's constant
    // delay). One time per message, so one wake-up's jitter, not two as in an interval.
    let mut offsets: Vec<i64> = (0..N as usize)
        .map(|i| times[i] as i64 - recorded[i].0 as i64)
        .collect();
    offsets.sort_unstable();
    let median = offsets[offsets.len() / 2];
    let mut errors: Vec<u64> = (0..N as usize)
        .map(|i| (times[i] as i64 - recorded[i].0 as i64 - median).unsigned_abs())
        .collect();
    errors.sort_unstable();
    let (p50, p90, max) = (
        percentile(&errors, 0.5),
        percentile(&errors, 0.9),
        errors[errors.len() - 1],
    );
    let mut intervals: Vec<u64> = (1..N as usize)
        .map(|i| {
            let rec = recorded[i].0 as i64 - recorded[i - 1].0 as i64;
            (times[i] as i64 - times[i - 1] as i64 - rec).unsigned_abs()
        })
        .collect();
    intervals.sort_unstable();
    eprintln!(
        "replayed against recorded timing, {N} messages: p50 {} µs, p90 {} µs, max {} µs off \
         schedule; intervals p50 {} µs, p90 {} µs off",
        p50 / 1000,
        p90 / 1000,
        max / 1000,
        percentile(&intervals, 0.5) / 1000,
        percentile(&intervals, 0.9) / 1000,
    );
    assert!(
        p90 <= 1_000_000,
        "90 % of the messages within 1 ms of the recorded timing: p50 {p50} ns, p90 {p90} ns, \
         max {max} ns"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ctrl_c_closes_a_complete_file() {
    let _serial = one_at_a_time();
    let (dom, dir) = fresh("int");
    let file = dir.join("int.mcap");
    let record = spawn_in(
        &dom,
        &[
            "record",
            "a",
            "b",
            "-o",
            file.to_str().unwrap(),
            "--type",
            "u32",
        ],
    );
    publish(
        &dom,
        "a",
        &["--size", "64", "--rate", "200", "--count", "50"],
        "1",
    );
    // Give the recorder a moment to take the last message, then Ctrl-C.
    std::thread::sleep(Duration::from_millis(300));
    record.signal(Signal::INT);
    let rec = record.finish(Duration::from_secs(30));
    assert_eq!(rec.status.code(), Some(130), "{}", rec.stderr);
    assert!(rec.stderr.contains("a: 50 messages"), "{}", rec.stderr);
    let (messages, metadata) = read_back(&file);
    assert_eq!(messages.len(), 50);
    for (seq, (_, data)) in messages.iter().enumerate() {
        assert_eq!(data, &pub_payload(seq as u64, 64));
    }
    assert_eq!(metadata["ferry"]["type"], "u32");
    assert_eq!(metadata["ferry"]["topics"], "a,b");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn hz_and_bw_report_a_topic() {
    let _serial = one_at_a_time();
    let (dom, _dir) = fresh("hz");
    let hz = spawn_in(
        &dom,
        &["hz", "h", "--count", "40", "--json", "--timeout", "30"],
    );
    let bw = spawn_in(&dom, &["bw", "h", "--count", "40", "--timeout", "30"]);
    publish(
        &dom,
        "h",
        &["--size", "100", "--rate", "50", "--count", "60"],
        "2",
    );
    let hz = hz.finish(Duration::from_secs(30));
    hz.check_success("hz");
    let last: serde_json::Value =
        serde_json::from_str(hz.stdout.lines().last().expect("a report")).unwrap();
    assert!(last["rate_hz"].as_f64().unwrap() > 0.0, "{last}");
    assert!(last["window"].as_u64().unwrap() >= 1);
    assert!(last["min_s"].as_f64().unwrap() <= last["max_s"].as_f64().unwrap());
    let bw = bw.finish(Duration::from_secs(30));
    bw.check_success("bw");
    common::check_contains(
        "bw",
        &bw.stdout,
        &[
            "B/s from ",
            "Message size mean: 0.10 KB min: 0.10 KB max: 0.10 KB",
        ],
    );
}

#[test]
fn play_refuses_a_file_that_is_not_a_recording() {
    let _serial = one_at_a_time();
    let (dom, dir) = fresh("bad");
    let file = dir.join("bad.mcap");
    std::fs::write(&file, b"this is not an MCAP file at all").unwrap();
    let f = spawn_in(&dom, &["play", file.to_str().unwrap()]).finish(Duration::from_secs(30));
    assert_eq!(f.status.code(), Some(1), "{}", f.stderr);
    assert!(f.stderr.contains("not an MCAP file"), "{}", f.stderr);
    assert!(!f.stderr.contains("panicked"), "{}", f.stderr);
    std::fs::remove_dir_all(&dir).unwrap();
}
