use super::*;
use crate::experiment::testing::{assert_contains, assert_refused, read_back};

/// The example with only the rows `keep` keeps, as JSON.
fn example_with(keep: impl Fn(&Row) -> bool) -> serde_json::Value {
    let mut results = example();
    results.rows.retain(keep);
    serde_json::to_value(&results).unwrap()
}

fn svgs_of(v: &serde_json::Value, stem: &str) -> Vec<(String, String)> {
    let results = Results::<UdpRate>::from_value(v.clone()).unwrap();
    UdpRate::section(&results)
        .unwrap()
        .named_after(UdpRate::NAME, stem)
        .plots
        .into_iter()
        .map(|p| (p.file, p.svg))
        .collect()
}

#[test]
fn example_results_read_back_and_draw() {
    let (_, back, section, table, summary) = read_back(&example());
    assert_eq!(back.rows.len(), 4);
    // The median of the windows after the first.
    assert_eq!(back.rows[0].achieved_bps, 2.4e9 * 0.95);
    assert_eq!(back.rows[0].lost, 10);
    let row = serde_json::to_value(&back.rows[3]).unwrap();
    assert_eq!(row["threads_mode"], "auto");
    assert_eq!(row["pacing"], "catch-up");
    let names: Vec<&str> = section.plots.iter().map(|p| p.file.as_str()).collect();
    assert_eq!(names, ["udp-rate.svg", "udp-rate-timeline-3.svg"]);
    assert_contains(
        &section.sentence,
        &["(MSS 1472, 2 thread(s))", &cite_first(&PACED_UDP)],
    );
    assert_contains(&table, &["2 (auto)", "catch-up"]);
    assert_eq!(summary.len(), 3);
    assert_eq!(
        summary[0].ferry,
        "2.28 Gbit/s delivered of 3.00 Gbit/s asked"
    );
    assert!(summary[1].ferry.ends_with("with 2 threads"));
    assert_contains(&summary[2].ferry, &["of 4.00 Gbit/s asked"]);
    assert!(summary
        .iter()
        .all(|l| l.floor.is_none() && l.best_peer.is_none()));
}

#[test]
fn udp_rate_plots_rate_against_threads_and_timelines_where_the_pool_changed() {
    let fixed = example_with(|r| r.threads_mode == ThreadsMode::Fixed);
    let svgs = svgs_of(&fixed, "udp-rate");
    let names: Vec<&str> = svgs.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        names,
        ["udp-rate.svg"],
        "fixed pools without changes have no timeline"
    );
    let svg = &svgs[0].1;
    assert_contains(
        svg,
        &[
            "MSS 1472 B",
            "MSS 8972 B",
            "requested 3.00 Gbit/s",
            "sender threads",
        ],
    );
    let auto = example_with(|r| r.threads_mode == ThreadsMode::Auto);
    let svgs = svgs_of(&auto, "udp-rate-auto");
    let names: Vec<&str> = svgs.iter().map(|(f, _)| f.as_str()).collect();
    // A second run of one experiment gets its own file names.
    assert_eq!(names, ["udp-rate-auto-timeline-0.svg"]);
    assert_contains(&svgs[0].1, &["sender threads", "requested"]);
}

#[test]
fn options_are_checked() {
    assert_refused::<UdpRate>(&[
        (
            |c| c.duration = 0.0,
            "--duration must be between 0.01 and 3600 seconds",
        ),
        (|c| c.interval = 0.01, "--interval"),
        (|c| c.mss = vec![65_508], "--mss 65508"),
        (
            |c| c.threads = ThreadCounts::Fixed(vec![0, 3]),
            "--threads: 0 threads is out of range",
        ),
        (
            |c| c.threads = ThreadCounts::Fixed(vec![]),
            "--threads: give at least one",
        ),
        (|c| c.rate = vec![0], "must be above 0"),
    ]);
    assert_eq!(
        parse_threads("1..3"),
        Ok(ThreadCounts::Fixed(vec![1, 2, 3]))
    );
    assert_eq!(parse_threads("2,4"), Ok(ThreadCounts::Fixed(vec![2, 4])));
    assert_eq!(parse_threads("auto"), Ok(ThreadCounts::Auto));
    for junk in ["0..3", "3..1", "1..999", "x", "", "1,,2"] {
        assert!(parse_threads(junk).is_err(), "{junk:?}");
    }
    assert_eq!(ThreadCounts::Fixed(vec![1, 2]).to_string(), "1,2");
    assert_eq!(
        serde_json::to_value(ThreadCounts::Auto).unwrap(),
        serde_json::json!("auto")
    );
    assert_eq!(parse_rate("3G"), Ok(3_000_000_000));
    assert_eq!(parse_rate(" 1G "), Ok(1_000_000_000));
    assert_eq!(parse_rate("10T"), Ok(10_000_000_000_000));
    assert!(parse_rate("0").is_err());
    // Not a number (a suffix after a character of more than one byte once panicked).
    for bad in [" ék", " üM", "é", "0.5", "11T", "NaN", "inf", "-1G", ""] {
        assert!(parse_rate(bad).is_err(), "{bad:?}");
    }
    assert_eq!("steady".parse(), Ok(Pacing::Steady));
    assert_eq!(serde_json::to_value(Pacing::CatchUp).unwrap(), "catch-up");
}
