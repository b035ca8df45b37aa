//! `ferry lab cycle` end to end: a tiny run without a CPU limit produces results JSON, and (as
//! root with a cgroup CPU controller) a run under a real CPU quota works and removes its cgroup.
//! Every wait is bounded; a child that overruns is killed.

use std::path::Path;
use std::time::Duration;

mod common;
use common::{read_json, tmp_path, Ended};

/// Runs a tiny `ferry lab cycle` (shared memory, 30 cycles of 5 ms, at most 4096 elements)
/// under CPU budget `cpu` with `placement`, its results to `json`; killed after 120 s.
fn tiny_cycle(cpu: &str, placement: &str, json: &Path) -> Ended {
    let json = json.to_str().expect("a UTF-8 path");
    let args = [
        "--transport",
        "shm",
        "--cycle-ms",
        "5",
        "--cpu",
        cpu,
        "--cycles",
        "30",
        "--max-multiplicity",
        "4096",
        "--placement",
        placement,
        "--json",
        json,
    ];
    common::lab("cycle", &args, Duration::from_secs(120))
}

#[test]
fn tiny_run_writes_contract_json() {
    let json = tmp_path("tiny");
    let out = tiny_cycle("none", "one-cpu,scheduler", &json);
    out.check_success("lab cycle");
    let v = read_json(&json);
    assert_eq!(v["experiment"], "cycle");
    assert!(v["ferry_version"].is_string());
    assert!(v["machine"]["cpus"].as_u64().unwrap() >= 1);
    assert_eq!(v["config"]["cycles"], 30);
    assert_eq!(v["config"]["max_multiplicity"], 4096);
    assert!(v["config"]["steal_rule"]
        .as_str()
        .is_some_and(|r| r.contains("50 ms")));
    assert_eq!(v["config"]["cpu"][0], serde_json::Value::Null);
    assert_eq!(
        v["config"]["placements"],
        serde_json::json!(["one-cpu", "scheduler"])
    );
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    // One CPU for both apps: the same CPU, named; the scheduler's: none named.
    assert_eq!(rows[0]["placement"], "one-cpu");
    assert!(rows[0]["writer_cpu"].is_u64(), "{}", rows[0]);
    assert_eq!(rows[0]["writer_cpu"], rows[0]["reader_cpu"]);
    assert_eq!(rows[1]["placement"], "scheduler");
    assert!(rows[1]["writer_cpu"].is_null() && rows[1]["reader_cpu"].is_null());
    let row = &rows[0];
    assert_eq!(row["transport"], "shm");
    assert_eq!(row["cycle_ms"], 5.0);
    assert_eq!(row["cpu"], serde_json::Value::Null);
    assert_eq!(row["repeat"], 0);
    let max = row["max_multiplicity"].as_u64().unwrap();
    // 16 KiB per 5 ms over shared memory without a CPU limit: no machine fails this.
    assert!(max > 0 && max <= 4096, "max_multiplicity {max}");
    assert!(row["deadline_misses"].is_u64());
    assert_eq!(row["bytes_per_cycle"].as_u64().unwrap(), max * 4);
    let trials = row["trials"].as_array().expect("trials");
    assert!(!trials.is_empty());
    // The study's first test: half the limit.
    assert_eq!(trials[0]["multiplicity"], 2048);
    for t in trials {
        if t["success"] == true {
            assert_eq!(t["complete"], 30);
            assert_eq!(t["corrupt"], 0);
        }
        // Without a CPU limit a run is void only on a failure under heavy host steal.
        assert!(t["void"].is_boolean(), "{t}");
        // Each app's own CPU time per cycle, measured.
        for key in ["writer_cpu_us_per_cycle", "reader_cpu_us_per_cycle"] {
            let us = t[key].as_f64().expect(key);
            assert!(us > 0.0 && us.is_finite(), "{key} {us}");
        }
    }
}

#[test]
#[ignore = "needs root"]
fn cpu_quota_run_removes_its_cgroup() {
    let root = rustix::process::geteuid().is_root();
    let v1 = Path::new("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists();
    let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    assert!(
        root && (v1 || v2),
        "needs root and a cgroup CPU controller (root {root}, v1 {v1}, v2 {v2}); CI has both"
    );
    let json = tmp_path("quota");
    let out = tiny_cycle("0.5", "scheduler", &json);
    if !out.success() && out.stderr.contains("cannot create the cgroup") {
        eprintln!("skipped: the cgroup cannot be created here: {}", out.stderr);
        return;
    }
    out.check_success("lab cycle --cpu 0.5");
    let v = read_json(&json);
    assert_eq!(v["config"]["cgroup"]["used"], true);
    assert_eq!(v["config"]["cgroup"]["period_us"], 100_000);
    let dir = v["config"]["cgroup"]["dir"].as_str().expect("cgroup dir");
    assert!(dir.contains("ferry-lab-"), "{dir}");
    assert!(!Path::new(dir).exists(), "{dir} is still there");
    let row = &v["rows"][0];
    assert_eq!(row["cpu"], 0.5);
    assert!(row["max_multiplicity"].as_u64().unwrap() > 0);
    let trial = &row["trials"][0];
    assert!(trial["throttled_periods"].is_u64(), "{trial}");
}
