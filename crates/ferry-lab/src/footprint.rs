//! `ferry lab footprint` (the footprint test of the Vortex Lite performance whitepaper, ADLINK):
//! the size and memory of a minimal ferry publisher and subscriber. The two apps are real binaries
//! built from the `ferry-min` crate with the `min-size` profile
//! (`cargo build --profile min-size -p ferry-min`); this experiment finds them, runs a pair per
//! transport for a few seconds and reads:
//!
//! - the binary's file size (stripped by the profile);
//! - private resident memory: `Private_Clean + Private_Dirty` of `/proc/PID/smaps_rollup`, the
//!   memory this process alone holds; the shared ring pages apart (`RssShmem` of
//!   `/proc/PID/status`), and `VmRSS` as the study reported it (it counts shared libc pages too);
//! - the thread count (`Threads` of `/proc/PID/status`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use rustix::process::{kill_process_group, Pid, Signal};
use serde::Serialize;

use super::{Machine, Results};
use crate::error::{bail, note, Context, Result};
use crate::signal;
use crate::table::{print_out, Table};

/// Vortex Lite's figures (x86, static library): publisher image 531 320 bytes, subscriber VmRSS
/// 1520 KB, 7 threads.
pub const VORTEX_BINARY_BYTES: u64 = 531_320;
pub const VORTEX_VMRSS_KB: u64 = 1520;
pub const VORTEX_THREADS: u64 = 7;

/// The goals of the minimal shared-memory publisher.
pub const GOAL_BINARY_BYTES: u64 = 531 * 1024;
pub const GOAL_RSS_PRIVATE_KB: u64 = 1536;
pub const GOAL_THREADS: u64 = 2;

/// The command that builds the apps.
pub const BUILD_COMMAND: &str = "cargo build --profile min-size -p ferry-min";

#[derive(Debug, Args)]
pub struct FootprintArgs {
    /// Transports to run the pair on, comma-separated: shm, udp
    #[arg(
        long = "transport",
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "shm,udp"
    )]
    pub transports: Vec<String>,

    /// Seconds each pair runs (memory is read near the end)
    #[arg(long, value_name = "S", default_value_t = 2.0)]
    pub seconds: f64,

    /// Where min-pub and min-sub are [default: the min-size profile's directory, target/min-size]
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,

    /// Build the apps with cargo first if they are missing (when run from the source tree)
    #[arg(long)]
    pub build: bool,

    /// Write the results as JSON to PATH
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Serialize, Clone)]
pub struct Row {
    pub app: &'static str,
    pub transport: String,
    pub binary_bytes: u64,
    pub rss_private_kb: u64,
    pub rss_shmem_kb: u64,
    pub threads: u64,
    /// VmRSS as Vortex Lite's study read it (shared library pages included).
    pub vm_rss_kb: u64,
    /// Shared_Clean + Shared_Dirty of smaps_rollup (libc, the binary's own pages when another
    /// process maps them too, the ring).
    pub rss_shared_kb: u64,
    /// Messages the subscriber received in the run (publisher rows: messages it sent, estimated
    /// from the run time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received: Option<u64>,
}

#[derive(Debug, Serialize)]
struct Config {
    seconds: f64,
    bin_dir: String,
    profile: &'static str,
    build_command: &'static str,
    message: &'static str,
    measured: &'static str,
    vortex_lite: Vortex,
    goals: Goals,
    verdict: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Vortex {
    publisher_binary_bytes: u64,
    subscriber_vm_rss_kb: u64,
    threads: u64,
    source: String,
}

#[derive(Debug, Serialize)]
struct Goals {
    binary_bytes: u64,
    rss_private_kb: u64,
    threads: u64,
    applies_to: &'static str,
}

/// Finds the directory holding `min-pub` and `min-sub`.
pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
    let has = |d: &Path| d.join("min-pub").is_file() && d.join("min-sub").is_file();
    if let Some(d) = explicit {
        return has(d).then(|| d.to_owned());
    }
    let mut candidates = Vec::new();
    if let Ok(d) = std::env::var("FERRY_MIN_DIR") {
        candidates.push(PathBuf::from(d));
    }
    // Only the min-size profile's own directory: a `min-pub` beside the ferry executable (say in
    // target/release after `cargo build --release`) is another build, and would be reported as
    // this one.
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            // target/release/ferry (or target/debug/deps/...) -> target/min-size
            for up in dir.ancestors().take(3) {
                candidates.push(up.join("min-size"));
            }
        }
    }
    candidates.push(PathBuf::from("target/min-size"));
    candidates.push(workspace_root().join("target/min-size"));
    candidates.into_iter().find(|d| has(d))
}

/// The source tree this executable was built from.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the apps with cargo (in the source tree this executable came from), if cargo and the
/// tree are there. Returns whether it succeeded; an error if Ctrl-C or SIGTERM stopped it.
pub fn try_build() -> Result<bool> {
    let root = workspace_root();
    if !root.join("crates/ferry-min/Cargo.toml").is_file() {
        return Ok(false);
    }
    note!("ferry lab footprint: building the minimal apps: {BUILD_COMMAND}");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    // A process group of its own, which an interruption kills: cargo and the compilers it runs.
    let Ok(mut child) = super::spawn_child(
        Command::new(cargo)
            .args(["build", "--profile", "min-size", "-p", "ferry-min"])
            .current_dir(&root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit()),
    ) else {
        return Ok(false);
    };
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status.success());
        }
        if signal::interrupted() {
            let _ = kill_process_group(Pid::from_child(&child), Signal::KILL);
            let _ = child.wait();
            signal::check()?;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A child killed when dropped.
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn run(args: FootprintArgs) -> Result<()> {
    if !(args.seconds >= 0.3 && args.seconds <= 600.0) {
        bail!("--seconds must be between 0.3 and 600");
    }
    for t in &args.transports {
        if t != "shm" && t != "udp" {
            bail!("--transport: unknown transport {t:?}: use shm, udp");
        }
    }
    let mut dir = locate(args.bin_dir.as_deref());
    if dir.is_none() && args.build && try_build()? {
        dir = locate(args.bin_dir.as_deref());
    }
    let Some(dir) = dir else {
        bail!(
            "the minimal apps min-pub and min-sub were not found (in target/min-size, \
             FERRY_MIN_DIR or --bin-dir); build them first: {BUILD_COMMAND}"
        );
    };
    let mut rows = Vec::new();
    for transport in &args.transports {
        rows.extend(measure_pair(&dir, transport, args.seconds)?);
    }

    let mut table = Table::new(&[
        "app",
        "transport",
        "binary",
        "private RSS",
        "ring (RssShmem)",
        "VmRSS",
        "threads",
    ]);
    for r in &rows {
        table.row(vec![
            r.app.to_owned(),
            r.transport.clone(),
            format!("{} KB", r.binary_bytes.div_ceil(1024)),
            format!("{} KB", r.rss_private_kb),
            format!("{} KB", r.rss_shmem_kb),
            format!("{} KB", r.vm_rss_kb),
            r.threads.to_string(),
        ]);
    }
    print_out(&table.render())?;
    let verdict = verdict(&rows);
    for v in &verdict {
        println!("{v}");
    }

    if let Some(path) = &args.json {
        let config = Config {
            seconds: args.seconds,
            bin_dir: dir.display().to_string(),
            profile: "min-size (opt-level s, lto fat, panic abort, strip), ferry without its domain-key feature (no cipher linked)",
            build_command: BUILD_COMMAND,
            message: "min-pub sends a 64-byte message every 10 ms; min-sub receives (WaitStrategy::Block)",
            measured: "binary_bytes: file size; rss_private_kb: Private_Clean + Private_Dirty of /proc/PID/smaps_rollup; rss_shmem_kb: RssShmem of /proc/PID/status (the ring pages); vm_rss_kb: VmRSS; threads: Threads; read near the end of the run, the largest of several readings",
            vortex_lite: Vortex {
                publisher_binary_bytes: VORTEX_BINARY_BYTES,
                subscriber_vm_rss_kb: VORTEX_VMRSS_KB,
                threads: VORTEX_THREADS,
                source: format!(
                    "{}, x86, static library: Tables 1 and 3, and the thread count",
                    crate::studies::cite(&crate::studies::VORTEX_LITE)
                ),
            },
            goals: Goals {
                binary_bytes: GOAL_BINARY_BYTES,
                rss_private_kb: GOAL_RSS_PRIVATE_KB,
                threads: GOAL_THREADS,
                applies_to: "min-pub over shm",
            },
            verdict,
        };
        Results::new("footprint", Machine::probe(), config, rows).write_json(path)?;
        note!("wrote {}", path.display());
    }
    Ok(())
}

/// One line per goal for the shared-memory publisher.
fn verdict(rows: &[Row]) -> Vec<String> {
    let Some(p) = rows
        .iter()
        .find(|r| r.app == "min-pub" && r.transport == "shm")
    else {
        return Vec::new();
    };
    let mark = |ok: bool| if ok { "met" } else { "MISSED" };
    vec![
        format!(
            "binary {} KB (goal <= {} KB): {}",
            p.binary_bytes.div_ceil(1024),
            GOAL_BINARY_BYTES / 1024,
            mark(p.binary_bytes <= GOAL_BINARY_BYTES)
        ),
        format!(
            "private RSS {} KB (goal <= {} KB): {}",
            p.rss_private_kb,
            GOAL_RSS_PRIVATE_KB,
            mark(p.rss_private_kb <= GOAL_RSS_PRIVATE_KB)
        ),
        format!(
            "threads {} (goal <= {}): {}",
            p.threads,
            GOAL_THREADS,
            mark(p.threads <= GOAL_THREADS)
        ),
    ]
}

fn measure_pair(dir: &Path, transport: &str, seconds: f64) -> Result<Vec<Row>> {
    let domain = format!("labfp{}{}", std::process::id(), transport);
    let outcome = run_pair(dir, transport, seconds, &domain);
    // The apps are gone (reaped, or killed and reaped): remove what they left, also after an
    // interruption or a failure.
    let _ = ferry::admin::clean(Some(&domain));
    let (peak, received) = outcome?;
    if received.unwrap_or(0) == 0 {
        bail!("min-sub over {transport} received no message");
    }
    let mut rows = Vec::new();
    for (i, app) in ["min-pub", "min-sub"].into_iter().enumerate() {
        let Some(r) = peak[i] else {
            bail!("could not read the memory of {app} over {transport}");
        };
        let binary_bytes = std::fs::metadata(dir.join(app))
            .context(format!("size of {app}"))?
            .len();
        rows.push(Row {
            app,
            transport: transport.to_owned(),
            binary_bytes,
            rss_private_kb: r.private_kb,
            rss_shmem_kb: r.shmem_kb,
            threads: r.threads,
            vm_rss_kb: r.vm_rss_kb,
            rss_shared_kb: r.shared_kb,
            received: (i == 1).then_some(received.unwrap_or(0)),
        });
    }
    Ok(rows)
}

/// Runs min-sub and min-pub in `domain`; the peak readings of each (publisher first) and what
/// min-sub says it received.
fn run_pair(
    dir: &Path,
    transport: &str,
    seconds: f64,
    domain: &str,
) -> Result<([Option<Reading>; 2], Option<u64>)> {
    let spawn = |app: &str, run_for: f64| -> Result<Kid> {
        let mut cmd = Command::new(dir.join(app));
        cmd.args(["--domain", domain, "--seconds", &format!("{run_for}")]);
        if transport == "udp" {
            cmd.arg("--udp");
        }
        let child = super::spawn_child(
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit()),
        )
        .context(format!("cannot start {}", dir.join(app).display()))?;
        Ok(Kid(child))
    };
    // The subscriber first, so that it sees every message; it runs a little longer.
    let mut sub = spawn("min-sub", seconds + 0.5)?;
    signal::sleep(Duration::from_millis(100))?;
    let mut publ = spawn("min-pub", seconds)?;
    let start = Instant::now();
    let mut peak: [Option<Reading>; 2] = [None, None];
    // Readings over the second half of the run; the largest of each figure is kept.
    signal::sleep(Duration::from_secs_f64(seconds / 2.0))?;
    while start.elapsed().as_secs_f64() < seconds * 0.9 {
        for (i, kid) in [&publ, &sub].into_iter().enumerate() {
            if let Some(r) = Reading::of(kid.0.id()) {
                peak[i] = Some(match peak[i].take() {
                    Some(old) => old.max(&r),
                    None => r,
                });
            }
        }
        signal::sleep(Duration::from_millis(100))?;
    }
    let wait = |kid: &mut Kid, what: &str| -> Result<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            signal::check()?;
            if let Some(status) = kid.0.try_wait()? {
                if !status.success() {
                    bail!("{what} over {transport} failed ({status})");
                }
                let mut out = String::new();
                if let Some(mut s) = kid.0.stdout.take() {
                    use std::io::Read;
                    let _ = s.read_to_string(&mut out);
                }
                return Ok(out);
            }
            if Instant::now() > deadline {
                bail!("{what} over {transport} did not exit in time");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait(&mut publ, "min-pub")?;
    let out = wait(&mut sub, "min-sub")?;
    let received = out
        .split_whitespace()
        .last()
        .and_then(|n| n.parse::<u64>().ok());
    Ok((peak, received))
}

#[derive(Debug, Clone, Copy)]
struct Reading {
    private_kb: u64,
    shared_kb: u64,
    shmem_kb: u64,
    vm_rss_kb: u64,
    threads: u64,
}

impl Reading {
    fn of(pid: u32) -> Option<Reading> {
        let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let kb = |text: &str, key: &str| -> u64 {
            text.lines()
                .find_map(|l| {
                    let rest = l.strip_prefix(key)?.strip_prefix(':')?;
                    rest.split_whitespace().next()?.parse().ok()
                })
                .unwrap_or(0)
        };
        Some(Reading {
            private_kb: kb(&rollup, "Private_Clean") + kb(&rollup, "Private_Dirty"),
            shared_kb: kb(&rollup, "Shared_Clean") + kb(&rollup, "Shared_Dirty"),
            shmem_kb: kb(&status, "RssShmem"),
            vm_rss_kb: kb(&status, "VmRSS"),
            threads: kb(&status, "Threads"),
        })
    }

    fn max(&self, o: &Reading) -> Reading {
        Reading {
            private_kb: self.private_kb.max(o.private_kb),
            shared_kb: self.shared_kb.max(o.shared_kb),
            shmem_kb: self.shmem_kb.max(o.shmem_kb),
            vm_rss_kb: self.vm_rss_kb.max(o.vm_rss_kb),
            threads: self.threads.max(o.threads),
        }
    }
}
