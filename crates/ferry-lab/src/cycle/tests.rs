use super::*;
use crate::experiment::testing::{assert_contains, only_plot, read_back};
use crate::experiment::Experiment;
use crate::studies::DOMINION;
use crate::subject::Subject;
use ferry::Delivery;

#[test]

fn fill_and_check_agree() {
    let mut v = vec![0u32; 1000];
    fill(&mut v, 77);
    assert_eq!(check(&v), Some(77));
    v[999] ^= 1;
    assert_eq!(check(&v), None);
    assert_eq!(check(&[]), None);
}

#[test]
fn only_a_failure_under_heavy_steal_is_void_and_only_twice() {
    let run = |success: bool, steal: Option<f64>| Trial {
        success,
        host_steal_ms: steal,
        writer_cpu_us_per_cycle: 150.0,
        reader_cpu_us_per_cycle: 100.0,
        ..Trial::default()
    };
    let budget = Some(300.0);
    assert!(void_for_steal(&run(false, Some(50.0)), 50.0, budget, 0));
    assert!(void_for_steal(&run(false, Some(900.0)), 50.0, budget, 1));
    assert!(void_for_steal(&run(false, Some(900.0)), 50.0, None, 0));
    // Twice at most: the third failure counts.
    assert!(!void_for_steal(&run(false, Some(900.0)), 50.0, budget, 2));
    // A pass always counts; so does a failure with little or unknown steal, with the rule
    // off, or one that needed more CPU than its budget.
    assert!(!void_for_steal(&run(true, Some(900.0)), 50.0, budget, 0));
    assert!(!void_for_steal(&run(false, Some(40.0)), 50.0, budget, 0));
    assert!(!void_for_steal(&run(false, None), 50.0, budget, 0));
    assert!(!void_for_steal(&run(false, Some(900.0)), 0.0, budget, 0));
    assert!(!void_for_steal(
        &run(false, Some(900.0)),
        50.0,
        Some(200.0),
        0
    ));
}

#[test]
fn bisection_finds_the_largest_passing() {
    for truth in [0u64, 1, 2, 3, 500, 123_457, 999_999, 1_000_000] {
        let mut tests = Vec::new();
        let (good, bad) = bisect(
            1_000_000,
            |_| 2,
            |m| {
                tests.push(m);
                Ok(m <= truth)
            },
        )
        .unwrap();
        assert!(
            good <= truth && truth - good <= 2,
            "truth {truth}: got {good}"
        );
        assert!(bad > truth, "truth {truth}: bad {bad}");
        // The study's first test: half the limit.
        assert_eq!(tests[0], 500_000);
        assert!(tests.len() <= 22, "{} tests", tests.len());
    }
    // A relative resolution: within 2 % of the truth in fewer runs.
    let mut n = 0;
    let (good, _) = bisect(
        4_000_000,
        |g| stop_gap(g, 2.0),
        |m| {
            n += 1;
            Ok(m <= 700_000)
        },
    )
    .unwrap();
    assert!(good <= 700_000 && good as f64 >= 700_000.0 * 0.98, "{good}");
    assert!(n <= 10, "{n} runs");
    // Everything passes: the limit itself is tested and reported.
    let (good, bad) = bisect(4096, |g| stop_gap(g, 2.0), |_| Ok(true)).unwrap();
    assert_eq!((good, bad), (4096, 4097));
}

#[test]
fn tally_counts_complete_cycles() {
    let mut t = Tally {
        seen: vec![false; 4],
        ..Tally::default()
    };
    let mut v = vec![0u32; 8];
    for c in [0, 1, 1, 3] {
        fill(&mut v, c);
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
        t.take(&bytes, Some(&v), 0, 8);
    }
    v[3] = 12_345;
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
    t.take(&bytes, None, 1, 8);
    assert_eq!(
        (t.complete, t.duplicates, t.corrupt, t.skipped),
        (3, 1, 1, 1)
    );
    assert!(!t.ended);
    t.take(&END.to_ne_bytes(), Some(&[END]), 0, 8);
    assert!(t.ended);
}

#[test]
fn the_configuration_takes_the_study_where_not_given() {
    let plain = Config::default();
    assert_eq!(plain.cycle_times(), [1.0, 10.0]);
    assert_eq!(plain.budgets(), [Some(0.3)]);
    assert_eq!((plain.max(), plain.resolution_percent()), (4_000_000, 2.0));
    let study = Config {
        study: true,
        cpu: Some(vec![Budget(None)]),
        ..Config::default()
    };
    assert_eq!(study.cycle_times().len(), 10);
    assert_eq!(study.budgets(), [None]);
    assert_eq!((study.max(), study.resolution_percent()), (STUDY_MAX, 0.0));
    Cycle::validate(&plain).unwrap();
    let twice = Config {
        transport: vec![Subject::Shm, Subject::Shm],
        ..Config::default()
    };
    let err = Cycle::validate(&twice).unwrap_err().to_string();
    assert!(err.contains("--transport: shm is listed twice"), "{err}");
    let slow = Config {
        cycle_ms: Some(vec![20_000.0]),
        ..Config::default()
    };
    assert!(Cycle::validate(&slow)
        .unwrap_err()
        .to_string()
        .contains("--cycle-ms"));
    let cycle_twice = Config {
        cycle_ms: Some(vec![1.0, 1.0]),
        ..Config::default()
    };
    let err = Cycle::validate(&cycle_twice).unwrap_err().to_string();
    assert!(err.contains("--cycle-ms: 1 is listed twice"), "{err}");
    // The JSON names are the options'; values as the command line writes them.
    let v: Config = serde_json::from_value(serde_json::json!({
        "transport": ["udp4"], "cpu": [0.5, null], "placement": ["two-cpus"],
        "delivery": "reliable", "max_multiplicity": 4096
    }))
    .unwrap();
    assert_eq!(v.transport, [Subject::Udp4]);
    assert_eq!(v.budgets(), [Some(0.5), None]);
    assert_eq!(v.placement, [Placement::TwoCpus]);
    assert_eq!(v.delivery.for_transport(Subject::Shm), Delivery::Reliable);
    assert!(serde_json::from_value::<Config>(serde_json::json!({"transports": ["shm"]})).is_err());
}

#[test]
fn a_peer_request_out_of_bounds_is_refused() {
    let ok = PeerRequest {
        role: Role::Reader,
        transport: Subject::Shm,
        domain: "d".to_owned(),
        topic: "t".to_owned(),
        period_ns: 1_000_000,
        tolerance_ns: 100_000,
        spin_ns: 0,
        cycles: 1000,
        multiplicity: 4096,
        delivery: Delivery::Reliable,
        pin_cpu: None,
    };
    ok.check().unwrap();
    let bad = [
        PeerRequest {
            cycles: MAX_CYCLES + 1,
            ..ok.clone()
        },
        PeerRequest {
            multiplicity: MAX_MULTIPLICITY + 1,
            ..ok.clone()
        },
        PeerRequest {
            multiplicity: 0,
            ..ok.clone()
        },
        PeerRequest {
            period_ns: 0,
            ..ok.clone()
        },
        PeerRequest {
            spin_ns: u64::MAX,
            ..ok.clone()
        },
    ];
    for request in bad {
        assert!(request.check().is_err(), "{request:?}");
    }
}

#[test]
fn example_results_read_back_and_draw() {
    let (value, back, section, table, summary) = read_back(&example());
    // The JSON of the results before the experiment was typed.
    assert_eq!(value["config"]["delivery"]["shm"], "reliable");
    assert_eq!(value["config"]["cgroup"]["period_us"], 100_000);
    assert_eq!(value["config"]["placements"][0], "one-cpu");
    assert_eq!(value["rows"][0]["transport"], "shm");
    assert_eq!(value["rows"][0]["placement"], "one-cpu");
    assert_eq!(value["rows"][0]["writer_cpu"], 1);
    assert_eq!(value["rows"][0]["min_failed"], 500_002);
    assert_eq!(value["rows"][0]["deadline_misses"], 0);
    assert_eq!(back.rows.len(), 2);
    assert_eq!(back.rows[1].transport, Subject::Udp4);
    assert_eq!(back.rows[1].bytes_per_cycle, 400_000);
    only_plot(&section, "cycle.svg");
    assert_contains(&section.sentence, &["shm/udp 5.0"]);
    assert_contains(&table, &["500000", "one-cpu"]);
    assert_eq!(summary.len(), 2);
    assert_eq!(summary[0].ferry, "500 000 u32");
    assert_contains(&summary[0].what, &["shared memory"]);
    assert!(summary[0]
        .study
        .as_deref()
        .is_some_and(|s| s.starts_with("over 200 000 u32") && s.contains(DOMINION.authors)));
    assert!(summary[1]
        .study
        .as_deref()
        .is_some_and(|s| s.starts_with("under 200 000 u32")));
}

#[test]
fn cycle_plots_the_median_over_repeats_beside_the_study() {
    let row = |t, place, ms, repeat, m| example_row(t, place, ms, repeat, m);
    use Placement::{OneCpu, Scheduler};
    use Subject::{Shm, Udp4 as Udp};
    let rows = vec![
        row(Shm, OneCpu, 1.0, 0, 500_000),
        row(Shm, OneCpu, 1.0, 1, 600_000),
        row(Shm, OneCpu, 1.0, 2, 550_000),
        row(Udp, OneCpu, 1.0, 0, 110_000),
        row(Shm, Scheduler, 1.0, 0, 400_000),
        row(Udp, Scheduler, 1.0, 0, 80_000),
        row(Shm, OneCpu, 10.0, 0, 900_000),
    ];
    let sec = Cycle::section(&example_results(rows)).unwrap();
    let plot = only_plot(&sec, "cycle.svg");
    for label in [
        "shm, 0.3 CPU, both apps on one CPU",
        "udp4, 0.3 CPU, placed by the kernel",
        &format!("{}: shm, 1 ms, 0.3 CPU", DOMINION.short),
        "cycle time (ms)",
    ] {
        assert!(plot.svg.contains(label), "{label} missing");
    }
    // The sentence: the median per placement, its ratio to the study and to udp.
    for part in [
        "shm at 1 ms, 0.3 CPU, both apps on one CPU: 550 000 u32 (2.75 × the study's 200 000), udp 110 000 u32, shm/udp 5.0 (medians of 3 repeats)",
        "shm at 1 ms, 0.3 CPU, placed by the kernel: 400 000 u32 (2.00 × the study's 200 000), udp 80 000 u32, shm/udp 5.0",
        "shm at 10 ms, 0.3 CPU, both apps on one CPU: 900 000 u32",
    ] {
        assert!(sec.sentence.contains(part), "{part:?} missing from {}", sec.sentence);
    }
}

#[test]
fn cycle_at_one_cycle_time_is_a_bar_per_placement() {
    let row = |t, place, repeat, m| example_row(t, place, 1.0, repeat, m);
    use Placement::{OneCpu, Scheduler};
    use Subject::{Shm, Udp4 as Udp};
    let mut first = row(Shm, OneCpu, 0, 500_000);
    first.trials = vec![
        Trial {
            multiplicity: 500_000,
            success: false,
            void: true,
            ..Trial::default()
        },
        Trial {
            multiplicity: 500_000,
            success: true,
            void: false,
            ..Trial::default()
        },
    ];
    let rows = vec![
        first,
        row(Udp, OneCpu, 0, 90_000),
        row(Shm, Scheduler, 0, 350_000),
        row(Udp, Scheduler, 0, 80_000),
        row(Shm, OneCpu, 1, 560_000),
        row(Udp, OneCpu, 1, 95_000),
        row(Shm, Scheduler, 1, 380_000),
        row(Udp, Scheduler, 1, 70_000),
    ];
    let sec = Cycle::section(&example_results(rows)).unwrap();
    assert_eq!(sec.plots.len(), 1);
    let svg = &sec.plots[0].svg;
    for label in [
        "Largest multiplicity at 1 ms",
        "both apps on one CPU",
        "placed by the kernel",
        "shm, 0.3 CPU",
        "udp4, 0.3 CPU",
        &format!("{}: shm, 1 ms, 0.3 CPU", DOMINION.short),
        "530000",
    ] {
        assert!(svg.contains(label), "{label} missing");
    }
    let caption = &sec.plots[0].caption;
    for part in [
        "shm, both apps on one CPU 500 000–560 000",
        "udp4, placed by the kernel 70 000–80 000",
        "1 run(s) failed while the host stole CPU time",
    ] {
        assert!(caption.contains(part), "{part:?} missing from {caption}");
    }
}
