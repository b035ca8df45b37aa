use super::*;
use crate::experiment::testing::{assert_contains, assert_refused, only_plot, read_back};

#[test]
fn example_results_read_back_and_draw() {
    let (value, back, section, table, summary) = read_back(&example());
    // The rows' JSON is as before: names for the transport and the wait strategy.
    assert_eq!(value["rows"][2]["wait"], "spin");
    assert_eq!(value["rows"][2]["transport"], "shm");
    assert_eq!(value["rows"][2]["cpu_percent"], 99.0);
    assert_eq!(value["config"]["clock_ticks_per_second"], 100);
    assert_eq!(back.rows.len(), 3);
    let plot = only_plot(&section, "idle.svg");
    assert_contains(&plot.svg, &["adaptive"]);
    assert_contains(
        &section.sentence,
        &["uses block 0.0 %, adaptive 1.0 %, spin 99.0 % of one CPU"],
    );
    assert_contains(
        &table,
        &["shm spin      idle for 1.00 s: 0.990 s of CPU = 99.00 % of one CPU"],
    );
    assert_eq!(summary.len(), 3);
    assert_eq!(summary[2].ferry, "99.00 % of one CPU");
    assert_contains(summary[0].study.as_ref().unwrap(), &[&cite(&SHM_STREAM)]);
    assert!(summary[1].study.is_none());
}

#[test]
fn configurations_are_checked() {
    assert_refused::<Idle>(&[
        (|c| c.seconds = 0.0, "--seconds"),
        (|c| c.wait = vec![], "--wait"),
    ]);
    assert_eq!("adaptive".parse(), Ok(WaitStrategy::Adaptive));
    assert!("sleep"
        .parse::<WaitStrategy>()
        .unwrap_err()
        .to_string()
        .contains("valid wait strategies: spin, block, adaptive"));
    assert_eq!("auto".parse(), Ok(Subject::Auto));
    assert!(SUBJECTS.parse("tcp").is_err());
    let back: Config = serde_json::from_str("{\"wait\": [\"spin\"]}").unwrap();
    assert_eq!(
        (back.wait, back.transport),
        (vec![WaitStrategy::Spin], Subject::Shm)
    );
}
