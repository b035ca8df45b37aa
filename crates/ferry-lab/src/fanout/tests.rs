use super::*;
use crate::experiment::testing::{assert_contains, assert_refused, only_plot, read_back};
use figures::median_ratio;

#[test]

fn example_results_read_back_and_draw() {
    let (value, back, section, table, summary) = read_back(&example());
    assert_eq!(value["rows"][1]["configuration"], "with-slow");
    assert_eq!(value["rows"][1]["fast_received"][1], 4995);
    assert_eq!(value["rows"][0]["fast_fraction"], 0.999);
    assert_eq!(value["config"]["period_us"], 200.0);
    assert_eq!(value["config"]["slow_pause_us"], 2000.0);
    assert_eq!(back.rows.len(), 4);
    // Round 1: 4995 / 4995; round 2: 4500 / 5000; the median of the two.
    let ratio = median_ratio(&back.rows).unwrap();
    assert!((ratio - 0.95).abs() < 1e-9, "{ratio}");
    assert_contains(
        &table,
        &[
            "the other subscribers get 0.95 × what they get alone (goal ≥ 0.9; median of 2 rounds)",
            "1/10 of the rate",
        ],
    );
    let line = table
        .lines()
        .find(|l| l.starts_with("2 "))
        .expect("round 2's line");
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cells, ["2", "5000", "5000", "4500", "0.900", "490", "4490"]);
    let plot = only_plot(&section, "fanout.svg");
    assert_contains(&plot.svg, &["round 2"]);
    assert_contains(
        &section.sentence,
        &[
            "the others got 0.95 × what they got alone",
            "left it out of 4495",
        ],
    );
    assert_eq!(summary.len(), 1);
    assert_eq!(summary[0].ferry, "0.95 × what they get alone (goal ≥ 0.9)");
    assert!(summary[0].study.is_none());
}

#[test]
fn configurations_are_checked() {
    assert_refused::<Fanout>(&[
        (|c| c.size = 7, "--size"),
        (|c| c.rate = 0.0, "--rate"),
        (|c| c.rate = f64::NAN, "--rate"),
        (|c| c.subscribers = 0, "--subscribers"),
        (|c| c.subscribers = MAX_SUBSCRIBERS + 1, "--subscribers"),
        (|c| c.slowdown = 0.5, "--slowdown"),
        (|c| c.seconds = 0.0, "--seconds"),
        (|c| c.rounds = 0, "--rounds"),
        (
            |c| {
                c.seconds = 0.01;
                c.rate = 50.0;
            },
            "at least one message",
        ),
    ]);
    let back: Config = serde_json::from_str("{\"rate\": 500, \"rounds\": 1}").unwrap();
    assert_eq!((back.rate, back.rounds, back.size), (500.0, 1, 8192));
    assert!(serde_json::from_str::<Config>("{\"rates\": 500}").is_err());
    assert_eq!(back.messages(), 1000);
    assert_eq!(
        Config {
            seconds: 0.3,
            rate: 500.0,
            ..Config::default()
        }
        .messages(),
        150
    );
}

#[test]
fn the_two_sides_messages_read_back() {
    let line = serde_json::to_string(&Report::Counts(Counts {
        fast: vec![3, 4],
        slow: None,
    }))
    .unwrap();
    assert!(matches!(
        serde_json::from_str::<Report>(&line).unwrap(),
        Report::Counts(Counts { fast, slow: None }) if fast == [3, 4]
    ));
    let done = serde_json::to_string(&Command::Done).unwrap();
    assert!(matches!(
        serde_json::from_str::<Command>(&done).unwrap(),
        Command::Done
    ));
}
