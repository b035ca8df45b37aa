//! The default suite (`ferry lab`) in its hidden smoke mode, where every experiment is tiny:
//! it writes a report directory whose results.json parses, with one object per experiment in
//! the common results format, a CSV per experiment, SVG plots, and an index.html that shows every
//! SVG. No timing is asserted; the run is bounded and killed if it overruns.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

mod common;

fn out_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferry-suite-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Runs `ferry lab <args>` for at most `limit`.
fn run_lab(args: &[&str], limit: Duration) -> common::Ended {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferry"));
    cmd.env("CI", "true");
    common::run_lab(cmd, args, limit)
}

/// Runs `ferry lab report INPUTS --out OUT` for at most a minute.
fn report(inputs: &[&Path], out: &Path) -> common::Ended {
    let mut args = vec!["report"];
    args.extend(inputs.iter().map(|p| p.to_str().expect("a UTF-8 path")));
    args.extend(["--out", out.to_str().expect("a UTF-8 path")]);
    run_lab(&args, Duration::from_secs(60))
}

fn files_with(dir: &Path, ext: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read the report directory")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(ext))
        .collect();
    v.sort();
    v
}

#[test]
fn smoke_suite_writes_a_complete_report() {
    let dir = out_dir("smoke");
    let out = run_lab(
        &["--smoke", "--out", dir.to_str().expect("utf-8 path")],
        Duration::from_secs(300),
    );
    assert!(out.success(), "ferry lab --smoke failed:\n{}", out.stderr);

    let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json");
    let document: serde_json::Value = serde_json::from_str(&text).expect("results.json parses");
    assert_eq!(document["schema"], 1);
    assert_eq!(document["suite"]["level"], "smoke");
    let runs = document["runs"].as_array().expect("results.json has runs");
    let results: Vec<&serde_json::Value> = runs.iter().filter_map(|r| r.get("results")).collect();
    let names: Vec<&str> = results
        .iter()
        .map(|r| r["experiment"].as_str().expect("experiment is a string"))
        .collect();
    for wanted in ["limits", "latency", "send-time", "idle"] {
        assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
    }
    // Every step of the smoke suite ran, or says why not. Footprint measures the minimal apps of
    // the min-size build, which the smoke suite does not build: on a fresh clone it fails and
    // says how to build them.
    for run in runs {
        let step = run["step"].as_str().expect("a step name");
        match run["status"].as_str() {
            Some("ok") => assert!(run.get("results").is_some(), "{step}: ok without results"),
            Some("left-out") => assert!(run["note"].is_string(), "{step}: no reason"),
            Some("failed") if step == "footprint" => {
                let note = run["note"].as_str().unwrap_or_default();
                assert!(
                    note.contains("cargo build --profile min-size -p ferry-min"),
                    "footprint failed without saying how to build its apps: {note}"
                );
            }
            other => panic!("{step}: {other:?}: {}", run["note"]),
        }
    }
    for r in &results {
        for key in ["ferry_version", "experiment", "machine", "config", "rows"] {
            assert!(r.get(key).is_some(), "{key} missing in {r}");
        }
        assert!(r["rows"].is_array());
        assert!(r["machine"]["cpus"].is_u64());
        let name = r["experiment"].as_str().unwrap_or_default();
        assert!(
            dir.join(format!("{name}.csv")).is_file(),
            "{name}.csv missing"
        );
        // Experiments that ran in the smoke suite have rows (footprint may lack its apps when
        // they were not built: it then says how to build them).
        if name != "footprint" {
            assert!(
                !r["rows"].as_array().unwrap().is_empty(),
                "{name} has no rows: {}",
                r["config"]
            );
        }
    }
    let latency_csv = std::fs::read_to_string(dir.join("latency.csv")).expect("latency.csv");
    let header = latency_csv.lines().next().unwrap_or_default();
    for col in ["transport", "size_bytes", "p50_ns", "p99_ns"] {
        assert!(
            header.contains(col),
            "latency.csv header {header:?} lacks {col}"
        );
    }

    let svgs = files_with(&dir, ".svg");
    for wanted in [
        "latency.svg",
        "send-time.svg",
        "idle.svg",
        "limits-memcpy.svg",
    ] {
        assert!(
            svgs.iter().any(|s| s == wanted),
            "{wanted} missing: {svgs:?}"
        );
    }
    for svg in &svgs {
        let body = std::fs::read_to_string(dir.join(svg)).expect("read svg");
        assert!(body.contains("<svg"), "{svg} is not an SVG");
        assert!(body.contains("<text"), "{svg} has no text (labels)");
    }
    let html = std::fs::read_to_string(dir.join("index.html")).expect("index.html");
    for svg in &svgs {
        assert!(
            html.contains(&format!("src=\"{svg}\"")),
            "index.html does not show {svg}"
        );
    }
    assert!(html.contains("Vortex Lite"));
    assert!(
        !html.contains("<script") && !html.contains("http://") && !html.contains("https://"),
        "index.html must be self-contained"
    );

    // The report again, from results.json alone: the same page and the same plots.
    let again = out_dir("again");
    report(&[&dir.join("results.json")], &again).check_success("ferry lab report");
    let rebuilt = std::fs::read_to_string(again.join("index.html")).expect("rebuilt index.html");
    assert!(
        rebuilt == html,
        "the rebuilt report differs from the suite's"
    );
    assert_eq!(files_with(&again, ".svg"), svgs);
    for svg in &svgs {
        assert_eq!(
            std::fs::read_to_string(again.join(svg)).unwrap(),
            std::fs::read_to_string(dir.join(svg)).unwrap(),
            "{svg} differs"
        );
    }

    // Two machines side by side (here the same results twice): a column each, files apart.
    let both = out_dir("both");
    report(&[&dir, &again.join("results.json")], &both)
        .check_success("ferry lab report with two inputs");
    let merged = std::fs::read_to_string(both.join("index.html")).expect("merged index.html");
    for file in [
        "latency-m1.svg",
        "latency-m2.svg",
        "results-m1.json",
        "results-m2.json",
    ] {
        assert!(
            both.join(file).is_file(),
            "{file} missing from the merged report"
        );
    }
    assert!(merged.contains("latency-m1.svg") && merged.contains("latency-m2.svg"));
    // The same machine twice: its columns are numbered, not both given one host name.
    assert!(
        merged.contains(" #1") && merged.contains(" #2"),
        "the two documents' columns are not told apart"
    );
    for d in [&dir, &again, &both] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn a_report_from_nothing_readable_is_refused() {
    let dir = out_dir("bad");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("results.json"), "[]").unwrap();
    let out = report(&[&dir], &dir.join("out"));
    assert!(!out.success());
    assert!(
        out.stderr.contains("before results documents had a schema"),
        "{}",
        out.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn suite_and_subcommand_do_not_mix() {
    let dir = out_dir("mix");
    let out = run_lab(
        &["--smoke", "--out", dir.to_str().unwrap(), "limits"],
        Duration::from_secs(60),
    );
    assert!(
        !out.success(),
        "suite flags with a subcommand should be refused"
    );
    assert!(!dir.join("results.json").exists());
}
