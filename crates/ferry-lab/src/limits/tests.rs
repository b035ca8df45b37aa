use super::*;
use crate::experiment::testing::{assert_contains, assert_refused, read_back};

#[test]
fn example_results_read_back_and_draw() {
    let (value, back, section, table, _) = read_back(&example());
    // The JSON of a row is as before: kinds by name, absent figures left out.
    assert_eq!(value["rows"][2]["kind"], "udp-loopback");
    assert!(value["rows"][4].get("p50_ns").is_none());
    assert!(value["rows"][0].get("gbytes_per_s").is_none());
    assert_eq!(
        value["config"]["memcpy_sizes"],
        serde_json::json!([4096, 16384, 65536, 262144, 1048576])
    );
    assert_eq!(back.rows.len(), 7);
    assert_eq!(back.rows[4].kind, Kind::Memcpy);
    let files: Vec<&str> = section.plots.iter().map(|p| p.file.as_str()).collect();
    assert_eq!(files, ["limits-memcpy.svg", "limits-latency.svg"]);
    assert_contains(&section.plots[1].svg, &["udp-loopback 1 KiB"]);
    assert_contains(
        &section.sentence,
        &[
            "cache line 70",
            "UDP loopback 32",
            "memcpy 40.0 GB/s at 64 KiB and 12.0 GB/s at 1 MiB",
        ],
    );
    assert_contains(&table, &["udp-loopback", "40.0"]);
}

#[test]
fn configurations_are_checked() {
    assert_refused::<Limits>(&[
        (|c| c.samples = 0, "--samples"),
        (|c| c.memcpy_seconds = 0.0, "--memcpy-seconds"),
        (|c| c.memcpy_max = 1024, "--memcpy-max"),
    ]);
    let back: Config = serde_json::from_str("{\"samples\": 5}").unwrap();
    assert_eq!((back.samples, back.memcpy_max), (5, 64 << 20));
    assert!(serde_json::from_str::<Config>("{\"sample\": 5}").is_err());
}
