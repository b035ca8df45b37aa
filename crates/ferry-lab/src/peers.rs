//! Other middleware as transports of the lab: the `ferry-peers` binary (crates/ferry-peers, a
//! cargo workspace of its own, so that ferry's builds never compile them), built on first use
//! and run for its share of each round.
//!
//! `ferry-peers SYSTEM --sizes .. --counts .. --warmups .. --pin MAIN,PEER|none` runs its own two
//! processes the way the lab runs ferry's (pinned the same way, every byte written into a loan
//! and checked in place) and prints `{"one_way_ns": [[..], ..]}`: the recorded one-way latencies
//! per size. The lab reads that output as untrusted: bounded in size, every count checked.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{kill_process_group, Pid, Signal};
use serde::Deserialize;

use crate::error::{bail, Context, Result};
use crate::footprint::{cargo_build, workspace_root};
use crate::signal;

/// The command that builds the binary, from the source tree's root (iceoryx2 only).
pub const BUILD_COMMAND: &str =
    "cargo build --release --locked --manifest-path crates/ferry-peers/Cargo.toml";

/// The cargo feature a system needs, if any (Zenoh is a longer build, made only when asked for).
fn feature_of(system: &str) -> Option<&'static str> {
    system.starts_with("zenoh").then_some("zenoh")
}

/// The longest one run may take, per recorded or warm-up round trip, on top of a minute.
const PER_ROUND_TRIP: Duration = Duration::from_millis(2);

/// The binary that runs `system`: `FERRY_PEERS_BIN`, else the one built in the source tree; built
/// there first (with the feature the system needs) if it is missing or does not run the system,
/// and the tree and cargo are there. An error naming the build command otherwise.
pub fn binary(system: &str) -> Result<PathBuf> {
    if let Ok(bin) = std::env::var("FERRY_PEERS_BIN") {
        let bin = PathBuf::from(bin);
        if bin.is_file() {
            return Ok(bin);
        }
        bail!(
            "FERRY_PEERS_BIN names {}, which is not a file",
            bin.display()
        );
    }
    let built = workspace_root().join("crates/ferry-peers/target/release/ferry-peers");
    if built.is_file() && runs(&built, system) {
        return Ok(built);
    }
    let mut args = vec![
        "build",
        "--release",
        "--locked",
        "--manifest-path",
        "crates/ferry-peers/Cargo.toml",
    ];
    let command = match feature_of(system) {
        Some(feature) => {
            args.extend(["--features", feature]);
            format!("{BUILD_COMMAND} --features {feature}")
        }
        None => BUILD_COMMAND.to_owned(),
    };
    let what = format!(
        "ferry lab: building the other systems' transports once ({}): {command}",
        if feature_of(system).is_some() {
            "iceoryx2 and Zenoh, a few minutes"
        } else {
            "iceoryx2, about a minute"
        }
    );
    if cargo_build("crates/ferry-peers/Cargo.toml", &args, &what)? && built.is_file() {
        return Ok(built);
    }
    bail!(
        "the other systems' transports are not built; from ferry's source tree: {command} (or \
         set FERRY_PEERS_BIN)"
    )
}

/// Whether `bin` runs `system` (`ferry-peers systems` lists what a build runs); its output is
/// read as untrusted: at most 4 KiB, within 10 s.
fn runs(bin: &Path, system: &str) -> bool {
    let Ok(mut child) = Command::new(bin)
        .arg("systems")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    else {
        return false;
    };
    let out = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        if let Some(out) = out {
            // Dropped after 4 KiB: a child that writes on gets EPIPE.
            let _ = out.take(4096).read_to_end(&mut text);
        }
        text
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let success = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.success(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break false;
            }
        }
    };
    let text = reader.join().unwrap_or_default();
    success
        && text.len() < 4096
        && String::from_utf8_lossy(&text)
            .split_whitespace()
            .any(|s| s == system)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Output {
    one_way_ns: Vec<Vec<u64>>,
}

/// Runs `system` (e.g. "iceoryx2") for `counts[i]` round trips of `sizes[i]` bytes, the first
/// `warmups[i]` unrecorded; returns the recorded one-way latencies (ns) per size.
pub fn latency(
    bin: &Path,
    system: &str,
    sizes: &[usize],
    counts: &[usize],
    warmups: &[usize],
    pin: Option<(usize, usize)>,
) -> Result<Vec<Vec<u64>>> {
    let list = |v: &[usize]| {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let pin = pin.map_or("none".to_owned(), |(a, b)| format!("{a},{b}"));
    let mut child = crate::spawn_child(
        Command::new(bin)
            .arg(system)
            .args(["--sizes", &list(sizes)])
            .args(["--counts", &list(counts)])
            .args(["--warmups", &list(warmups)])
            .args(["--pin", &pin])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit()),
    )
    .context(format!("cannot run {}", bin.display()))?;
    let recorded: usize = counts.iter().zip(warmups).map(|(c, w)| c - w).sum();
    // At most 21 characters a figure, and a little around them.
    let limit = (recorded as u64 + sizes.len() as u64) * 21 + 64;
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let read = (&mut stdout).take(limit + 1).read_to_end(&mut text);
        read.map(|_| text)
    });
    let total: usize = counts.iter().sum();
    let timeout = Duration::from_secs(60) + PER_ROUND_TRIP * total as u32;
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if signal::interrupted() || start.elapsed() > timeout {
            // Its process group: the binary and the echo process it started.
            let _ = kill_process_group(Pid::from_child(&child), Signal::KILL);
            let _ = child.wait();
            signal::check()?;
            bail!("{system} did not finish within {} s", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let text = reader
        .join()
        .map_err(|_| crate::error::Error::msg("the reader of ferry-peers' output panicked"))??;
    if !status.success() {
        bail!("{system} failed ({status}); its error is above");
    }
    if text.len() as u64 > limit {
        bail!("{system}: more output than {limit} bytes");
    }
    let out: Output = serde_json::from_slice(&text).context(format!("{system}'s output"))?;
    if out.one_way_ns.len() != sizes.len() {
        bail!(
            "{system} gave {} sizes, not {}",
            out.one_way_ns.len(),
            sizes.len()
        );
    }
    for (i, row) in out.one_way_ns.iter().enumerate() {
        if row.len() != counts[i] - warmups[i] {
            bail!(
                "{system} gave {} samples at {} bytes, not {}",
                row.len(),
                sizes[i],
                counts[i] - warmups[i]
            );
        }
    }
    Ok(out.one_way_ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A stand-in for ferry-peers: a shell script that prints `output`.
    fn fake(name: &str, output: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ferry-peers-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\nprintf '%s' '{output}'\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn run(bin: &Path) -> Result<Vec<Vec<u64>>> {
        latency(bin, "iceoryx2", &[32, 1024], &[5, 6], &[3, 3], None)
    }

    #[test]
    fn its_output_is_read_per_size() {
        let bin = fake("good", r#"{"one_way_ns":[[1,2],[3,4,5]]}"#);
        assert_eq!(run(&bin).unwrap(), vec![vec![1, 2], vec![3, 4, 5]]);
    }

    #[test]
    fn output_that_does_not_match_the_request_is_an_error() {
        for (name, out, says) in [
            (
                "fewer",
                r#"{"one_way_ns":[[1,2],[3,4]]}"#,
                "2 samples at 1024 bytes, not 3",
            ),
            ("sizes", r#"{"one_way_ns":[[1,2]]}"#, "1 sizes, not 2"),
            ("foreign", r#"{"rows":[]}"#, "output"),
            ("negative", r#"{"one_way_ns":[[-1,2],[3,4,5]]}"#, "output"),
        ] {
            let err = run(&fake(name, out)).unwrap_err().to_string();
            assert!(err.contains(says), "{name}: {err}");
        }
    }

    #[test]
    fn output_beyond_what_the_request_can_make_is_refused_unread() {
        // 5 recorded figures of at most 21 characters: 10 kB is far more.
        let bin = fake("long", &"9".repeat(10_000));
        let err = run(&bin).unwrap_err().to_string();
        assert!(err.contains("more output than"), "{err}");
    }

    #[test]
    fn a_build_runs_the_systems_it_lists_and_nothing_else() {
        let bin = fake("systems", "iceoryx2 zenoh\n");
        assert!(runs(&bin, "iceoryx2"));
        assert!(runs(&bin, "zenoh"));
        assert!(!runs(&bin, "zenoh-shm"), "a prefix is not a system");
        // An older build that does not know the command, or output past the bound: not trusted.
        assert!(!runs(&fake("old", ""), "iceoryx2"));
        let long = format!("{} zenoh", "x".repeat(5000));
        assert!(!runs(&fake("long-systems", &long), "zenoh"));
        assert_eq!(feature_of("zenoh-shm"), Some("zenoh"));
        assert_eq!(feature_of("iceoryx2"), None);
    }
}
