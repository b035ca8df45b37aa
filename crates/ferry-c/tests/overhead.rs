//! The C API's overhead: examples/c/pingpong.c (through libferry_c.so) against its Rust twin
//! (examples/pingpong.rs), a shared-memory ping-pong at 32 B and 1 MiB, in interleaved rounds.
//! A measurement, not a check: run it by name, in release, on a quiet machine.
//!
//! `cargo build --release -p ferry-c --example pingpong &&
//!  cargo test --release -p ferry-c --test overhead -- --ignored --nocapture`

use std::path::{Path, PathBuf};
use std::process::Command;

const ROUNDS: usize = 5;
/// (size, samples per run): about half a second per run.
const SIZES: [(usize, u64); 2] = [(32, 20_000), (1 << 20, 1_000)];

/// target/<profile>/deps: where this test runs from, and where cargo builds libferry_c.so.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.parent()
        .expect("the test runs from target/<profile>/deps")
        .to_path_buf()
}

/// The one-way p50 in nanoseconds that a pingpong run prints.
fn p50(program: &Path, size: usize, samples: u64) -> u64 {
    let out = Command::new(program)
        .args([size.to_string(), samples.to_string()])
        .env(
            "FERRY_DOMAIN",
            format!("fc-overhead-{}", std::process::id()),
        )
        .output()
        .expect("run a pingpong");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} failed: {text}{}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    text.split_whitespace()
        .find_map(|f| f.strip_prefix("p50_ns="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no p50 in {text:?}"))
}

fn median(v: Vec<f64>) -> f64 {
    ferry_cmd::stats::median(v).expect("at least one round")
}

#[test]
#[ignore = "a measurement: run by name, in release"]
fn c_api_overhead_against_rust() {
    let lib = lib_dir();
    let dir = lib.parent().expect("target/<profile>").to_path_buf();
    assert!(
        dir.ends_with("release"),
        "run in release: cargo test --release -p ferry-c --test overhead -- --ignored"
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let c = std::env::temp_dir().join(format!("ferry-pingpong-c-{}", std::process::id()));
    let status = Command::new("cc")
        .args(["-std=c11", "-O3", "-I"])
        .arg(root.join("crates/ferry-c/include"))
        .arg(root.join("examples/c/pingpong.c"))
        .arg("-L")
        .arg(&lib)
        .arg("-lferry_c")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lpthread", "-o"])
        .arg(&c)
        .status()
        .expect("cc (a C compiler on PATH)");
    assert!(status.success(), "cc failed on examples/c/pingpong.c");
    let rust = dir.join("examples/pingpong");
    assert!(
        rust.exists(),
        "{} is missing: cargo build --release -p ferry-c --example pingpong",
        rust.display()
    );

    println!("size | round | C p50 | Rust p50 | C / Rust");
    for (size, samples) in SIZES {
        let mut ratios = Vec::new();
        let (mut cs, mut rs) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            // Alternate which goes first, so that neither always follows the other.
            let (c_ns, r_ns) = if round % 2 == 0 {
                let c_ns = p50(&c, size, samples);
                (c_ns, p50(&rust, size, samples))
            } else {
                let r_ns = p50(&rust, size, samples);
                (p50(&c, size, samples), r_ns)
            };
            let ratio = c_ns as f64 / r_ns as f64;
            println!("{size} | {round} | {c_ns} ns | {r_ns} ns | {ratio:.3}");
            ratios.push(ratio);
            cs.push(c_ns as f64);
            rs.push(r_ns as f64);
        }
        let (lo, hi) = ratios
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), &r| (l.min(r), h.max(r)));
        println!(
            "{size} B: C p50 {:.0} ns, Rust p50 {:.0} ns (medians over rounds); C / Rust {:.2} \
             (rounds {lo:.2}–{hi:.2}); goal ≤ 1.10: {}",
            median(cs),
            median(rs),
            median(ratios.clone()),
            if median(ratios) <= 1.10 {
                "met"
            } else {
                "NOT met"
            }
        );
    }
}
