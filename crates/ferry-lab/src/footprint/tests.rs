use super::*;
use crate::experiment::testing::{assert_contains, assert_refused, only_plot, read_back};

#[test]
fn example_results_read_back_and_draw() {
    let (value, back, section, table, summary) = read_back(&example());
    // The rows' JSON is as before: apps and transports by name, `received` only for min-sub.
    assert_eq!(value["rows"][0]["app"], "min-pub");
    assert_eq!(value["rows"][2]["transport"], "udp4");
    assert!(value["rows"][0].get("received").is_none());
    assert_eq!(value["rows"][1]["received"], 200);
    assert_eq!(value["config"]["vortex_lite"]["threads"], 7);
    assert_eq!(
        value["config"]["verdict"][0],
        "binary 533504 B (goal <= 531320 B, Vortex Lite's publisher image): MISSED"
    );
    assert_eq!(back.rows.len(), 4);
    let plot = only_plot(&section, "footprint.svg");
    assert_contains(
        &plot.svg,
        &[
            "pub shm",
            "sub udp",
            "Vortex Lite",
            "goal: Vortex Lite, 519 KB",
        ],
    );
    assert_contains(
        &section.sentence,
        &["ferry min-pub over shm: 521 KB / 300 KB private RSS (VmRSS 1800 KB, ring 100 KB) / 1 thread(s)"],
    );
    assert_contains(&table, &["ring (RssShmem)", "threads 1 (goal <= 2): met"]);
    assert_eq!(summary.len(), 3);
    assert_eq!(summary[0].ferry, "533504 bytes (min-pub)");
    assert!(summary[0]
        .study
        .as_ref()
        .unwrap()
        .starts_with("531320 bytes"));
    assert_eq!(
        summary[1].ferry,
        "shm 1780 KB (280 KB private), udp4 1890 KB (390 KB private)"
    );
    assert_eq!(
        summary[2].ferry,
        "min-pub: shm 1, udp4 2; min-sub: shm 1, udp4 2"
    );
    assert_contains(summary[2].study.as_ref().unwrap(), &[&cite(&VORTEX_LITE)]);
}

#[test]
fn configurations_are_checked() {
    assert_refused::<Footprint>(&[
        (|c| c.seconds = 0.1, "--seconds must be between 0.3 and 600"),
        (|c| c.transports.push(Subject::Tcp), "--transport"),
    ]);
    assert_contains(
        &SUBJECTS.parse("tcp").unwrap_err(),
        &["valid transports: shm, udp4"],
    );
    let back: Config = serde_json::from_str("{\"build\": true}").unwrap();
    assert!(back.build && back.bin_dir.is_none());
    assert_eq!(back.transports, [Subject::Shm, Subject::Udp4]);
}

#[test]
fn only_the_min_size_directory_is_taken() {
    // A directory without both apps is not the min-size build.
    let dir = std::env::temp_dir().join(format!("ferry-fp-locate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("min-pub"), b"").unwrap();
    assert_eq!(locate(Some(&dir)), None);
    std::fs::write(dir.join("min-sub"), b"").unwrap();
    assert_eq!(locate(Some(&dir)), Some(dir.clone()));
    let _ = std::fs::remove_dir_all(&dir);
}
