//! Other middleware as transports of the lab: the `ferry-peers` binary (crates/ferry-peers, a
//! cargo workspace of its own, so that ferry's builds never compile them), built on first use
//! and run for its share of each round.
//!
//! `ferry-peers SYSTEM --sizes .. --counts .. --warmups .. --pin MAIN,PEER|none` runs its own two
//! processes the way the lab runs ferry's (pinned the same way, every byte written into a loan
//! and checked in place) and prints `{"one_way_ns": [[..], ..]}`: the recorded one-way latencies
//! per size. `ferry-peers SYSTEM-throughput --size S --duration-ms D --delivery reliable|latest
//! --pin MAIN,PEER|none` publishes back to back for D ms to a subscriber in its other process
//! and prints the counts of [`PeerThroughput`]. The lab reads that output as untrusted: bounded
//! in size, every count checked.

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
    let root = workspace_root();
    let target_dir =
        std::env::var_os("CARGO_TARGET_DIR").or_else(|| std::env::var_os("CARGO_BUILD_TARGET_DIR"));
    let built = built_binary(&root, target_dir.map(PathBuf::from));
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
            "iceoryx2 and Zenoh, about eight minutes on 2 CPUs"
        } else {
            "iceoryx2, about a minute and a half on 2 CPUs"
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

/// Where cargo puts the release binary of crates/ferry-peers built from `root`: under the target
/// directory the environment names (relative to `root`, where the lab runs cargo), else the
/// crate's own `target`.
fn built_binary(root: &Path, target_dir: Option<PathBuf>) -> PathBuf {
    let dir = match target_dir {
        Some(dir) => root.join(dir),
        None => root.join("crates/ferry-peers/target"),
    };
    dir.join("release/ferry-peers")
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
    let recorded: usize = counts.iter().zip(warmups).map(|(c, w)| c - w).sum();
    // At most 21 characters a figure, and a little around them.
    let limit = (recorded as u64 + sizes.len() as u64) * 21 + 64;
    let total: usize = counts.iter().sum();
    let args = [
        system.to_owned(),
        "--sizes".to_owned(),
        list(sizes),
        "--counts".to_owned(),
        list(counts),
        "--warmups".to_owned(),
        list(warmups),
        "--pin".to_owned(),
        pin_text(pin),
    ];
    let timeout = Duration::from_secs(60) + PER_ROUND_TRIP * total as u32;
    let text = run_bounded(bin, system, &args, limit, timeout)?;
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

/// What `ferry-peers SYSTEM-throughput` reports: counts of messages, `*_ns` points in time on
/// this host's CLOCK_MONOTONIC (the publisher's first send, the subscriber's first and last
/// delivery), `send_ns` how long the publisher sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerThroughput {
    pub sent: u64,
    pub delivered: u64,
    pub bytes: u64,
    pub first_send_ns: u64,
    pub send_ns: u64,
    pub first_delivery_ns: u64,
    pub last_delivery_ns: u64,
    /// Messages whose number was not above the last one's.
    pub out_of_order: u64,
    /// Messages of which every byte was checked.
    pub checked: u64,
}

/// Runs `system` (e.g. "iceoryx2") publishing `size`-byte messages back to back for `duration`
/// to a subscriber in another process, with `delivery` ("reliable" or "latest").
pub fn throughput(
    bin: &Path,
    system: &str,
    size: usize,
    duration: Duration,
    delivery: &str,
    pin: Option<(usize, usize)>,
) -> Result<PeerThroughput> {
    let args = [
        format!("{system}-throughput"),
        "--size".to_owned(),
        size.to_string(),
        "--duration-ms".to_owned(),
        duration.as_millis().max(1).to_string(),
        "--delivery".to_owned(),
        delivery.to_owned(),
        "--pin".to_owned(),
        pin_text(pin),
    ];
    // Nine figures of at most 20 characters and their names.
    let limit = 1024;
    // The sending, the subscriber's drain (20 s at most) and the two sides' start and end.
    let timeout = duration + Duration::from_secs(60);
    let text = run_bounded(bin, system, &args, limit, timeout)?;
    let out: PeerThroughput =
        serde_json::from_slice(&text).context(format!("{system}'s output"))?;
    let fail = |what: &str| -> Result<PeerThroughput> {
        bail!("{system}'s throughput output does not add up: {what}")
    };
    if out.delivered > out.sent {
        return fail("more messages delivered than sent");
    }
    if out.bytes != out.delivered.saturating_mul(size as u64) {
        return fail("the bytes delivered are not the messages delivered × the size");
    }
    if out.checked > out.delivered + out.out_of_order {
        return fail("more messages checked than taken");
    }
    if out.delivered > 0
        && (out.first_delivery_ns > out.last_delivery_ns
            || out.last_delivery_ns < out.first_send_ns)
    {
        return fail("its times are out of order");
    }
    Ok(out)
}

fn pin_text(pin: Option<(usize, usize)>) -> String {
    pin.map_or("none".to_owned(), |(a, b)| format!("{a},{b}"))
}

/// Runs `bin` with `args` and returns its standard output: at most `limit` bytes, within
/// `timeout` (its process group killed after that, or on Ctrl-C); an error if it fails.
fn run_bounded(
    bin: &Path,
    system: &str,
    args: &[String],
    limit: u64,
    timeout: Duration,
) -> Result<Vec<u8>> {
    let mut child = crate::spawn_child(
        Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit()),
    )
    .context(format!("cannot run {}", bin.display()))?;
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let read = (&mut stdout).take(limit + 1).read_to_end(&mut text);
        read.map(|_| text)
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if signal::interrupted() || start.elapsed() > timeout {
            // Its process group: the binary and the other process it started.
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
        let hint = if real_time() {
            " (the lab runs under a real-time scheduling policy, such as chrt -f, and the other \
             system's threads that do not spin may starve beside those that do: run its rows \
             without it)"
        } else {
            ""
        };
        bail!("{system} failed ({status}); its error is above{hint}");
    }
    if text.len() as u64 > limit {
        bail!("{system}: more output than {limit} bytes");
    }
    Ok(text)
}

/// Whether this process runs under a real-time scheduling policy (SCHED_FIFO or SCHED_RR).
fn real_time() -> bool {
    // SAFETY: sched_getscheduler only reads the calling process's policy; 0 names it.
    let policy = unsafe { libc::sched_getscheduler(0) };
    policy == libc::SCHED_FIFO || policy == libc::SCHED_RR
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peers_binary_is_looked_for_where_cargo_puts_it() {
        let root = Path::new("/src/ferry");
        assert_eq!(
            built_binary(root, None),
            Path::new("/src/ferry/crates/ferry-peers/target/release/ferry-peers")
        );
        // CARGO_TARGET_DIR, relative (to the tree, where the lab runs cargo) or absolute.
        assert_eq!(
            built_binary(root, Some("out".into())),
            Path::new("/src/ferry/out/release/ferry-peers")
        );
        assert_eq!(
            built_binary(root, Some("/tmp/t".into())),
            Path::new("/tmp/t/release/ferry-peers")
        );
    }

    /// A stand-in for ferry-peers: a shell script that prints `output`. A child process writes
    /// it: were it written here, another test's fork (tests run on threads of this process)
    /// could inherit the open file, and running the script would fail with ETXTBSY ("Text file
    /// busy") until that child execs.
    fn fake(name: &str, output: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ferry-peers-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        let status = std::process::Command::new("sh")
            .args(["-c", r#"printf '%s' "$1" > "$0" && chmod 755 "$0""#])
            .arg(&path)
            .arg(format!("#!/bin/sh\nprintf '%s' '{output}'\n"))
            .status()
            .unwrap();
        assert!(status.success(), "writing {}", path.display());
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

    fn run_throughput(bin: &Path) -> Result<PeerThroughput> {
        throughput(
            bin,
            "iceoryx2",
            64,
            Duration::from_millis(10),
            "reliable",
            None,
        )
    }

    #[test]
    fn throughput_output_is_read_and_checked() {
        let good = r#"{"sent":10,"delivered":8,"bytes":512,"first_send_ns":100,"send_ns":50,"first_delivery_ns":120,"last_delivery_ns":200,"out_of_order":0,"checked":1}"#;
        let out = run_throughput(&fake("tp-good", good)).unwrap();
        assert_eq!((out.sent, out.delivered, out.bytes), (10, 8, 512));
        assert_eq!((out.first_send_ns, out.last_delivery_ns), (100, 200));
        for (name, out, says) in [
            (
                "tp-more",
                good.replace(r#""sent":10"#, r#""sent":7"#),
                "more messages delivered",
            ),
            ("tp-bytes", good.replace("512", "513"), "the size"),
            (
                "tp-checked",
                good.replace(r#""checked":1"#, r#""checked":9"#),
                "checked",
            ),
            (
                "tp-time",
                good.replace(r#""last_delivery_ns":200"#, r#""last_delivery_ns":110"#),
                "out of order",
            ),
            ("tp-foreign", good.replace("checked", "seen"), "output"),
            ("tp-long", "9".repeat(2000), "more output than"),
        ] {
            let err = run_throughput(&fake(name, &out)).unwrap_err().to_string();
            assert!(err.contains(says), "{name}: {err}");
        }
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
        assert_eq!(feature_of("zenoh-throughput"), Some("zenoh"));
        assert_eq!(feature_of("zenoh-rr"), Some("zenoh"));
        assert_eq!(feature_of("iceoryx2-rr"), None);
        assert!(
            !runs(&bin, "iceoryx2-rr") && !runs(&bin, "zenoh-rr"),
            "an older build without request/response is rebuilt"
        );
        assert!(
            !runs(&bin, "iceoryx2-throughput"),
            "an older build without throughput"
        );
    }
}
