//! Recording through real subscribers, read back by the `mcap` crate's own reader (every byte,
//! the header fields, channels, schemas, metadata and statistics) and by ferry's; rotation; the
//! skipped count under latest delivery; playing a recording back. Every wait is bounded.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ferry::{Delivery, Node, Qos, Transport, WaitStrategy};
use ferry_record::format::{self, meta, PayloadType};
use ferry_record::reader::{read_all, ReadLimits};
use ferry_record::{
    Compression, PlayOptions, Player, Rate, RecordOptions, RecordSummary, Recorder,
};

/// A domain and a scratch directory no other test uses.
fn fresh(tag: &str) -> (String, PathBuf) {
    static N: AtomicUsize = AtomicUsize::new(0);
    // Relaxed: only uniqueness matters.
    let n = N.fetch_add(1, Ordering::Relaxed);
    let name = format!("rec{}{tag}{n}", std::process::id());
    let dir = std::env::temp_dir().join(format!("ferry-record-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    (name, dir)
}

/// Message `seq` of publisher `p`: u32 values derived from both, so any misplaced byte shows.
fn payload(p: u32, seq: u32, words: usize) -> Vec<u8> {
    (0..words as u32)
        .flat_map(|i| (p.wrapping_mul(0x9E37_79B9) ^ seq.wrapping_mul(31) ^ i).to_le_bytes())
        .collect()
}

/// Runs the recorder until `cond` holds (at most 30 s).
fn record_until(rec: &mut Recorder, mut cond: impl FnMut(&Recorder) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond(rec) {
        assert!(Instant::now() < deadline, "recording: {:?}", rec.counts());
        rec.run_for(Duration::from_millis(20)).unwrap();
    }
}

#[test]
fn a_recording_is_read_back_byte_for_byte_by_the_mcap_crate() {
    for compression in [Compression::Zstd, Compression::Lz4, Compression::None] {
        let (dom, dir) = fresh("rt");
        let path = dir.join("out.mcap");
        let qos = Qos::default().wait(WaitStrategy::Block);
        let node = Node::with_domain("recorder", &dom).unwrap();
        let topics = vec!["lidar/points".to_owned(), "imu".to_owned()];
        let options = RecordOptions {
            payload: PayloadType::U32,
            compression,
            chunk_size: 4096,
            ..RecordOptions::default()
        };
        let mut rec = Recorder::start(&node, &topics, &qos.clone(), &path, options).unwrap();
        let mut lidar = Node::with_domain("lidar-node", &dom)
            .unwrap()
            .publisher("lidar/points", &qos.clone().max_message_size(64 << 10))
            .unwrap();
        let mut imu = Node::with_domain("imu-node", &dom)
            .unwrap()
            .publisher("imu", &qos)
            .unwrap();
        // The shared-memory subscriber attaches to the rings as it receives.
        let deadline = Instant::now() + Duration::from_secs(30);
        while lidar.subscriber_count() == 0 || imu.subscriber_count() == 0 {
            assert!(Instant::now() < deadline);
            rec.run_for(Duration::from_millis(5)).unwrap();
        }
        const N: u32 = 200;
        for seq in 0..N {
            lidar.send(&payload(1, seq, 1000 + seq as usize)).unwrap();
            imu.send(&payload(2, seq, 3)).unwrap();
            if seq % 50 == 0 {
                rec.run_for(Duration::from_millis(1)).unwrap();
            }
        }
        // A message that is no whole number of u32 values is refused, and counted.
        imu.send(&[1, 2, 3]).unwrap();
        record_until(&mut rec, |r| {
            r.counts()
                .iter()
                .all(|(t, c)| c.messages == N as u64 && (t != "imu" || c.refused == 1))
        });
        let summary = rec.finish().unwrap();
        assert_eq!(summary.files, vec![path.clone()]);
        for (_, c) in &summary.topics {
            assert_eq!((c.messages, c.skipped), (N as u64, 0));
        }

        // The mcap crate's reader, on the whole file.
        let bytes = std::fs::read(&path).unwrap();
        let mut seen: HashMap<String, u32> = HashMap::new();
        let mut last_time: HashMap<String, u64> = HashMap::new();
        for m in mcap::MessageStream::new(&bytes).unwrap() {
            let m = m.unwrap();
            let schema = m.channel.schema.as_ref().unwrap();
            assert_eq!(schema.name, format::U32_SCHEMA);
            assert_eq!(schema.encoding, "ros2msg");
            assert_eq!(m.channel.message_encoding, "cdr");
            let md = &m.channel.metadata;
            let (p, node) = match m.channel.topic.as_str() {
                "lidar/points" => (1, "lidar-node"),
                "imu" => (2, "imu-node"),
                other => panic!("topic {other}"),
            };
            assert_eq!(md["ferry.node"], node);
            assert_eq!(md["ferry.transport"], "shm");
            assert_eq!(md["ferry.first_seq"], "0");
            assert!(md["ferry.publisher"].starts_with("shm:"));
            let seq = seen.entry(m.channel.topic.clone()).or_default();
            assert_eq!(m.sequence, *seq, "sequence numbers in order, none missing");
            let want = payload(p, *seq, if p == 1 { 1000 + *seq as usize } else { 3 });
            assert_eq!(&m.data[..4], &[0, 1, 0, 0]);
            assert_eq!(&m.data[4..8], &((want.len() / 4) as u32).to_le_bytes());
            assert_eq!(&m.data[8..], &want[..], "{compression:?} seq {seq}");
            assert_eq!(m.publish_time, m.log_time);
            // In order per topic (topics are received by threads of their own, so two topics'
            // messages may interleave a little out of time order).
            let last = last_time.entry(m.channel.topic.clone()).or_default();
            assert!(m.log_time >= *last, "log times in order");
            *last = m.log_time;
            *seq += 1;
        }
        assert_eq!(seen["lidar/points"], N);
        assert_eq!(seen["imu"], N);

        let summary = mcap::Summary::read(&bytes).unwrap().expect("a summary");
        assert_eq!(summary.stats.as_ref().unwrap().message_count, 2 * N as u64);
        assert!(!summary.chunk_indexes.is_empty());
        let want_compression = match compression {
            Compression::Zstd => "zstd",
            Compression::Lz4 => "lz4",
            Compression::None => "",
        };
        assert!(summary
            .chunk_indexes
            .iter()
            .all(|c| c.compression == want_compression));
        let mut metadata: Vec<(String, BTreeMap<String, String>)> = Vec::new();
        for index in &summary.metadata_indexes {
            let m = mcap::read::metadata(&bytes, index).unwrap();
            metadata.push((m.name, m.metadata));
        }
        let ferry_md = &metadata.iter().find(|(n, _)| n == meta::FERRY).unwrap().1;
        assert_eq!(ferry_md["publish_time"], meta::PUBLISH_TIME);
        assert_eq!(ferry_md["type"], "u32");
        assert_eq!(ferry_md["delivery"], "reliable");
        let topic_md: Vec<_> = metadata.iter().filter(|(n, _)| n == meta::TOPIC).collect();
        assert_eq!(topic_md.len(), 2);
        let imu_md = &topic_md
            .iter()
            .find(|(_, m)| m["topic"] == "imu")
            .unwrap()
            .1;
        assert_eq!(imu_md["messages"], N.to_string());
        assert_eq!(imu_md["refused"], "1");
        assert_eq!(imu_md["skipped"], "0");
        let pubs: Vec<_> = metadata
            .iter()
            .filter(|(n, _)| n == meta::PUBLISHER)
            .collect();
        assert_eq!(pubs.len(), 2);
        for (_, p) in pubs {
            assert_eq!(p["first_seq"], "0");
            assert_eq!(p["last_seq"], (N - 1).to_string());
        }

        // ferry's own reader gives the payloads unframed.
        let contents = read_all(&path, ReadLimits::default()).unwrap();
        assert_eq!(contents.messages.len(), 2 * N as usize);
        let lidar_ch = contents
            .channels
            .iter()
            .find(|c| c.topic == "lidar/points")
            .unwrap()
            .id;
        let first = contents
            .messages
            .iter()
            .find(|m| m.channel == lidar_ch)
            .unwrap();
        assert_eq!(first.payload, payload(1, 0, 1000));
        assert_eq!(contents.metadata(meta::FERRY).unwrap()["type"], "u32");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn recording_under_latest_delivery_counts_every_message_it_missed() {
    let (dom, dir) = fresh("skip");
    let path = dir.join("skip.mcap");
    let qos = Qos::default()
        .delivery(Delivery::Latest)
        .wait(WaitStrategy::Block)
        .transport(Transport::Shm);
    let node = Node::with_domain("recorder", &dom).unwrap();
    // A writer so far behind that the receiver waits (queue of 1 byte) and the ring laps it.
    let options = RecordOptions {
        queue_bytes: 1,
        ..RecordOptions::default()
    };
    let mut rec = Recorder::start(&node, &["fast".to_owned()], &qos, &path, options).unwrap();
    let mut publisher = Node::with_domain("fast-node", &dom)
        .unwrap()
        .publisher(
            "fast",
            &qos.clone().max_message_size(512).ring_capacity(64 << 10),
        )
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while publisher.subscriber_count() == 0 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(2));
    }
    // ferry counts what a subscriber skipped between two messages it read: the recorder reads
    // the first one before the flood.
    publisher.send(&[0u8; 512]).unwrap();
    record_until(&mut rec, |r| r.counts()[0].1.messages == 1);
    const N: u64 = 5000;
    for seq in 1..N {
        // Never held back: the publisher does not wait for a latest subscriber.
        publisher.send(&vec![seq as u8; 512]).unwrap();
    }
    // Every message is written or counted as skipped once the last one arrived.
    record_until(&mut rec, |r| {
        let c = r.counts()[0].1;
        c.messages + c.skipped == N
    });
    let summary = rec.finish().unwrap();
    let c = summary.topics[0].1;
    assert!(c.skipped > 0, "the ring lapped the recorder: {c:?}");
    assert_eq!(c.messages + c.skipped, N);
    let contents = read_all(&path, ReadLimits::default()).unwrap();
    assert_eq!(contents.messages.len() as u64, c.messages);
    assert_eq!(
        contents.metadata(meta::TOPIC).unwrap()["skipped"],
        c.skipped.to_string()
    );
    assert_eq!(
        contents.metadata(meta::FERRY).unwrap()["delivery"],
        "latest"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn files_split_by_size_are_each_complete_and_the_oldest_are_deleted() {
    let (dom, dir) = fresh("split");
    let qos = Qos::default().wait(WaitStrategy::Block);
    let options = RecordOptions {
        compression: Compression::None,
        chunk_size: 8 << 10,
        split_size: Some(32 << 10),
        ..RecordOptions::default()
    };
    const N: u32 = 400;
    let summary = record_sent(&dom, &qos, &dir.join("run.mcap"), options, N);
    assert!(summary.files.len() >= 3, "{:?}", summary.files);
    let mut seqs = Vec::new();
    for (i, f) in summary.files.iter().enumerate() {
        assert_eq!(f, &dir.join(format!("run_{i}.mcap")));
        let c = read_all(f, ReadLimits::default()).unwrap();
        let first_seq: u64 = c.metadata(meta::PUBLISHER).unwrap()["first_seq"]
            .parse()
            .unwrap();
        assert_eq!(
            first_seq,
            seqs.len() as u64,
            "each file's channel says where it starts"
        );
        for m in &c.messages {
            assert_eq!(m.payload, payload(3, m.sequence, 256));
            seqs.push(m.sequence);
        }
    }
    assert_eq!(seqs, (0..N).collect::<Vec<_>>());

    // With at most 2 files kept, only the newest remain.
    let (dom, dir2) = fresh("ring");
    let options = RecordOptions {
        compression: Compression::None,
        chunk_size: 8 << 10,
        split_size: Some(16 << 10),
        max_files: Some(2),
        ..RecordOptions::default()
    };
    let summary = record_sent(&dom, &qos, &dir2.join("ring.mcap"), options, N);
    assert!(summary.deleted > 0);
    // Exactly the two newest: the last file closed counts too (it kept one before).
    assert_eq!(summary.files.len(), 2, "{:?}", summary.files);
    let left: Vec<_> = std::fs::read_dir(&dir2).unwrap().collect();
    assert_eq!(left.len(), summary.files.len());
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&dir2).unwrap();
}

/// Records topic `t` of `dom` into `path` while a publisher sends `n` messages (pattern 3, 256
/// words each), until all `n` are recorded; then finishes.
fn record_sent(dom: &str, qos: &Qos, path: &Path, options: RecordOptions, n: u32) -> RecordSummary {
    let node = Node::with_domain("recorder", dom).unwrap();
    let mut rec = Recorder::start(&node, &["t".to_owned()], qos, path, options).unwrap();
    let mut publisher = Node::with_domain("p", dom)
        .unwrap()
        .publisher("t", qos)
        .unwrap();
    wait_subscribed_with(&mut rec, &publisher);
    for seq in 0..n {
        publisher.send(&payload(3, seq, 256)).unwrap();
        rec.run_for(Duration::ZERO).unwrap();
    }
    record_until(&mut rec, |r| r.counts()[0].1.messages == n as u64);
    rec.finish().unwrap()
}

fn wait_subscribed_with(rec: &mut Recorder, p: &ferry::Publisher) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while p.subscriber_count() == 0 {
        assert!(Instant::now() < deadline);
        rec.run_for(Duration::from_millis(2)).unwrap();
    }
}

#[test]
fn an_existing_file_is_not_overwritten() {
    let (dom, dir) = fresh("exists");
    let path = dir.join("x.mcap");
    std::fs::write(&path, b"keep me").unwrap();
    let node = Node::with_domain("recorder", &dom).unwrap();
    let err = Recorder::start(
        &node,
        &["t".to_owned()],
        &Qos::default(),
        &path,
        RecordOptions::default(),
    )
    .err()
    .expect("refused");
    assert!(err.to_string().contains("exists"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"keep me");
    // A topic named twice is refused (it would be recorded in two channels).
    let err = Recorder::start(
        &node,
        &["t".to_owned(), "u".to_owned(), "t".to_owned()],
        &Qos::default(),
        &dir.join("twice.mcap"),
        RecordOptions::default(),
    )
    .err()
    .expect("refused");
    assert!(err.to_string().contains("\"t\" is named twice"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A recording written directly: `n` messages of topic `t`, 10 ms apart.
fn synthetic(path: &Path, n: u32) {
    let mut w = mcap::Writer::new(std::io::BufWriter::new(
        std::fs::File::create(path).unwrap(),
    ))
    .unwrap();
    let messages = (0..n).map(|seq| {
        let body = payload(4, seq, 1 + seq as usize % 7);
        (seq, body, 1_000_000_000 + seq as u64 * 10_000_000)
    });
    common::write_topic(&mut w, PayloadType::Bytes, messages);
    w.finish().unwrap();
}

#[test]
fn a_player_sends_every_message_in_order_on_its_schedule() {
    let (dom, dir) = fresh("play");
    let path = dir.join("in.mcap");
    const N: u32 = 30;
    synthetic(&path, N);
    let qos = Qos::default().wait(WaitStrategy::Block);
    let node = Node::with_domain("player", &dom).unwrap();
    let mut sub = Node::with_domain("reader", &dom)
        .unwrap()
        .subscriber("t", &qos)
        .unwrap();
    for rate in [Rate::Factor(2.0), Rate::Max] {
        let options = PlayOptions {
            rate,
            ..PlayOptions::default()
        };
        let mut player = Player::new(&node, &qos, &path, options).unwrap();
        assert_eq!(player.scan().messages, N as u64);
        assert_eq!(player.scan().topics[0].max_size, 4 * 7);
        let deadline = Instant::now() + Duration::from_secs(30);
        while player.min_subscribers() == 0 {
            assert!(Instant::now() < deadline);
            sub.try_recv().unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
        let reader = std::thread::scope(|s| {
            let r = s.spawn(|| {
                let mut got = Vec::new();
                while got.len() < N as usize {
                    let m = sub
                        .recv_timeout(Duration::from_secs(30))
                        .unwrap()
                        .expect("a message");
                    got.push(m.to_vec());
                }
                got
            });
            let report = player.play(&mut || false).unwrap();
            assert_eq!(report.sent, N as u64);
            assert_eq!(report.passes, 1);
            match rate {
                // 29 intervals of 10 ms at twice the speed: at least 145 ms.
                Rate::Factor(_) => {
                    assert!(report.elapsed >= Duration::from_millis(145), "{report:?}");
                    assert_eq!(report.lateness.unwrap().messages, N as u64);
                }
                Rate::Max => assert_eq!(report.lateness, None),
            }
            r.join().unwrap()
        });
        for (seq, m) in reader.iter().enumerate() {
            assert_eq!(m, &payload(4, seq as u32, 1 + seq % 7));
        }
    }
    // Only named topics; a topic the file lacks is an error that lists what it has.
    let options = PlayOptions {
        topics: Some(vec!["nope".to_owned()]),
        ..PlayOptions::default()
    };
    let err = Player::new(&node, &qos, &path, options)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("\"t\""), "{err}");
    // A speed so slow that due times would pass what the clock counts is refused.
    for f in [0.0, 1e-7, 1e-300, f64::NAN, f64::INFINITY] {
        let options = PlayOptions {
            rate: Rate::Factor(f),
            ..PlayOptions::default()
        };
        let err = Player::new(&node, &qos, &path, options)
            .err()
            .expect("refused");
        assert!(err.to_string().contains("speed factor"), "{f}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
