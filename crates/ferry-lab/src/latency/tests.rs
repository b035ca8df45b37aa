use super::*;
use crate::experiment::testing::{assert_contains, read_back};
use crate::experiment::Experiment;
use crate::subject::Subject;
use ferry::{IpVersion, WaitStrategy};

#[test]

fn the_table_names_rows_whose_rounds_ran_in_different_states_of_the_machine() {
    let calm = example();
    assert!(
        !Latency::table(&calm).contains("Rounds far apart"),
        "rounds within tens of percent are not flagged"
    );
    // raw-spin at 1 KiB: 900 ns in one round, 9.5 µs in the other.
    let stormy = example_with([
        [[[200, 210], [190, 220]], [[900, 950], [9_400, 9_500]]],
        [[[300, 320], [310, 290]], [[1000, 1100], [990, 1010]]],
    ]);
    let changed = state_changes(&stormy.rows);
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert!(
        changed[0].starts_with("raw-spin at 1 KiB ("),
        "{}",
        changed[0]
    );
    let table = Latency::table(&stormy);
    assert_contains(&table, &["Rounds far apart", "raw-spin at 1 KiB"]);
    // The report's section says it too.
    let section = Latency::section(&stormy).expect("section");
    assert_contains(&section.sentence, &["Rounds far apart"]);
    let section = Latency::section(&calm).expect("section");
    assert!(!section.sentence.contains("Rounds far apart"));
}

#[test]
fn the_section_says_where_ferry_is_ahead_of_another_system_level_or_behind() {
    let rows = rows_of(
        &[Subject::ShmSpin, Subject::Iceoryx2],
        &[32, 1024, 1 << 20],
        vec![
            vec![vec![vec![100; 3]], vec![vec![200; 3]], vec![vec![1000; 3]]],
            vec![vec![vec![250; 3]], vec![vec![201; 3]], vec![vec![500; 3]]],
        ],
    );
    let iceoryx2 = rows
        .iter()
        .find(|r| r.transport == Subject::Iceoryx2)
        .unwrap();
    assert_eq!(iceoryx2.baseline, Some(Subject::ShmSpin));
    assert_eq!(
        versus_peers(&rows),
        " ferry (shm-spin) against iceoryx2 in the same rounds (iceoryx2 p50 / p99 / p99.9 \
         over ferry's): ahead at 32 B (2.50 × / 2.50 × / 2.50 ×); level at 1 KiB (1.00 × / \
         1.00 × / 1.00 ×); behind at 1 MiB (0.50 × / 0.50 × / 0.50 ×)."
    );
    assert_eq!(versus_peers(&example().rows), "", "no other system ran");
}

#[test]
fn a_peer_faster_at_p50_and_slower_at_p99_is_neither_ahead_nor_level() {
    // At 1 MiB the peer's p50 is 0.57 × ferry's and its p99 4.5 ×; at 32 B it takes 3 × both.
    let rows = rows_of(
        &[Subject::ShmSpin, Subject::ZenohShm],
        &[32, 1 << 20],
        vec![
            vec![vec![vec![100; 4]], vec![vec![1000, 1000, 1000, 2000]]],
            vec![vec![vec![300; 4]], vec![vec![570, 570, 570, 9000]]],
        ],
    );
    let peer = |size: usize| {
        rows.iter()
            .find(|r| r.transport == Subject::ZenohShm && r.size_bytes == size)
            .and_then(|r| r.summary.as_ref())
            .unwrap()
    };
    assert_eq!((peer(1 << 20).p50_ns, peer(1 << 20).p99_ns), (570, 9000));
    assert_eq!(
        versus_peers(&rows),
        " ferry (shm-spin) against zenoh-shm in the same rounds (zenoh-shm p50 / p99 / p99.9 \
         over ferry's): ahead at 32 B (3.00 × / 3.00 × / 3.00 ×); behind at p50 and ahead at \
         p99 at 1 MiB (0.57 × / 4.50 × / 4.50 ×)."
    );
}

#[test]
fn other_systems_request_response_stands_against_ferrys_spinning_service() {
    use Subject::*;
    for peer in [Iceoryx2Rr, ZenohRr] {
        assert_eq!(peer.kind(), Kind::Peer);
        assert_eq!(peer.baseline(), Some(ShmSpinRr));
        assert_eq!(peer.ferry_counterpart(), Some(ShmSpinRr));
    }
    // ferry's service runs before them, after its own baseline.
    let given = [ZenohRr, Iceoryx2Rr, ShmSpinRr, ShmSpin];
    let order: Vec<Subject> = run_order(&given).into_iter().map(|i| given[i]).collect();
    assert_eq!(order, [ShmSpin, ShmSpinRr, ZenohRr, Iceoryx2Rr]);
    // At 1 KiB zenoh-rr's p50 is 0.80 × ferry's service's and its p99 10 ×.
    let rows = rows_of(
        &[ShmSpin, ShmSpinRr, Iceoryx2Rr, ZenohRr],
        &[32, 1024],
        vec![
            vec![vec![vec![100; 4]], vec![vec![200; 4]]],
            vec![vec![vec![120; 4]], vec![vec![250; 4]]],
            vec![vec![vec![300; 4]], vec![vec![250; 4]]],
            vec![vec![vec![6000; 4]], vec![vec![200, 200, 200, 2500]]],
        ],
    );
    let zenoh_rr = rows
        .iter()
        .find(|r| r.transport == ZenohRr && r.size_bytes == 1024)
        .unwrap();
    assert_eq!(zenoh_rr.baseline, Some(ShmSpinRr));
    assert_eq!(zenoh_rr.p50_ratio, Some(0.8));
    assert_eq!(
        versus_peers(&rows),
        " ferry (shm-spin-rr) against iceoryx2-rr in the same rounds (iceoryx2-rr p50 / p99 / \
         p99.9 over ferry's): ahead at 32 B (2.50 × / 2.50 × / 2.50 ×); level at 1 KiB (1.00 × \
         / 1.00 × / 1.00 ×). ferry (shm-spin-rr) against zenoh-rr in the same rounds (zenoh-rr \
         p50 / p99 / p99.9 over ferry's): ahead at 32 B (50.00 × / 50.00 × / 50.00 ×); behind \
         at p50 and ahead at p99 at 1 KiB (0.80 × / 10.00 × / 10.00 ×)."
    );
    // Without ferry's service beside them, nothing is said of them.
    let alone = rows_of(
        &[ShmSpin, Iceoryx2Rr],
        &[32],
        vec![vec![vec![vec![100; 4]]], vec![vec![vec![300; 4]]]],
    );
    assert_eq!(versus_peers(&alone), "");
}

#[test]
fn services_are_set_beside_the_ping_pong_that_waits_the_same_way() {
    let rows = rows_of(
        &[Subject::ShmSpin, Subject::ShmSpinRr, Subject::ShmBlock],
        &[32],
        vec![
            vec![vec![vec![100; 4]]],
            vec![vec![vec![110; 4]]],
            vec![vec![vec![9000; 4]]],
        ],
    );
    assert_eq!(
        services_beside_ping_pong(&rows),
        " ferry's services (one request and its response per round trip) beside its \
         ping-pong of two topics that waits the same way, p50 as the median ratio over rounds \
         (and the p50 difference): shm-spin-rr against shm-spin: 1.10 × at 32 B (+ 10 ns)."
    );
    // No service ran: nothing said.
    assert_eq!(services_beside_ping_pong(&rows[..1]), "");
}

#[test]
fn the_sentence_judges_p50_by_the_median_over_rounds_as_the_table_does() {
    // Per round the peer takes 1.1, 0.9 and 2.5 × ferry's p50: 1.1 × over the rounds. All
    // rounds pooled, its p50 (180) is below ferry's (200).
    let rows = rows_of(
        &[Subject::ShmSpin, Subject::Iceoryx2],
        &[32],
        vec![
            vec![vec![vec![100; 4], vec![200; 4], vec![400; 4]]],
            vec![vec![vec![110; 4], vec![180; 4], vec![1000; 4]]],
        ],
    );
    assert_eq!(rows[1].p50_ratio_pooled, Some(0.9));
    assert_eq!(
        versus_peers(&rows),
        " ferry (shm-spin) against iceoryx2 in the same rounds (iceoryx2 p50 / p99 / p99.9 \
         over ferry's): ahead at 32 B (1.10 × / 2.50 × / 2.50 ×)."
    );
}

#[test]
fn iceoryx2_block_stands_against_ferrys_blocking_shm() {
    let rows = rows_of(
        &[Subject::ShmBlock, Subject::Iceoryx2Block],
        &[32],
        vec![vec![vec![vec![100; 3]]], vec![vec![vec![300; 3]]]],
    );
    assert_eq!(Subject::Iceoryx2Block.baseline(), Some(Subject::ShmBlock));
    assert_eq!(rows[1].p50_ratio, Some(3.0));
    assert_eq!(Subject::Iceoryx2Block.kind(), Kind::Peer);
    assert_eq!(
        versus_peers(&rows),
        " ferry (shm-block) against iceoryx2-block in the same rounds (iceoryx2-block p50 / \
         p99 / p99.9 over ferry's): ahead at 32 B (3.00 × / 3.00 × / 3.00 ×)."
    );
}

#[test]
fn baselines_run_first_in_a_round() {
    use Subject::*;
    let given = [
        Zenoh,
        ShmSpin,
        Iceoryx2Block,
        RawSpin,
        ShmBlock,
        Udp4Key,
        Udp4,
    ];
    let order: Vec<Subject> = run_order(&given).into_iter().map(|i| given[i]).collect();
    // raw-futex and raw-udp4 do not run: shm-block and udp4 go first, with raw-spin.
    assert_eq!(
        order,
        [
            RawSpin,
            ShmBlock,
            Udp4,
            ShmSpin,
            Iceoryx2Block,
            Udp4Key,
            Zenoh
        ]
    );
}

#[test]
fn a_warm_up_after_the_first_run_lasts_about_two_seconds_at_most() {
    let full = [131_072, 4_096, 200];
    // Before its first run a transport gets the full counts.
    let zenoh = |rtt: &[Option<u64>]| warmups_for(Subject::Zenoh, &full, 200, rtt);
    assert_eq!(zenoh(&[None; 3]), full);
    // Round trips of 200 ns and 500 ns fit far more than the counts in 2 s.
    assert_eq!(zenoh(&[Some(200), Some(500), Some(100_000)]), full);
    // Zenoh: 100 µs round trips, 20 000 in 2 s; never below --warmup; a size without a
    // figure keeps its count.
    assert_eq!(
        zenoh(&[Some(100_000), Some(50_000_000), None]),
        [20_000, 200, 200]
    );
    // ferry's shared memory keeps the whole lap of its ring, even asleep (45 µs round trips);
    // its floor does not write a ring and is cut like any other.
    let slow = [Some(45_000), Some(45_000), Some(45_000)];
    assert_eq!(warmups_for(Subject::ShmBlock, &full, 200, &slow), full);
    assert_eq!(
        warmups_for(Subject::RawFutex, &full, 200, &slow),
        [44_444, 4_096, 200]
    );
    assert_eq!(rtt_of(&[30, 10, 20]), Some(40));
    assert_eq!(rtt_of(&[]), None);
    // Each round's count travels with its row.
    let config = Config {
        transports: vec![Subject::Zenoh],
        sizes: vec![32],
        samples: 4,
        rounds: 2,
        ..Config::default()
    };
    let mut samples: Samples = vec![vec![vec![vec![50_000; 2], vec![50_000; 2]]]];
    let references: References = vec![vec![vec![None, None]]];
    let warmed: Warmed = vec![vec![vec![Some(131_072), Some(20_000)]]];
    let rows = build_rows(&config, &mut samples, &references, &warmed);
    let counts: Vec<_> = rows[0]
        .rounds
        .iter()
        .map(|r| r.warmup_round_trips)
        .collect();
    assert_eq!(counts, [Some(131_072), Some(20_000)]);
    let value = serde_json::to_value(&rows[0]).unwrap();
    assert_eq!(value["rounds"][1]["warmup_round_trips"], 20_000);
}

#[test]
fn a_row_is_compared_with_the_baseline_run_beside_it() {
    let config = Config {
        transports: vec![Subject::ShmSpin, Subject::Zenoh],
        sizes: vec![32],
        samples: 6,
        rounds: 2,
        ..Config::default()
    };
    // ferry's own runs: 100 ns, then 400 ns (the machine slowed down during the Zenoh run of
    // round 2, and a run of ferry right after it found 200 ns).
    let mut samples: Samples = vec![
        vec![vec![vec![100; 3], vec![400; 3]]],
        vec![vec![vec![300; 3], vec![1000; 3]]],
    ];
    let references: References = vec![vec![vec![None, None]], vec![vec![None, Some(vec![200; 3])]]];
    let rows = build_rows(&config, &mut samples, &references, &Warmed::new());
    let zenoh = &rows[1];
    assert_eq!(zenoh.rounds[0].p50_ratio, Some(3.0));
    assert!(zenoh.rounds[0].reference.is_none());
    assert_eq!(zenoh.rounds[1].p50_ratio, Some(5.0));
    assert_eq!(zenoh.rounds[1].reference.map(|r| r.p50_ns), Some(200));
    assert_eq!(zenoh.p50_ratio, Some(4.0));
    let beside = zenoh.baseline_beside.unwrap();
    assert_eq!(
        (beside.samples, beside.min_ns, beside.max_ns),
        (6, 100, 200)
    );
    assert_contains(&versus_peers(&rows), &["ahead at 32 B"]);
    // ferry's own row keeps its own runs.
    assert_eq!(rows[0].summary.unwrap().max_ns, 400);
    // The references travel with the results.
    let value = serde_json::to_value(&rows[1]).unwrap();
    let back: Row = serde_json::from_value(value).unwrap();
    assert_eq!(back.rounds[1].reference.map(|r| r.p50_ns), Some(200));
}

#[test]
fn example_results_read_back_and_draw() {
    let (_, back, section, table, summary) = read_back(&example());
    assert_eq!(back.rows.len(), 4);
    let shm = &back.rows[2];
    assert_eq!((shm.transport, shm.size_bytes), (Subject::Shm, 32));
    assert_eq!(shm.baseline, Some(Subject::RawSpin));
    assert!(shm.p50_ratio.is_some_and(|r| r > 1.0));
    assert_eq!(section.plots.len(), 1);
    assert_contains(&section.plots[0].svg, &["raw-spin"]);
    assert_contains(&table, &["× raw-spin"]);
    assert_eq!(summary.len(), 1, "shared memory only: {summary:?}");
    assert_eq!(summary[0].what, "one-way latency p50, 32 B, shared memory");
    assert_contains(&summary[0].ferry, &["(shm, "]);
    assert!(summary[0]
        .floor
        .as_deref()
        .is_some_and(|f| f.contains("raw-spin")));
    assert!(summary[0]
        .study
        .as_deref()
        .is_some_and(|s| s.contains("cpp-shm-stream") || s.contains("Kabashima")));
}

#[test]
fn transports_parse() {
    for &t in Subject::ALL {
        assert_eq!(t.name().parse(), Ok(t));
    }
    let err = "udp5".parse::<Subject>().unwrap_err();
    assert_contains(&err, &["raw-udp4", "raw-futex"]);
}

#[test]
fn udp_transports() {
    assert_eq!(Subject::Udp4.baseline(), Some(Subject::RawUdp4));
    assert_eq!(Subject::Udp6.baseline(), Some(Subject::RawUdp4));
    assert!(Subject::RawUdp4.cannot_carry(65_507).is_none());
    assert!(Subject::RawUdp4.cannot_carry(65_508).is_some());
    assert!(Subject::Udp4.cannot_carry(1 << 20).is_none());
    let qos = Subject::Udp6.ferry_qos(100).unwrap();
    assert_eq!(qos.transport, ferry::Transport::Udp);
    assert_eq!(qos.ip_version, IpVersion::V6);
    assert_eq!(qos.wait, WaitStrategy::Block);
    assert!(Subject::RawUdp4.ferry_qos(100).is_none());
}

#[test]
fn rounds_split_samples() {
    let split: Vec<usize> = (0..3).map(|r| samples_in_round(10, 3, r)).collect();
    assert_eq!(split, [4, 3, 3]);
    assert_eq!(
        (0..5)
            .map(|r| samples_in_round(10_000, 5, r))
            .sum::<usize>(),
        10_000
    );
}
