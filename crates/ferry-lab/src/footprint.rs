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

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{kill_process_group, Pid, Signal};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::chart::{bar_svg, color, Bars, Plot, Section, SummaryLine, GREY};
use crate::error::{bail, note, Context, Result};
use crate::experiment::{head, Experiment, Measured, Results};
use crate::signal;
use crate::studies::{cite, VORTEX_LITE};
use crate::subject::{Subject, Subjects};
use crate::table::Table;

/// Vortex Lite's figures (x86, static library): publisher image 531 320 bytes, subscriber VmRSS
/// 1520 KB, 7 threads.
pub const VORTEX_BINARY_BYTES: u64 = 531_320;
pub const VORTEX_VMRSS_KB: u64 = 1520;
pub const VORTEX_THREADS: u64 = 7;

/// The goals of the minimal shared-memory publisher. The binary's is Vortex Lite's own publisher
/// image, byte for byte (531 320 B: "531 KB" in the whitepaper's decimal kilobytes).
pub const GOAL_BINARY_BYTES: u64 = VORTEX_BINARY_BYTES;
pub const GOAL_RSS_PRIVATE_KB: u64 = 1536;
pub const GOAL_THREADS: u64 = 2;

/// The command that builds the apps.
pub const BUILD_COMMAND: &str = "cargo build --profile min-size -p ferry-min";

/// What this experiment measures, in the order its help lists them.
pub const SUBJECTS: Subjects = Subjects(&[Subject::Shm, Subject::Udp4]);

crate::choice! {
    /// The two minimal apps.
    pub enum App: "app" {
        MinPub = "min-pub",
        MinSub = "min-sub",
    }
}

/// What `ferry lab footprint` is asked to measure.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Transports to run the pair on, in turn.
    pub transports: Vec<Subject>,
    /// Seconds each pair runs (memory is read near the end).
    pub seconds: f64,
    /// Where min-pub and min-sub are; `None`: the min-size profile's directory.
    pub bin_dir: Option<PathBuf>,
    /// Build the apps with cargo first if they are missing (when run from the source tree).
    pub build: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            transports: vec![Subject::Shm, Subject::Udp4],
            seconds: 2.0,
            bin_dir: None,
            build: false,
        }
    }
}

/// One app over one transport.
#[derive(Debug, Serialize, Deserialize, JsonSchema, Clone)]
pub struct Row {
    pub app: App,
    pub transport: Subject,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<u64>,
}

impl Row {
    fn of(
        app: App,
        transport: Subject,
        binary_bytes: u64,
        r: &Reading,
        received: Option<u64>,
    ) -> Row {
        Row {
            app,
            transport,
            binary_bytes,
            rss_private_kb: r.private_kb,
            rss_shmem_kb: r.shmem_kb,
            threads: r.threads,
            vm_rss_kb: r.vm_rss_kb,
            rss_shared_kb: r.shared_kb,
            received,
        }
    }
}

/// How a footprint run was made.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Setup {
    seconds: f64,
    bin_dir: String,
    profile: String,
    build_command: String,
    message: String,
    measured: String,
    vortex_lite: Vortex,
    goals: Goals,
    verdict: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Vortex {
    publisher_binary_bytes: u64,
    subscriber_vm_rss_kb: u64,
    threads: u64,
    source: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Goals {
    binary_bytes: u64,
    rss_private_kb: u64,
    threads: u64,
    applies_to: String,
}

/// The experiment (see the module's documentation).
pub struct Footprint;

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
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the apps with cargo (in the source tree this executable came from), if cargo and the
/// tree are there. Returns whether it succeeded; an error if Ctrl-C or SIGTERM stopped it.
pub fn try_build() -> Result<bool> {
    cargo_build(
        "crates/ferry-min/Cargo.toml",
        &["build", "--profile", "min-size", "-p", "ferry-min"],
        &format!("ferry lab footprint: building the minimal apps: {BUILD_COMMAND}"),
    )
}

/// Runs `cargo ARGS` in the source tree this executable came from, if cargo and `needs` (a file
/// of the tree) are there, saying `what` first. Returns whether it succeeded; an error if Ctrl-C
/// or SIGTERM stopped it (cargo and the compilers it runs are killed then).
pub(crate) fn cargo_build(needs: &str, args: &[&str], what: &str) -> Result<bool> {
    let root = workspace_root();
    if !root.join(needs).is_file() {
        return Ok(false);
    }
    note!("{what}");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    // A process group of its own, which an interruption kills: cargo and the compilers it runs.
    let Ok(mut child) = super::spawn_child(
        Command::new(cargo)
            .args(args)
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

impl Experiment for Footprint {
    head!("footprint", "Footprint of a minimal publisher and subscriber", no peer);

    fn validate(args: &Config) -> Result<()> {
        SUBJECTS.check("--transport", &args.transports)?;
        if !(args.seconds >= 0.3 && args.seconds <= 600.0) {
            bail!("--seconds must be between 0.3 and 600");
        }
        if args.transports.is_empty() {
            bail!("--transport: give at least one");
        }
        Ok(())
    }

    fn run(args: &Config) -> Result<Measured<Self>> {
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
        for &transport in &args.transports {
            rows.extend(measure_pair(&dir, transport, args.seconds)?);
        }
        let setup = Setup {
        seconds: args.seconds,
        bin_dir: dir.display().to_string(),
        profile: "min-size (opt-level s, lto fat, panic abort, strip), ferry without its domain-key feature (no cipher linked)".to_owned(),
        build_command: BUILD_COMMAND.to_owned(),
        message: "min-pub sends a 64-byte message every 10 ms; min-sub receives (WaitStrategy::Block)".to_owned(),
        measured: "binary_bytes: file size; rss_private_kb: Private_Clean + Private_Dirty of /proc/PID/smaps_rollup; rss_shmem_kb: RssShmem of /proc/PID/status (the ring pages); vm_rss_kb: VmRSS; threads: Threads; read near the end of the run, the largest of several readings".to_owned(),
        vortex_lite: Vortex {
            publisher_binary_bytes: VORTEX_BINARY_BYTES,
            subscriber_vm_rss_kb: VORTEX_VMRSS_KB,
            threads: VORTEX_THREADS,
            source: format!(
                "{}, x86, static library: Tables 1 and 3, and the thread count",
                cite(&VORTEX_LITE)
            ),
        },
        goals: Goals {
            binary_bytes: GOAL_BINARY_BYTES,
            rss_private_kb: GOAL_RSS_PRIVATE_KB,
            threads: GOAL_THREADS,
            applies_to: "min-pub over shm".to_owned(),
        },
        verdict: verdict(&rows),
    };
        Ok(Measured { setup, rows })
    }

    /// The table, then the verdict on the goals.
    fn table(results: &Results<Self>) -> String {
        let rows: &[Row] = &results.rows;
        let mut table = Table::new(&[
            "app",
            "transport",
            "binary",
            "private RSS",
            "ring (RssShmem)",
            "VmRSS",
            "threads",
        ]);
        for r in rows {
            table.row(vec![
                r.app.name().to_owned(),
                r.transport.name().to_owned(),
                format!("{} KB", r.binary_bytes.div_ceil(1024)),
                format!("{} KB", r.rss_private_kb),
                format!("{} KB", r.rss_shmem_kb),
                format!("{} KB", r.vm_rss_kb),
                r.threads.to_string(),
            ]);
        }
        let mut out = table.render();
        for v in verdict(rows) {
            let _ = writeln!(out, "{v}");
        }
        out
    }

    fn section(results: &Results<Self>) -> Result<Section> {
        let rs: &[Row] = &results.rows;
        let cats: Vec<String> = rs
            .iter()
            .map(|r| {
                format!(
                    "{} {}",
                    r.app.name().trim_start_matches("min-"),
                    r.transport.name()
                )
            })
            .chain(std::iter::once("Vortex Lite".to_owned()))
            .collect();
        let col = |f: fn(&Row) -> u64, div: f64| -> Vec<Option<f64>> {
            rs.iter()
                .map(|r| Some(f(r) as f64 / div))
                .chain(std::iter::once(None))
                .collect()
        };
        let vortex = |x: f64| -> Vec<Option<f64>> {
            rs.iter()
                .map(|_| None)
                .chain(std::iter::once(Some(x)))
                .collect()
        };
        let panels = [
            Bars {
                title: "Stripped binary",
                y_desc: "size (KB)",
                categories: cats.clone(),
                series: vec![
                    ("ferry".into(), color(0), col(|r| r.binary_bytes, 1024.0)),
                    (
                        "Vortex Lite".into(),
                        GREY,
                        vortex(VORTEX_BINARY_BYTES as f64 / 1024.0),
                    ),
                ],
                reference: Some((
                    format!(
                        "goal: Vortex Lite, {:.0} KB",
                        GOAL_BINARY_BYTES as f64 / 1024.0
                    ),
                    GOAL_BINARY_BYTES as f64 / 1024.0,
                )),
                log_y: false,
            },
            Bars {
                title: "Resident memory",
                y_desc: "KB",
                categories: cats.clone(),
                series: vec![
                    (
                        "private RSS".into(),
                        color(0),
                        col(|r| r.rss_private_kb, 1.0),
                    ),
                    ("VmRSS".into(), color(1), col(|r| r.vm_rss_kb, 1.0)),
                    (
                        "ring (RssShmem)".into(),
                        color(2),
                        col(|r| r.rss_shmem_kb, 1.0),
                    ),
                    (
                        "Vortex Lite VmRSS".into(),
                        GREY,
                        vortex(VORTEX_VMRSS_KB as f64),
                    ),
                ],
                reference: Some(("goal 1.5 MB private".into(), 1536.0)),
                log_y: false,
            },
            Bars {
                title: "Threads",
                y_desc: "threads",
                categories: cats.clone(),
                series: vec![
                    ("ferry".into(), color(0), col(|r| r.threads, 1.0)),
                    ("Vortex Lite".into(), GREY, vortex(VORTEX_THREADS as f64)),
                ],
                reference: Some(("goal 2 threads".into(), 2.0)),
                log_y: false,
            },
        ];
        let svg = bar_svg(&panels, 1500)?;
        let describe = |app: App, t: Subject| -> Option<String> {
            let r = rs.iter().find(|r| r.app == app && r.transport == t)?;
            Some(format!(
            "ferry {} over {}: {:.0} KB / {:.0} KB private RSS (VmRSS {:.0} KB, ring {:.0} KB) / {:.0} thread(s)",
            app.name(),
            t.name(),
            r.binary_bytes as f64 / 1024.0,
            r.rss_private_kb,
            r.vm_rss_kb,
            r.rss_shmem_kb,
            r.threads
        ))
        };
        let ours: Vec<String> = [
            (App::MinPub, Subject::Shm),
            (App::MinSub, Subject::Shm),
            (App::MinPub, Subject::Udp4),
            (App::MinSub, Subject::Udp4),
        ]
        .iter()
        .filter_map(|&(a, t)| describe(a, t))
        .collect();
        Ok(Section {
        plots: vec![Plot {
            file: "footprint.svg".to_owned(),
            svg,
            caption: "min-pub sends 64 bytes every 10 ms, min-sub receives; built with the min-size profile. Private RSS = Private_Clean + Private_Dirty (smaps_rollup); VmRSS also counts shared libc pages; the ring is shared memory, shown apart. Grey: Vortex Lite (x86, static library).".to_owned(),
        }],
        sentence: format!(
            "Vortex Lite in {} (x86, static library): 531 KB publisher image / 1.5 MB VmRSS / 7 threads. {}.",
            cite(&VORTEX_LITE),
            ours.join("; ")
        ),
    })
    }

    /// The study's three figures (x86, static library) beside ferry's: the publisher's image, the
    /// subscriber's VmRSS, the threads of each app.
    fn summary(results: &Results<Self>) -> Vec<SummaryLine> {
        let rs: &[Row] = &results.rows;
        let find = |app: App, t: Subject| rs.iter().find(|r| r.app == app && r.transport == t);
        let transports: Vec<Subject> = [Subject::Shm, Subject::Udp4]
            .into_iter()
            .filter(|&t| rs.iter().any(|r| r.transport == t))
            .collect();
        let per_transport = |app: App, f: &dyn Fn(&Row) -> String| -> String {
            transports
                .iter()
                .filter_map(|&t| Some(format!("{} {}", t.name(), f(find(app, t)?))))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut lines = Vec::new();
        // The same binary whatever the transport.
        if let Some(p) = rs.iter().find(|r| r.app == App::MinPub) {
            lines.push(SummaryLine {
                what: "publisher binary (stripped)".to_owned(),
                ferry: format!("{} bytes (min-pub)", p.binary_bytes),
                floor: None,
                best_peer: None,
                study: Some(format!(
                    "{VORTEX_BINARY_BYTES} bytes publisher image, x86, static library ({})",
                    cite(&VORTEX_LITE)
                )),
            });
        }
        if rs.iter().any(|r| r.app == App::MinSub) {
            lines.push(SummaryLine {
                what: "subscriber VmRSS".to_owned(),
                ferry: per_transport(App::MinSub, &|r| {
                    format!("{} KB ({} KB private)", r.vm_rss_kb, r.rss_private_kb)
                }),
                floor: None,
                best_peer: None,
                study: Some(format!(
                    "{VORTEX_VMRSS_KB} KB, x86 ({})",
                    cite(&VORTEX_LITE)
                )),
            });
        }
        if !rs.is_empty() {
            let threads = |app: App| per_transport(app, &|r| r.threads.to_string());
            lines.push(SummaryLine {
                what: "threads per app".to_owned(),
                ferry: format!(
                    "min-pub: {}; min-sub: {}",
                    threads(App::MinPub),
                    threads(App::MinSub)
                ),
                floor: None,
                best_peer: None,
                study: Some(format!(
                    "{VORTEX_THREADS} threads in each app ({})",
                    cite(&VORTEX_LITE)
                )),
            });
        }
        lines
    }
}

/// One line per goal for the shared-memory publisher.
fn verdict(rows: &[Row]) -> Vec<String> {
    let Some(p) = rows
        .iter()
        .find(|r| r.app == App::MinPub && r.transport == Subject::Shm)
    else {
        return Vec::new();
    };
    let mark = |ok: bool| if ok { "met" } else { "MISSED" };
    vec![
        format!(
            "binary {} B (goal <= {} B, Vortex Lite's publisher image): {}",
            p.binary_bytes,
            GOAL_BINARY_BYTES,
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

fn measure_pair(dir: &Path, transport: Subject, seconds: f64) -> Result<Vec<Row>> {
    let domain = format!("labfp{}{}", std::process::id(), transport.name());
    // The apps are gone (reaped, or killed and reaped) when `run_pair` returns.
    let (peak, received) =
        crate::in_own_domain(&domain, || run_pair(dir, transport, seconds, &domain))?;
    let t = transport.name();
    if received.unwrap_or(0) == 0 {
        bail!("min-sub over {t} received no message");
    }
    let mut rows = Vec::new();
    for (i, app) in [App::MinPub, App::MinSub].into_iter().enumerate() {
        let Some(r) = peak[i] else {
            bail!("could not read the memory of {} over {t}", app.name());
        };
        let binary_bytes = std::fs::metadata(dir.join(app.name()))
            .context(format!("size of {}", app.name()))?
            .len();
        let received = (app == App::MinSub).then_some(received.unwrap_or(0));
        rows.push(Row::of(app, transport, binary_bytes, &r, received));
    }
    Ok(rows)
}

/// Runs min-sub and min-pub in `domain`; the peak readings of each (publisher first) and what
/// min-sub says it received.
fn run_pair(
    dir: &Path,
    transport: Subject,
    seconds: f64,
    domain: &str,
) -> Result<([Option<Reading>; 2], Option<u64>)> {
    let spawn = |app: &str, run_for: f64| -> Result<Kid> {
        let mut cmd = Command::new(dir.join(app));
        cmd.args(["--domain", domain, "--seconds", &format!("{run_for}")]);
        if transport.is_ferry_udp() {
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

/// Results of a small made-up run, for the report's tests.
#[cfg(test)]
pub(crate) fn example() -> Results<Footprint> {
    let config = Config::default();
    // Each app over each transport: its binary's size, its private RSS (KB) and threads, and
    // what a subscriber received.
    let rows: Vec<Row> = [
        (App::MinPub, Subject::Shm, 533_504, 300, 1, None),
        (App::MinSub, Subject::Shm, 520_000, 280, 1, Some(200)),
        (App::MinPub, Subject::Udp4, 533_504, 400, 2, None),
        (App::MinSub, Subject::Udp4, 520_000, 390, 2, Some(199)),
    ]
    .into_iter()
    .map(|(app, transport, binary, private_kb, threads, received)| {
        let reading = Reading {
            private_kb,
            shared_kb: 900,
            shmem_kb: 100,
            vm_rss_kb: private_kb + 1500,
            threads,
        };
        Row::of(app, transport, binary, &reading, received)
    })
    .collect();
    let setup = Setup {
        seconds: config.seconds,
        bin_dir: "target/min-size".to_owned(),
        profile: String::new(),
        build_command: BUILD_COMMAND.to_owned(),
        message: String::new(),
        measured: String::new(),
        vortex_lite: Vortex {
            publisher_binary_bytes: VORTEX_BINARY_BYTES,
            subscriber_vm_rss_kb: VORTEX_VMRSS_KB,
            threads: VORTEX_THREADS,
            source: String::new(),
        },
        goals: Goals {
            binary_bytes: GOAL_BINARY_BYTES,
            rss_private_kb: GOAL_RSS_PRIVATE_KB,
            threads: GOAL_THREADS,
            applies_to: String::new(),
        },
        verdict: verdict(&rows),
    };
    Results::new(crate::Machine::probe(), config, Measured { setup, rows })
}

#[cfg(test)]
mod tests;
