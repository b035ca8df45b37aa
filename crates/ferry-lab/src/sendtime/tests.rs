use super::*;
use crate::experiment::testing::{assert_contains, assert_refused, only_plot, read_back};

#[test]
fn example_results_read_back_and_draw() {
    let (value, back, section, table, summary) = read_back(&example());
    // The rows' JSON is as before: the summary flattened, quartiles beside it, transports
    // by name, a skipped row without figures.
    let shm = &value["rows"][0];
    assert_eq!(shm["transport"], "shm");
    assert_eq!(
        (
            shm["p50_ns"].as_u64(),
            shm["p25_ns"].as_u64(),
            shm["p75_ns"].as_u64()
        ),
        (Some(300), Some(300), Some(600))
    );
    let skipped = &value["rows"][5];
    assert_eq!(skipped["transport"], "raw-udp4");
    assert!(skipped.get("p50_ns").is_none() && skipped["p25_ns"].is_null());
    assert!(skipped["skipped"].as_str().unwrap().contains("65507"));
    assert_eq!(
        value["config"]["transports"],
        serde_json::json!(["shm", "udp4", "raw-udp4"])
    );
    assert_eq!(back.rows.len(), 6);
    assert!(back.rows[5].summary.is_none());
    let plot = only_plot(&section, "send-time.svg");
    assert_contains(&plot.svg, &["raw-udp4"]);
    assert_contains(
        &section.sentence,
        &["at 32 B: shm 300 ns, udp4 3.00 µs, raw-udp4 4.50 µs; at 1 MiB: shm"],
    );
    assert_contains(&table, &["raw-udp4", "p50 send"]);
    assert_eq!(summary.len(), 2);
    assert_eq!(summary[0].what, "publish call p50, 32 B");
    assert_eq!(summary[0].ferry, "shm 300 ns, udp4 3.00 µs");
    assert_eq!(
        summary[0].floor.as_deref(),
        Some("raw-udp4 send_to 4.50 µs")
    );
    assert_eq!(summary[1].floor, None);
    assert_contains(summary[0].study.as_ref().unwrap(), &[&cite(&SHM_STREAM)]);
}

#[test]
fn configurations_and_requests_are_checked() {
    assert_refused::<SendTime>(&[
        (|c| c.transports = vec![], "at least one transport"),
        (|c| c.sizes = vec![0], "--sizes: 1 byte to 64M"),
    ]);
    assert_eq!("raw-udp4".parse(), Ok(Subject::RawUdp4));
    assert_contains(
        &SUBJECTS.parse("udp6").unwrap_err(),
        &["valid transports: shm, udp4, raw-udp4"],
    );
    let request = |max_size: usize, sizes: Vec<usize>| PeerRequest {
        transport: Subject::Shm,
        sizes,
        count: 1,
        max_size,
        domain: "d".to_owned(),
        topic: "t".to_owned(),
        ack_port: 1,
        cpu: None,
    };
    assert!(request(64, vec![32, 64]).check().is_ok());
    assert!(request(64, vec![65]).check().is_err());
    assert!(request(usize::MAX, vec![1]).check().is_err());
    assert!(request(64, vec![]).check().is_err());
}
