use super::*;
use crate::experiment::testing::{assert_contains, only_plot, read_back};
use crate::experiment::{Experiment, Results};
use crate::netns::{self};
use crate::studies::{cite, PACED_UDP, VORTEX_LITE};
use crate::subject::Subject;
use crate::{pattern, Dir, Pinning};
use ferry::{Delivery, WaitStrategy};
use std::time::Duration;

#[test]
fn the_fewest_link_packets_count_batches_for_small_messages() {
    let udp4 = |size, n| Subject::Udp4.min_link_packets(size, Some(n), None);
    // 64-byte messages share datagrams: 68 bytes each in 1424.
    assert_eq!(udp4(64, 1000), Some((1000 * 68u64).div_ceil(1424)));
    // Too large to share: a datagram each, 47 for 64 KiB.
    assert_eq!(udp4(1000, 10), Some(10));
    assert_eq!(udp4(64 << 10, 2), Some(94));
}

#[test]
fn transports_and_loss_parse() {
    for &t in SUBJECTS.0 {
        assert_eq!(SUBJECTS.parse(t.name()), Ok(t));
        assert_eq!(serde_json::to_value(t).unwrap(), t.name());
    }
    // ferry over UDP is udp4 in every experiment; "udp" reads as it.
    assert_eq!(SUBJECTS.parse("udp"), Ok(Subject::Udp4));
    assert!(SUBJECTS.parse("shm-spin").unwrap_err().contains("udp4"));
    assert_eq!(parse_loss("5"), Ok(5.0));
    assert_eq!(parse_loss("0.5%"), Ok(0.5));
    for bad in ["-1", "100", "x", ""] {
        assert!(parse_loss(bad).is_err(), "{bad:?}");
    }
    assert_eq!(impair_spec(Some(5.0)).as_deref(), Some("loss=5%,seed=1"));
    assert_eq!(impair_spec(Some(0.0)), None);
    let impairment = ferry::Impairment::parse("loss=5%,seed=1").unwrap();
    assert!(impairment.is_active());
}

#[test]
fn frame_sizes() {
    assert_eq!(Subject::Udp4.datagram_bytes(65_536), Some(1472));
    assert_eq!(Subject::Udp6.datagram_bytes(65_536), Some(1452));
    assert_eq!(
        Subject::Udp4.datagram_bytes(64),
        Some(64 + ferry::UDP_DATA_HEADER)
    );
    assert_eq!(Subject::Iperf3.datagram_bytes(64), Some(64));
    assert_eq!(Subject::Iperf3.datagram_bytes(65_536), Some(1472));
    assert_eq!(Subject::Shm.datagram_bytes(64), None);
    assert!(Subject::RawUdp4.cannot_run(65_536).is_some());
    assert!(Subject::RawUdp4.cannot_run(65_507).is_none());
}

#[test]
fn tally_counts_and_checks() {
    let mut t = Tally::new(100);
    let mut buf = vec![0u8; 100];
    for seq in [0, 1, 3, 2, 64] {
        write_message(&mut buf, seq);
        t.take(&buf, Some(seq)).unwrap();
    }
    assert_eq!(t.received.delivered, 4);
    assert_eq!(t.received.out_of_order, 1);
    assert_eq!(t.last_seq, Some(64));
    assert_eq!(t.received.checked, 2);
    write_message(&mut buf, 128);
    buf[99] ^= 1;
    assert!(t
        .take(&buf, None)
        .unwrap_err()
        .to_string()
        .contains("corrupt"));
    write_message(&mut buf, 5);
    assert!(t.take(&buf, Some(6)).is_err());
    assert!(t.take(&buf[..50], None).is_err());
}

#[test]
fn the_last_possible_sequence_number_ends_the_count_without_overflow() {
    let mut t = Tally::new(8);
    t.take(&u64::MAX.to_le_bytes(), None).unwrap();
    let mut ending = Ending::new(Duration::from_secs(60));
    assert!(
        !ending.finished(&t),
        "not before the publisher said it finished"
    );
    ending.sent = Some(u64::MAX);
    assert!(ending.finished(&t));
}

#[test]
fn another_system_is_set_against_ferrys_shared_memory() {
    let config = Config {
        transports: vec![Subject::Shm, Subject::Iceoryx2],
        sizes: vec![64, 1024],
        rounds: 2,
        delivery: Delivery::Latest,
        ..Config::default()
    };
    let m = |delivered: u64| Measurement {
        messages_sent: Some(delivered),
        messages_delivered: Some(delivered),
        bytes_delivered: Some(delivered * 64),
        seconds: 1.0,
        ..Measurement::default()
    };
    let mut rows = Vec::new();
    for round in 0..2 {
        for (t, delivered) in [(Subject::Shm, 4000), (Subject::Iceoryx2, 1000)] {
            rows.push(Row::new(&config, t, 64, round, Some(m(delivered)), None));
        }
    }
    add_ratios(&mut rows);
    let peer = &rows[1];
    assert_eq!(
        peer.delivery,
        RowDelivery::Latest,
        "the run's delivery applies"
    );
    assert_eq!(peer.datagram_bytes, None);
    assert_eq!(peer.ratios[&Subject::Shm], 0.25);
    assert!(rows[0].ratios.is_empty());
    assert_eq!(
        versus_peers(&rows),
        " ferry (shm) against iceoryx2 in the same rounds (ferry's delivered rate over \
         iceoryx2's): 4.00 × at 64 B."
    );
    assert_eq!(versus_peers(&example().rows), "", "no other system ran");
    assert!(Subject::Iceoryx2.remote_refusal().is_some());
}

#[test]
fn baselines_run_first_at_each_size() {
    use Subject::*;
    assert_eq!(
        run_order(&[Udp4, Iperf3, Iperf3Tcp, Shm, Zenoh]),
        [Iperf3Tcp, Shm, Iperf3, Zenoh, Udp4],
        "each after its baselines, otherwise as given"
    );
    assert_eq!(
        run_order(&[Zenoh, Udp4]),
        [Zenoh, Udp4],
        "no baseline present"
    );
}

#[test]
fn a_row_is_compared_with_the_baseline_run_nearest_in_time() {
    let config = Config {
        transports: vec![Subject::Shm, Subject::Iceoryx2, Subject::Zenoh],
        sizes: vec![64],
        rounds: 1,
        ..Config::default()
    };
    let row = |t: Subject, gbps: u64, ended_s: f64| {
        let m = Measurement {
            messages_sent: Some(1),
            messages_delivered: Some(1),
            bytes_delivered: Some(gbps * 1_000_000_000 / 8),
            seconds: 1.0,
            ..Measurement::default()
        };
        let mut r = Row::new(&config, t, 64, 0, Some(m), None);
        r.ended_s = Some(ended_s);
        r
    };
    let mut rows = vec![
        row(Subject::Shm, 40, 1.0),
        row(Subject::Iceoryx2, 8, 12.0),
        row(Subject::Zenoh, 10, 25.0),
        row(Subject::ZenohShm, 4, 30.0),
    ];
    // shm ran again right after zenoh, whose own shm run had ended 24 s before.
    rows[2].references.insert(
        Subject::Shm,
        Reference {
            delivered_gbps: 20.0,
            ended_s: 27.0,
        },
    );
    add_ratios(&mut rows);
    assert_eq!(
        rows[1].ratios[&Subject::Shm],
        0.2,
        "its round's shm row, 11 s away"
    );
    assert_eq!(rows[2].ratios[&Subject::Shm], 0.5, "the run beside it");
    assert_eq!(
        rows[3].ratios[&Subject::Shm],
        0.2,
        "the run beside zenoh, 3 s away"
    );
    // Results without times compare with the baseline's own row, as they did.
    for r in &mut rows {
        r.ended_s = None;
        r.ratios.clear();
    }
    add_ratios(&mut rows);
    assert_eq!(rows[2].ratios[&Subject::Shm], 0.25);
    // The references travel with the results, and are left out where there are none.
    let json = serde_json::to_value(&rows[2]).unwrap();
    assert_eq!(json["references"]["shm"]["delivered_gbps"], 20.0);
    assert!(serde_json::to_value(&rows[1])
        .unwrap()
        .get("references")
        .is_none());
    let back: Row = serde_json::from_value(json).unwrap();
    assert_eq!(back.references[&Subject::Shm].ended_s, 27.0);
}

#[test]
fn ratios_pair_rounds() {
    let args = Config {
        transports: vec![Subject::Udp4, Subject::Iperf3],
        sizes: vec![1024],
        delivery: Delivery::Latest,
        duration: 1.0,
        rounds: 2,
        wait: WaitStrategy::Block,
        ..Config::default()
    };
    let m = |bytes: u64| Measurement {
        messages_sent: Some(10),
        messages_delivered: Some(10),
        bytes_delivered: Some(bytes),
        seconds: 1.0,
        ..Measurement::default()
    };
    let mut rows = vec![
        Row::new(&args, Subject::Udp4, 1024, 0, Some(m(1_000_000_000)), None),
        Row::new(&args, Subject::Iperf3, 1024, 0, Some(m(500_000_000)), None),
        Row::new(&args, Subject::Udp4, 1024, 1, Some(m(1_000_000_000)), None),
        Row::new(&args, Subject::Iperf3, 1024, 1, Some(m(250_000_000)), None),
    ];
    add_ratios(&mut rows);
    assert_eq!(rows[0].ratios[&Subject::Iperf3], 2.0);
    assert_eq!(rows[2].ratios[&Subject::Iperf3], 4.0);
    assert!(rows[1].ratios.is_empty());
    assert_eq!(rows[0].delivered_gbps, Some(8.0));
    assert_eq!(rows[0].delivery, RowDelivery::Latest);
    assert_eq!(rows[1].delivery, RowDelivery::None);
    let text = render_table(
        &args,
        &Pinning::None {
            reason: "test".into(),
        },
        &rows,
    );
    assert!(text.contains("3.00 × iperf3"), "{text}");
}

#[test]
fn rows_keep_their_json() {
    let results = example();
    let row = serde_json::to_value(&results.rows[0]).unwrap();
    assert_eq!(row["transport"], "udp4");
    assert_eq!(row["delivery"], "reliable");
    assert!(row["ratios"]["raw-udp4"].is_number(), "{row}");
    assert!(row.get("skipped").is_none() && row.get("note").is_none());
    let raw = serde_json::to_value(&results.rows[2]).unwrap();
    assert_eq!(raw["transport"], "raw-udp4");
    assert_eq!(raw["delivery"], "none");
    let ratios: Vec<&String> = row["ratios"].as_object().unwrap().keys().collect();
    assert_eq!(ratios, ["iperf3", "raw-udp4"], "alphabetical, as before");
}

#[test]
fn a_missing_tool_is_named_in_the_summary_with_the_command_that_adds_it() {
    let mut results = example();
    assert!(
        !Throughput::summary(&results)
            .iter()
            .any(|l| l.what.starts_with("third-party")),
        "iperf3 ran in the example"
    );
    results.config.tools.clear();
    let lines = Throughput::summary(&results);
    let line = lines
        .iter()
        .find(|l| l.what.starts_with("third-party"))
        .expect("a line for the missing tool");
    let says = line.best_peer.as_deref().unwrap_or_default();
    assert_contains(
        says,
        &["iperf3 not installed", "apt-get install iperf3 sockperf"],
    );
}

#[test]
fn example_results_read_back_and_draw() {
    let (_, back, section, table, summary) = read_back(&example());
    assert_eq!(back.rows.len(), 12);
    let plot = only_plot(&section, "throughput.svg");
    assert_contains(&plot.svg, &["udp4", "raw-udp4", "iperf3"]);
    // The median of the two rounds, at the best size.
    assert_contains(
        &section.sentence,
        &["udp4 3.28 Gbit/s at 1 KiB", &cite(&VORTEX_LITE)],
    );
    assert_contains(&table, &["× raw-udp4"]);
    assert_eq!(summary.len(), 2);
    assert_eq!(summary[0].ferry, "udp4: 400.5 k msg/s");
    assert_eq!(summary[0].floor.as_deref(), Some("raw-udp4: 300.5 k msg/s"));
    assert_eq!(
        summary[0].best_peer.as_deref(),
        Some("iperf3: 200.5 k msg/s")
    );
    assert!(summary[0].study.as_deref().unwrap().contains("110 000"));
    assert!(
        summary[1].ferry.starts_with("udp4: 3.28 Gbit/s at 1 KiB"),
        "{:?}",
        summary[1]
    );
}

/// Rows of a made-up run across two links (udp4 and iperf3-tcp, 64 KiB, two rounds).
fn link_example() -> Results<Throughput> {
    let config = Config {
        transports: vec![Subject::Udp4, Subject::Iperf3Tcp],
        sizes: vec![64 << 10],
        rounds: 2,
        hosts: 2,
        link_rates: vec![
            netns::parse_link_rate("1gbit").unwrap(),
            netns::parse_link_rate("100mbit").unwrap(),
        ],
        ..Config::default()
    };
    let mut rows = Vec::new();
    for round in 0..2 {
        for rate in &config.link_rates {
            let scale = rate.bps / 100_000_000;
            for (t, delivered, bytes, packets) in [
                (
                    Subject::Udp4,
                    Some(100 * scale),
                    100 * scale * 65_536,
                    5_000 * scale,
                ),
                (
                    Subject::Iperf3Tcp,
                    None,
                    200 * scale * 65_536,
                    9_100 * scale,
                ),
            ] {
                let m = Measurement {
                    messages_sent: delivered,
                    messages_delivered: delivered,
                    bytes_delivered: Some(bytes),
                    seconds: 1.0,
                    retransmitted: (t == Subject::Iperf3Tcp).then_some(0),
                    link: Some(netns::QdiscCounts {
                        packets,
                        bytes: packets * 1500,
                        drops: 7,
                    }),
                    ..Measurement::default()
                };
                let mut row = Row::new(&config, t, 65_536, round, Some(m), None);
                row.link_rate = Some(rate.name());
                row.link_rate_bps = Some(rate.bps);
                rows.push(row);
            }
        }
    }
    add_ratios(&mut rows);
    let mut results = example();
    results.request = config;
    results.rows = rows;
    results
}

#[test]
fn link_rows_count_packets_against_the_minimum_and_tcp() {
    let results = link_example();
    let udp = &results.rows[0];
    assert_eq!(udp.link_rate.as_deref(), Some("1gbit"));
    // 1000 messages of 64 KiB: 47 datagrams of 1424 payload bytes each.
    assert_eq!(udp.min_link_packets, Some(47_000));
    assert_eq!(udp.link_packets, Some(50_000));
    let extra = udp.extra_link_packets_percent.unwrap();
    assert!((extra - 6.383).abs() < 0.01, "{extra}");
    assert_eq!(
        udp.ratios[&Subject::Iperf3Tcp],
        0.5,
        "the same link and round"
    );
    assert_eq!(udp.retransmitted, None, "unknown, not 0");
    let tcp = &results.rows[1];
    assert_eq!(
        tcp.min_link_packets,
        Some((2000 * 65_536u64).div_ceil(1448))
    );
    let value = serde_json::to_value(udp).unwrap();
    assert_eq!(value["link_rate_bps"], 1_000_000_000u64);
    assert!(value["extra_link_packets_percent"].is_number());
    let table = Throughput::table(&results);
    assert_contains(&table, &["100mbit", "unknown", "0.50 ×"]);
    let section = Throughput::section(&results).unwrap();
    assert_eq!(section.plots.len(), 1);
    assert_contains(&section.plots[0].svg, &["iperf3-tcp"]);
    assert_contains(
        &section.sentence,
        &[
            PACED_UDP.title,
            "Syzov",
            "On the 100mbit link, ferry's udp4 (reliable) 0.052 Gbit/s at 64 KiB, 0.50 × iperf3-tcp's 0.105 Gbit/s, +6.4 % packets",
        ],
    );
    let summary = Throughput::summary(&results);
    assert_eq!(summary.len(), 2, "one line per link");
    assert_contains(&summary[0].what, &["1gbit"]);
    assert_contains(&summary[0].ferry, &["0.50 × TCP"]);
    let back = Results::<Throughput>::from_value(serde_json::to_value(&results).unwrap());
    assert_eq!(back.unwrap().request.link_rates.len(), 2);
}

#[test]
fn periodic_link_rows_report_latency_beside_the_time_on_the_link() {
    let mut results = link_example();
    results.request.period = Some(0.125);
    for r in &mut results.rows {
        if r.transport == Subject::Iperf3Tcp {
            r.transport = Subject::Tcp;
        }
        r.period_s = Some(0.125);
        r.latency_p50_ms = Some(5.5);
        r.latency_p99_ms = Some(if r.transport == Subject::Tcp {
            6.5
        } else {
            6.0
        });
        r.latency_max_ms = Some(7.0);
        r.serialization_ms = Some(5.2);
    }
    let table = Throughput::table(&results);
    assert_contains(
        &table,
        &[
            "p99 ms",
            "on link ms",
            "× tcp",
            "one message every 125.0 ms",
        ],
    );
    let section = Throughput::section(&results).unwrap();
    assert!(
        section.plots.iter().all(|p| p.file.contains("latency")),
        "periodic runs plot latency"
    );
    assert_contains(
        &section.sentence,
        &[
            "p99 6.0 ms against its 5.2 ms on the link",
            "TCP's p99 6.5 ms",
        ],
    );
    let summary = Throughput::summary(&results);
    assert_contains(&summary[0].what, &["periodic"]);
    assert_contains(
        &summary[0].ferry,
        &["p99 latency 6.0 ms against its 5.2 ms"],
    );
    let best_peer = summary[0].best_peer.as_deref();
    assert_contains(
        best_peer.expect("a best peer"),
        &["tcp (same schedule)", "6.5 ms"],
    );
}

#[test]
fn two_hosts_take_link_rates_and_link_transports() {
    let link = |transports: Vec<Subject>, rates: &[&str]| Config {
        transports,
        hosts: 2,
        link_rates: rates
            .iter()
            .map(|r| netns::parse_link_rate(r).unwrap())
            .collect(),
        ..Config::default()
    };
    assert!(Throughput::validate(&link(LINK_TRANSPORTS.to_vec(), &["1gbit", "100mbit"])).is_ok());
    let err = |c: Config| Throughput::validate(&c).unwrap_err().to_string();
    assert!(err(link(LINK_TRANSPORTS.to_vec(), &[])).contains("--link-rate"));
    assert!(err(link(vec![Subject::Shm], &["1gbit"])).contains("shm"));
    assert!(err(link(vec![Subject::Udp4], &["1gbit", "1G"])).contains("twice"));
    let one_host = Config {
        link_rates: vec![netns::parse_link_rate("1gbit").unwrap()],
        ..Config::default()
    };
    assert!(err(one_host).contains("--hosts 2"));
    let config = serde_json::to_value(link(vec![Subject::Udp4], &["100mbit"])).unwrap();
    assert_eq!(config["link_rates"], serde_json::json!(["100mbit"]));
    let bad = serde_json::json!({"hosts": 2, "link_rates": ["100mbps"]});
    assert!(serde_json::from_value::<Config>(bad).is_err());
}

#[test]
fn a_period_needs_the_link_a_schedule_and_room_for_the_send_time() {
    let periodic = |transports: Vec<Subject>, period: f64, sizes: Vec<usize>| Config {
        transports,
        sizes,
        hosts: 2,
        link_rates: vec![netns::parse_link_rate("100mbit").unwrap()],
        period: Some(period),
        ..Config::default()
    };
    assert!(
        Throughput::validate(&periodic(PERIOD_TRANSPORTS.to_vec(), 0.125, vec![1 << 20])).is_ok()
    );
    let err = |c: Config| Throughput::validate(&c).unwrap_err().to_string();
    assert!(
        err(periodic(vec![Subject::Iperf3Tcp], 0.125, vec![1 << 20]))
            .contains("cannot send on a schedule")
    );
    assert!(err(periodic(vec![Subject::Udp4], 0.0001, vec![1 << 20])).contains("1 ms"));
    assert!(err(periodic(vec![Subject::Udp4], 5.0, vec![1 << 20])).contains("--duration"));
    assert!(err(periodic(vec![Subject::Udp4], f64::NAN, vec![1 << 20])).contains("1 ms"));
    assert!(err(periodic(vec![Subject::Udp4], 0.125, vec![8])).contains("16"));
    let one_host = Config {
        period: Some(0.125),
        ..Config::default()
    };
    assert!(err(one_host).contains("--hosts 2"));
    let tcp_here = Config {
        transports: vec![Subject::Tcp],
        ..Config::default()
    };
    assert!(err(tcp_here).contains("--hosts 2"));
}

#[test]
fn stamped_messages_give_their_latency_and_are_checked_past_the_stamp() {
    let mut tally = Tally::stamped(64);
    let mut buf = vec![0u8; 64];
    for seq in 0..100 {
        write_stamped(&mut buf, seq);
        tally.take(&buf, Some(seq)).unwrap();
    }
    let l = tally
        .counts()
        .latency
        .expect("stamped messages have a latency");
    assert!(l.p50_ns <= l.p99_ns && l.p99_ns <= l.max_ns, "{l:?}");
    // A stamp from the future (another clock) is 0, not a wrap.
    buf[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    buf[..8].copy_from_slice(&100u64.to_le_bytes());
    buf[16..].fill(pattern(100, Dir::Ping));
    tally.take(&buf, None).unwrap();
    assert_eq!(tally.latencies.last(), Some(&0));
    // The pattern is checked past the stamp (message 128 is a checked one).
    write_stamped(&mut buf, 128);
    buf[40] ^= 1;
    let e = tally.take(&buf, None).unwrap_err().to_string();
    assert!(e.contains("byte 40"), "{e}");
    // Unstamped tallies have none.
    let mut plain = Tally::new(64);
    write_message(&mut buf, 0);
    plain.take(&buf, None).unwrap();
    assert_eq!(plain.counts().latency, None);
}

#[test]
fn remote_runs_take_ipv4_udp_only() {
    let remote = |t: Subject| Config {
        transports: vec![t],
        remote: Some("10.0.0.2".to_owned()),
        ..Config::default()
    };
    for t in [Subject::RawUdp4, Subject::Udp4, Subject::Udp4Key] {
        assert!(Throughput::validate(&remote(t)).is_ok(), "{}", t.name());
    }
    let e = Throughput::validate(&remote(Subject::Udp6))
        .unwrap_err()
        .to_string();
    assert!(e.contains("over IPv4") && e.contains("raw-udp4"), "{e}");
    for t in [Subject::Shm, Subject::Iperf3, Subject::Sockperf] {
        let e = Throughput::validate(&remote(t)).unwrap_err().to_string();
        assert!(
            e.starts_with("--remote 10.0.0.2: ") && e.contains(t.name()),
            "{e}"
        );
    }
}

#[test]
fn counts_carry_what_was_received_at_their_top_level_on_the_wire() {
    let mut t = Tally::new(8);
    t.take(&7u64.to_le_bytes(), None).unwrap();
    let line = serde_json::to_value(t.counts()).unwrap();
    assert_eq!(
        (&line["delivered"], &line["bytes"]),
        (&serde_json::json!(1), &serde_json::json!(8))
    );
    assert!(line.get("received").is_none(), "{line}");
    let back: Counts = serde_json::from_value(line).unwrap();
    assert_eq!(back.received.delivered, 1);
}

#[test]
fn a_remote_rate_is_timed_on_the_subscriber_clock() {
    let c = Counts {
        received: Received {
            delivered: 10,
            bytes: 640,
            first_ns: 5_000_000_000,
            last_ns: 6_000_000_000,
            out_of_order: 0,
            checked: 1,
        },
        kernel_drops: None,
        ferry_lost: None,
        ferry_skipped: None,
        latency: None,
    };
    let mut m = Measurement {
        messages_sent: Some(12),
        ..Measurement::default()
    };
    read_report(&c, &mut m, 4_500_000_000, true);
    assert_eq!((m.seconds, m.lost), (1.5, Some(2)));
    read_report(&c, &mut m, 123, false);
    assert_eq!(m.seconds, 1.0);
}
