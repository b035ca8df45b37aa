use super::*;
use crate::experiment::testing::{assert_contains, assert_refused, read_back};
use crate::experiment::Experiment;
use crate::netns::parse_link_rate;
use figures::cases;

#[test]
fn example_results_read_back_and_draw() {
    let (value, back, section, table, summary) = read_back(&example());
    assert_eq!(value["rows"][0]["competitor"], "ferry");
    assert_eq!(value["rows"][1]["competitor"], "tcp");
    assert_eq!(value["rows"][1]["link_rate"], "100mbit");
    assert_eq!(value["request"]["link_rates"][1], "1gbit");
    assert_eq!(value["rows"][0]["publishers"][1]["retransmitted"], 9);
    assert_eq!(back.rows.len(), 8);
    // 700 messages of 64 KiB over 8 s.
    assert!((back.rows[0].ferry_mbps - 45.8752).abs() < 1e-9);
    let share = back.rows[0].share.unwrap();
    assert!((share - 680.0 / 700.0).abs() < 1e-9, "{share}");
    // Beside TCP: ferry / (ferry + TCP), 39.3216 / (39.3216 + 50).
    let share = back.rows[1].share.unwrap();
    assert!((share - 39.3216 / 89.3216).abs() < 1e-9, "{share}");

    let all = cases(&back.rows);
    assert_eq!(all.len(), 4);
    assert_eq!(all[0].rounds, 2);
    assert_eq!(all[0].met(), Some(true), "0.97 is near 1");
    // Beside TCP on 100mbit: 0.44 and 0.40, median 0.42: met.
    assert_eq!(all[1].met(), Some(true));
    // 1gbit: 5000 / 7000 = 0.71 < 0.8; beside TCP 131 / 931 = 0.14.
    assert_eq!(all[2].met(), Some(false));
    assert_eq!(all[3].met(), Some(false));
    assert_contains(
        &table,
        &[
            "ferry's share between 0.4 and 0.6",
            "smaller / larger near 1",
            "100mbit, two ferry flows: 45.9 and 44.6 Mbit/s, smaller / larger 0.97 (median of 2 rounds; goal at least 0.8): met",
            "1gbit, beside one TCP flow",
        ],
    );
    let line = table
        .lines()
        .find(|l| l.starts_with("2 ") && l.contains("1gbit") && l.contains("TCP"))
        .expect("round 2's 1gbit TCP line");
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        cells,
        ["2", "1gbit", "TCP", "131.1", "800.0", "0.14", "0", "3", "0"]
    );
    let two = table
        .lines()
        .find(|l| l.starts_with("1 ") && l.contains("second ferry flow"))
        .expect("round 1's line of two ferry flows");
    assert_contains(two, &[" 12 / 9 ", " 3 / 3 "]);
    assert!(two.ends_with(" 0 / 0"), "{two}");
    assert_eq!(
        section.plots.len(),
        5,
        "the bars and a plot over time per case"
    );
    let plot = &section.plots[0];
    assert_eq!(plot.file, "share.svg");
    assert_contains(&plot.svg, &["beside TCP", "1gbit"]);
    // Over time: each flow's bins from the first ferry flow's start, TCP's intervals from
    // iperf3's (4 s later).
    let ferry = &back.rows[1].timeline[0];
    assert_eq!(ferry.flow, "ferry");
    assert_eq!(ferry.at_s.len(), 56);
    assert!((ferry.at_s[0] - 0.125).abs() < 1e-9, "{:?}", ferry.at_s);
    // 600 / 32 = 18 messages of 64 KiB, twice, in a quarter second.
    assert!((ferry.mbps[0] - 36.0 * 65536.0 * 8.0 / 0.25 / 1e6).abs() < 1e-9);
    assert!((ferry.mbps[16] * 2.0 - ferry.mbps[0]).abs() < 1e-9);
    let tcp = &back.rows[1].timeline[1];
    assert_eq!(tcp.flow, "TCP");
    assert!((tcp.at_s[0] - 4.125).abs() < 1e-9, "{:?}", tcp.at_s);
    assert_eq!(tcp.mbps[0], 50.0);
    let second = &back.rows[0].timeline[1];
    assert_eq!(second.flow, "second ferry flow");
    assert!((second.at_s[0] - 4.125).abs() < 1e-9);
    let over_time = &section.plots[2];
    assert_eq!(over_time.file, "share-100mbit-tcp.svg");
    assert_contains(
        &over_time.svg,
        &[
            "Goodput over time on a 100mbit link beside one TCP flow",
            "ferry (first flow)",
        ],
    );
    // Round 1 (0.44) and round 2 (0.40) are as near their median (0.42): the first is shown.
    assert_contains(
        &over_time.caption,
        &["round 1", "started at 4 s", "from 6 to 14 s"],
    );
    assert_contains(&section.sentence, &["not met"]);
    assert_eq!(summary.len(), 1);
    assert!(
        summary[0]
            .ferry
            .starts_with("100mbit beside a second ferry flow: 0.97 (met)"),
        "{}",
        summary[0].ferry
    );
    assert_contains(&summary[0].what, &["between 0.4 and 0.6"]);
}

#[test]
fn configurations_are_checked() {
    let rate = |r: &str| parse_link_rate(r).unwrap();
    assert_refused::<Share>(&[
        (|c| c.competitors = Vec::new(), "--competitor"),
        (
            |c| c.competitors = vec![Competitor::Tcp, Competitor::Tcp],
            "--competitor: tcp is listed twice",
        ),
        (|c| c.link_rates = Vec::new(), "--link-rate"),
        (
            |c| {
                c.link_rates = vec![
                    parse_link_rate("100mbit").unwrap(),
                    parse_link_rate("100M").unwrap(),
                ]
            },
            "--link-rate: 100mbit is listed twice",
        ),
        (|c| c.seconds = 0.5, "--seconds"),
        (|c| c.seconds = f64::NAN, "--seconds"),
        (|c| c.seconds = 2.5, "--seconds 2.5 with --competitor tcp"),
        (|c| c.delay = -1.0, "--delay"),
        (|c| c.delay = f64::INFINITY, "--delay"),
        (|c| c.rounds = 0, "--rounds"),
    ]);
    // Fractions of a second are fine between ferry flows alone.
    assert!(Share::validate(&Config {
        competitors: vec![Competitor::Ferry],
        seconds: 2.5,
        delay: 0.0,
        ..Config::default()
    })
    .is_ok());
    let back: Config =
        serde_json::from_str(r#"{"competitors": ["tcp"], "link_rates": ["100M"]}"#).unwrap();
    assert_eq!(back.competitors, [Competitor::Tcp]);
    assert_eq!(back.link_rates, [rate("100mbit")]);
    assert_eq!((back.seconds, back.delay, back.rounds), (8.0, 4.0, 1));
    assert!(serde_json::from_str::<Config>(r#"{"competitor": ["tcp"]}"#).is_err());
    assert!(serde_json::from_str::<Config>(r#"{"link_rates": ["fast"]}"#).is_err());
}

#[test]
fn the_two_sides_messages_read_back() {
    let line = serde_json::to_string(&Command::Window {
        from_ns: 5,
        to_ns: 9,
    })
    .unwrap();
    assert!(matches!(
        serde_json::from_str::<Command>(&line).unwrap(),
        Command::Window {
            from_ns: 5,
            to_ns: 9
        }
    ));
    let line = serde_json::to_string(&Report::Stopped(PublisherCounters {
        sent: 7,
        retransmitted: None,
        queue_events: Some(2),
        congestion_events: Some(1),
    }))
    .unwrap();
    assert!(matches!(
        serde_json::from_str::<Report>(&line).unwrap(),
        Report::Stopped(PublisherCounters {
            sent: 7,
            retransmitted: None,
            queue_events: Some(2),
            ..
        })
    ));
    let mut counts = Counts::default();
    // Binned from the first message's quarter second on; past the limit, not binned.
    for at_ms in [1_010, 1_200, 1_300, 2_100, 2_900] {
        counts.bin(at_ms * 1_000_000, 5);
    }
    assert_eq!(
        (counts.bins_from, counts.bins.clone()),
        (4, vec![2, 1, 0, 0, 1])
    );
    counts.bin(999_000_000, 5);
    assert_eq!(
        counts.bins.iter().sum::<u32>(),
        4,
        "before the first bin: not binned"
    );
    let line = serde_json::to_string(&Report::Counts(Counts {
        received: 3,
        in_window: 2,
        bins_from: 7,
        bins: vec![1, 2],
    }))
    .unwrap();
    let back = serde_json::from_str::<Report>(&line).unwrap();
    assert!(
        matches!(
            &back,
            Report::Counts(Counts {
                received: 3,
                in_window: 2,
                bins_from: 7,
                bins,
            }) if bins == &[1, 2]
        ),
        "{back:?}"
    );
}
