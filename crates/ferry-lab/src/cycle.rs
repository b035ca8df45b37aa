//! `ferry lab cycle`: the Dominion study's experiment. A writer process and a reader process,
//! each a cyclic app run by `ferry::Cycle`, exchange one u32 array per cycle; a bisection finds
//! the largest array (the multiplicity) that still arrives, per transport, cycle time and CPU
//! budget.
//!
//! - Every cycle the writer sends one message of `multiplicity` u32 values, element `i` of cycle
//!   `c` holding `c ^ i`. ferry is the unit of transmission: one message per cycle; over UDP
//!   ferry cuts it into 1472-byte datagrams (MTU 1500) itself, as the study's tool split its
//!   array by the MTU. Delivery follows the study by default: reliable over shared memory (the
//!   study's writer waited on the reader's semaphore; ferry reads in place and nothing is lost),
//!   latest over UDP (no repair, as the study's UDP had none); `--delivery` sets one for both.
//! - The apps sleep to their deadlines without spinning (`--spin-us 0`): a spin is paid from the
//!   CPU budget, and the kernel's wake-up delay shows as lateness instead.
//! - Every cycle the reader takes every message waiting, checks every element and counts the
//!   cycles that arrived complete and intact.
//! - A run succeeds when at least `--success` % (99.95) of the cycles arrived complete and
//!   intact, nothing arrived corrupt, and neither app raised an overload (the study's timer
//!   rule, see `ferry::cycle`). Deadline misses (cycles that began more than 10 % of a period
//!   late) are counted and reported, as the study reported its callback errors, but do not fail
//!   a run by themselves.
//! - The bisection is a binary search between a known-good and a known-bad multiplicity (0 and
//!   `--max-multiplicity + 1` at first). Its first test is half the limit, as the study's; it
//!   stops when the two are at most `max(2, resolution % of the good one)` apart. With
//!   `--resolution 0` that is the study's "step ≤ 2".
//! - The CPU budget is a real cgroup CFS quota (period 100 ms, as Docker's `--cpus`) over both
//!   processes, created for each run and removed after it.
//! - Placement (`--placement`): both apps pinned to one CPU, one CPU each, or left to the kernel
//!   as in the study's containers. Under a budget below one CPU the pair needs no second CPU,
//!   and on one CPU the reader finds the array in the cache the writer just filled instead of
//!   pulling it across. On two CPUs the apps can also run in parallel, spend a period's quota in
//!   half of it (at 0.3 CPU, 30 ms in 15) and then sit throttled for up to 85 ms while cycles
//!   fall due; on one CPU a throttle lasts at most 70 ms.
//! - A writer that finds the ring full sleeps on it (`WaitStrategy::Block`) rather than spinning,
//!   as the apps sleep to their deadlines: the study's writer waited on a semaphore.
//! - Every trial records the CPU time each app used per cycle (its demand on the budget) and
//!   the time the hypervisor took from this machine meanwhile (steal, on a VM). A run that
//!   failed although the apps stayed within their budget, while the host stole at least
//!   `--steal-retry-ms` (50), is void and run again, at most twice: a vCPU held for 100 ms is
//!   an overload at 1 ms whatever the transport. Void runs stay in the results, marked.
//! - The writer and the reader are peer processes of the lab (`crate::peer`): each is moved
//!   into the run's cgroup by its process id, then told to start; each reports its counts to
//!   the main side when it is done, and the writer keeps its messages readable until the main
//!   side says that the reader is done.

use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use ferry::{CycleStats, Delivery, Node, Qos, WaitStrategy};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cgroup::{self, CpuGroup};
use crate::chart::{bar_svg, color, format_thousands, xy_chart, Bars, Plot, Section, SummaryLine};
use crate::error::{bail, note, Context, Error, Result};
use crate::experiment::{Experiment, Measured, Results};
use crate::peer::{Peer, PeerLink, Place};
use crate::signal;
use crate::stats::median;
use crate::studies::{cite, cite_first, DOMINION};
use crate::subject::{Subject, Subjects};
use crate::table::Table;

/// What this experiment measures, in the order its help lists them.
pub const SUBJECTS: Subjects = Subjects(&[Subject::Shm, Subject::Udp4]);

crate::choice! {
    /// Where the two apps run. The budget is the same; what changes is whether the array crosses
    /// between CPUs' caches every cycle.
    pub enum Placement: "placement" {
        /// Both apps pinned to one CPU (as `docker --cpuset-cpus` with one CPU for both containers):
        /// the reader finds the array in the cache the writer filled.
        OneCpu = "one-cpu",
        /// The writer pinned to one CPU and the reader to another: the array crosses every cycle.
        TwoCpus = "two-cpus",
        /// No pinning: the kernel places the apps, as in the study's Docker containers.
        Scheduler = "scheduler",
    }
}

impl Placement {
    /// How a label of the report names it.
    fn label(self) -> &'static str {
        match self {
            Placement::OneCpu => "both apps on one CPU",
            Placement::TwoCpus => "one CPU each",
            Placement::Scheduler => "placed by the kernel",
        }
    }

    /// The writer's and the reader's CPU, or `None` when the kernel places them.
    fn cpus(self, allowed: &[usize]) -> Result<Option<(usize, usize)>> {
        match (self, allowed) {
            (Placement::Scheduler, _) => Ok(None),
            (Placement::OneCpu, [.., last]) => Ok(Some((*last, *last))),
            (Placement::TwoCpus, [.., a, b]) => Ok(Some((*a, *b))),
            _ => bail!(
                "--placement {}: needs {} CPU(s), this process may use {}",
                self.name(),
                if self == Placement::TwoCpus { 2 } else { 1 },
                allowed.len()
            ),
        }
    }
}

/// A CPU budget over both apps: a number of CPUs, or none (`null`: unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Budget(pub Option<f64>);

pub fn parse_budget(text: &str) -> Result<Budget, String> {
    cgroup::parse_cpu(text).map(Budget)
}

crate::choice! {
    /// `--delivery`: one for both transports, or the study's pair.
    pub enum DeliveryChoice: "delivery" / "deliveries" {
        /// shm reliable (the study's shared memory: the writer waits for the reader's semaphore,
        /// nothing is lost), udp latest (the study's plain UDP: no repair).
        Study = "study",
        Latest = "latest",
        Reliable = "reliable",
    }
}

impl DeliveryChoice {
    fn for_transport(self, t: Subject) -> Delivery {
        match (self, t) {
            (DeliveryChoice::Latest, _) => Delivery::Latest,
            (DeliveryChoice::Reliable, _) => Delivery::Reliable,
            // The study's: reliable over shared memory, latest over UDP.
            (DeliveryChoice::Study, t) if t.is_ferry_shm() => Delivery::Reliable,
            (DeliveryChoice::Study, _) => Delivery::Latest,
        }
    }
}

/// The study's parameters (`--study`).
const STUDY_CYCLE_MS: &[f64] = &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
const STUDY_CPU: &[f64] = &[0.3, 1.5];
const STUDY_MAX: u64 = 1_000_000;
/// The study's shared-memory figure at 1 ms and 0.3 CPU: over 200 000 u32 (and UDP's below).
const STUDY_SHM_U32: f64 = 200_000.0;

/// The bounds of a configuration, and of a peer request (which may come from another machine
/// through an agent).
const MAX_CYCLES: u64 = 10_000_000;
const MAX_MULTIPLICITY: u64 = 256 * 1024 * 1024;
const MIN_CYCLE_MS: f64 = 0.05;
const MAX_CYCLE_MS: f64 = 10_000.0;
const MAX_SPIN_US: u64 = 1_000_000;

/// What `ferry lab cycle` is asked to measure. The fields left `None` take their defaults, or
/// with `study` the study's parameters.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Transports; the transports alternate within a repeat.
    pub transport: Vec<Subject>,
    /// Cycle times in milliseconds; `None`: 1 and 10 (with `study`: 1, 2, ..., 10).
    pub cycle_ms: Option<Vec<f64>>,
    /// CPU budgets over both processes (a cgroup CPU quota), `null` for unlimited; `None`: 0.3
    /// (with `study`: 0.3 and 1.5).
    pub cpu: Option<Vec<Budget>>,
    /// Where the two apps run.
    pub placement: Vec<Placement>,
    /// Cycles per run.
    pub cycles: u64,
    /// Percent of cycles that must arrive complete and intact for a run to pass.
    pub success: f64,
    /// Bisections per (transport, cycle time, CPU budget, placement).
    pub repeat: u32,
    /// The largest multiplicity tried; `None`: 4 000 000 (with `study`: 1 000 000).
    pub max_multiplicity: Option<u64>,
    /// The bisection stops when its bounds are at most max(2, this % of the good one) apart;
    /// `None`: 2 (with `study`: 0, the study's step of 2).
    pub resolution: Option<f64>,
    /// Delivery: the study's pair, or one for both transports.
    pub delivery: DeliveryChoice,
    /// Microseconds each app spins before a deadline instead of sleeping.
    pub spin_us: u64,
    /// A run that fails within its budget while the host stole at least this many ms is void
    /// and run again (at most twice); 0: never.
    pub steal_retry_ms: f64,
    /// A cycle that begins later than this percentage of the period is a deadline miss.
    pub tolerance_pct: f64,
    /// The study's parameters where not given.
    pub study: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            transport: vec![Subject::Shm, Subject::Udp4],
            cycle_ms: None,
            cpu: None,
            placement: vec![Placement::OneCpu, Placement::Scheduler],
            cycles: 1000,
            success: 99.95,
            repeat: 1,
            max_multiplicity: None,
            resolution: None,
            delivery: DeliveryChoice::Study,
            spin_us: 0,
            steal_retry_ms: 50.0,
            tolerance_pct: 10.0,
            study: false,
        }
    }
}

impl Config {
    fn cycle_times(&self) -> Vec<f64> {
        match (&self.cycle_ms, self.study) {
            (Some(list), _) => list.clone(),
            (None, true) => STUDY_CYCLE_MS.to_vec(),
            (None, false) => vec![1.0, 10.0],
        }
    }

    /// CPUs per budget, `None`: unlimited.
    fn budgets(&self) -> Vec<Option<f64>> {
        match (&self.cpu, self.study) {
            (Some(list), _) => list.iter().map(|b| b.0).collect(),
            (None, true) => STUDY_CPU.iter().map(|&c| Some(c)).collect(),
            (None, false) => vec![Some(0.3)],
        }
    }

    fn max(&self) -> u64 {
        self.max_multiplicity
            .unwrap_or(if self.study { STUDY_MAX } else { 4_000_000 })
    }

    fn resolution_percent(&self) -> f64 {
        self.resolution
            .unwrap_or(if self.study { 0.0 } else { 2.0 })
    }
}

/// The experiment (see the module's documentation).
pub struct Cycle;

impl Experiment for Cycle {
    const NAME: &'static str = "cycle";
    const TITLE: &'static str = "Largest array per cycle under a CPU budget";
    type Config = Config;
    type Setup = Setup;
    type Row = Row;
    type PeerRequest = PeerRequest;

    fn validate(config: &Config) -> Result<()> {
        SUBJECTS.check("--transport", &config.transport)?;
        crate::distinct_list("--placement", &config.placement, |p| p.name().to_owned())?;
        let cycle_ms = config.cycle_times();
        crate::distinct_list("--cycle-ms", &cycle_ms, |c| c.to_string())?;
        if cycle_ms
            .iter()
            .any(|&c| !(MIN_CYCLE_MS..=MAX_CYCLE_MS).contains(&c))
        {
            bail!("--cycle-ms: cycle times must be between 0.05 and 10000 ms");
        }
        crate::distinct_list("--cpu", &config.budgets(), |b| {
            b.map_or("none".to_owned(), |c| c.to_string())
        })?;
        if let Some(c) = config
            .budgets()
            .into_iter()
            .flatten()
            .find(|c| !(0.01..=1024.0).contains(c))
        {
            bail!("--cpu: invalid CPU budget {c}: a number of CPUs from 0.01 (such as 0.3 or 1.5), or none");
        }
        if !(1..=MAX_CYCLES).contains(&config.cycles) {
            bail!("--cycles must be between 1 and 10 000 000");
        }
        if !(config.success > 0.0 && config.success <= 100.0) {
            bail!("--success must be a percentage above 0");
        }
        if !(1..=MAX_MULTIPLICITY).contains(&config.max()) {
            bail!("--max-multiplicity must be between 1 and 268435456 (1 GiB)");
        }
        if !(0.0..=50.0).contains(&config.resolution_percent()) {
            bail!("--resolution must be between 0 and 50 (percent)");
        }
        if !(0.0..=1000.0).contains(&config.tolerance_pct) {
            bail!("--tolerance-pct must be between 0 and 1000");
        }
        if config.repeat == 0 {
            bail!("--repeat must be at least 1");
        }
        if !(0.0..=1e6).contains(&config.steal_retry_ms) {
            bail!("--steal-retry-ms must be between 0 and 1000000");
        }
        if config.spin_us > MAX_SPIN_US {
            bail!("--spin-us must be at most 1000000 (1 s)");
        }
        Ok(())
    }

    fn run(config: &Config) -> Result<Measured<Self>> {
        let setup = setup_of(config)?;
        let allowed = crate::allowed_cpus();
        let placements = config
            .placement
            .iter()
            .map(|&p| Ok((p, p.cpus(&allowed)?)))
            .collect::<Result<Vec<_>>>()?;
        let mut rows = Vec::new();
        let domain = format!("labcyc{}", std::process::id());
        let mut run_index = 0u64;
        note!(
        "cycle: {} cycles per run, success at {} %, multiplicity up to {}, delivery shm {}, udp {}",
        setup.cycles,
        setup.success_percent,
        setup.max_multiplicity,
        setup.delivery.shm.name(),
        setup.delivery.udp.name(),
    );
        // Repeats outermost and transports innermost: the transports alternate (A B A B ...).
        for repeat in 0..setup.repeat {
            for &cycle_ms in &setup.cycle_ms {
                for &cpu in &setup.cpu {
                    for &(placement, cpus) in &placements {
                        for &transport in &config.transport {
                            let point = Point {
                                transport,
                                cycle_ms,
                                cpu,
                                placement,
                                cpus,
                            };
                            let row =
                                bisection(config, &setup, &domain, &mut run_index, point, repeat)?;
                            note!(
                                "{}: largest multiplicity {} u32 ({} bytes, {:.0} Mbit/s){}",
                                point.describe(),
                                row.max_multiplicity,
                                row.bytes_per_cycle,
                                row.mbit_per_s,
                                if row.reached_limit {
                                    " = the limit"
                                } else {
                                    ""
                                }
                            );
                            rows.push(row);
                        }
                    }
                }
            }
        }
        Ok(Measured { setup, rows })
    }

    fn run_peer(request: PeerRequest, link: &mut PeerLink) -> Result<()> {
        request.check()?;
        if let Some(cpu) = request.pin_cpu {
            // Before the node exists: any thread it starts inherits the CPU.
            crate::pin_to(cpu)?;
        }
        // Wait for the main side to have moved this process into its cgroup.
        match link.recv::<Command>(GO_TIMEOUT)? {
            Some(Command::Go) => {}
            Some(other) => bail!(
                "the {} expected the start, not {other:?}",
                request.role.name()
            ),
            None => bail!(
                "the {} was not told to start within {GO_TIMEOUT:?}",
                request.role.name()
            ),
        }
        match request.role {
            Role::Writer => {
                let report = writer(&request)?;
                link.report(&report)?;
                // Keep the publisher's messages readable until the reader is done (the main side
                // says stop), but not past the main side nor past the longest a run may take.
                let deadline = Instant::now() + request.run_limit() + FINISH_TIMEOUT;
                loop {
                    match link.recv::<Command>(Duration::from_millis(100))? {
                        Some(Command::Stop) => return Ok(()),
                        Some(Command::Go) => bail!("the writer was told to start twice"),
                        None if Instant::now() >= deadline => {
                            bail!("the writer was not told to stop within the run's time")
                        }
                        None => {}
                    }
                }
            }
            Role::Reader => {
                let report = reader(&request, link)?;
                link.report(&report)
            }
        }
    }

    fn table(results: &Results<Self>) -> String {
        let setup: &Setup = &results.config;
        let rows: &[Row] = &results.rows;
        let mut table = Table::new(&[
            "transport",
            ">cycle",
            ">CPU",
            "placement",
            ">repeat",
            ">largest u32",
            ">bytes/cycle",
            ">Mbit/s",
            ">misses w/r",
            ">runs",
            "note",
        ]);
        for row in rows {
            let misses = match (row.writer_misses, row.reader_misses) {
                (Some(w), Some(r)) => format!("{w}/{r}"),
                _ => "-".to_owned(),
            };
            let voids = row.trials.iter().filter(|t| t.void).count();
            let mut note = Vec::new();
            if row.reached_limit {
                note.push("= the limit".to_owned());
            }
            if row.max_multiplicity == 0 {
                note.push("none passed".to_owned());
            }
            if voids > 0 {
                note.push(format!("{voids} void (host steal)"));
            }
            table.row(vec![
                row.transport.name().to_owned(),
                format!("{} ms", row.cycle_ms),
                row.cpu.map_or("none".to_owned(), |c| c.to_string()),
                row.placement.name().to_owned(),
                row.repeat.to_string(),
                row.max_multiplicity.to_string(),
                row.bytes_per_cycle.to_string(),
                format!("{:.0}", row.mbit_per_s),
                misses,
                row.trials.len().to_string(),
                note.join("; "),
            ]);
        }
        format!(
        "\nLargest multiplicity (u32 elements per cycle) with at least {} % of {} cycles complete and no overload, up to {}; delivery shm {}, udp {}.\n\n{}",
        setup.success_percent,
        setup.cycles,
        setup.max_multiplicity,
        setup.delivery.shm.name(),
        setup.delivery.udp.name(),
        table.render()
    )
    }

    fn section(results: &Results<Self>) -> Result<Section> {
        let rs: &[Row] = &results.rows;
        // Medians over the repeats per (transport, CPU budget, placement, cycle time).
        let groups = groups(rs);
        let mut parts = Vec::new();
        for (key, values) in &groups {
            if key.transport != Subject::Shm {
                continue;
            }
            let shm = median_of(values);
            let mut part = format!(
                "shm at {} ms, {}{}: {} u32",
                key.cycle_ms,
                cpu_label(key.cpu),
                key.placement_label(),
                format_thousands(shm)
            );
            if key.cycle_ms == 1.0 && key.cpu == Some(0.3) {
                let _ = write!(part, " ({:.2} × the study's 200 000)", shm / STUDY_SHM_U32);
            }
            let udp = groups.iter().find(|(k, _)| {
                *k == Key {
                    transport: Subject::Udp4,
                    ..*key
                }
            });
            if let Some((_, u)) = udp {
                let udp = median_of(u);
                let _ = write!(part, ", udp {} u32", format_thousands(udp));
                if udp > 0.0 {
                    let _ = write!(part, ", shm/udp {:.1}", shm / udp);
                }
            }
            if values.len() > 1 {
                let _ = write!(part, " (medians of {} repeats)", values.len());
            }
            parts.push(part);
        }
        let sentence = format!(
        "{} finds the largest multiplicity (u32 elements per cycle) that arrives in 99.95 % of the cycles under a CPU budget (over 200 000 u32 at 1 ms and 0.3 CPU over shared memory). Here: {}.",
        cite_first(&DOMINION),
        parts.join("; ")
    );
        // Median against cycle time, one line per transport, budget and placement, the spread over
        // the repeats as a bar.
        let mut series: Vec<crate::chart::XySeries> = Vec::new();
        for (key, values) in &groups {
            let median = median_of(values);
            let spread = (values.len() > 1).then(|| range_of(values));
            let label = format!(
                "{}, {}{}",
                key.transport.name(),
                cpu_label(key.cpu),
                key.placement_label()
            );
            let point = (key.cycle_ms, median.max(1.0), spread);
            match series.iter_mut().find(|s| s.0 == label) {
                Some(s) => s.1.push(point),
                None => series.push((label, vec![point])),
            }
        }
        let mut limited: Vec<String> = rs
            .iter()
            .filter(|r| r.reached_limit)
            .map(|r| {
                format!(
                    "{} at {} ms ({})",
                    r.transport.name(),
                    r.cycle_ms,
                    r.placement.name()
                )
            })
            .collect();
        limited.sort();
        limited.dedup();
        // Runs made void by the host's steal (failed while the hypervisor held the CPU).
        let voids = rs.iter().flat_map(|r| &r.trials).filter(|t| t.void).count();
        let void_note = if voids > 0 {
            format!(" {voids} run(s) failed while the host stole CPU time from this machine and were run again (kept in the JSON with \"void\": true).")
        } else {
            String::new()
        };
        let mut cycle_times: Vec<f64> = groups.iter().map(|g| g.0.cycle_ms).collect();
        cycle_times.sort_by(f64::total_cmp);
        cycle_times.dedup();
        let mut plots = Vec::new();
        if let [ms] = cycle_times[..] {
            // One cycle time: bars per transport and budget, one per placement.
            let mut categories: Vec<(Subject, Option<f64>)> = Vec::new();
            let mut placements: Vec<Placement> = Vec::new();
            for (key, _) in &groups {
                if !categories.contains(&(key.transport, key.cpu)) {
                    categories.push((key.transport, key.cpu));
                }
                if !placements.contains(&key.placement) {
                    placements.push(key.placement);
                }
            }
            let bar_series = placements
                .iter()
                .enumerate()
                .map(|(i, &place)| {
                    let values = categories
                        .iter()
                        .map(|&(transport, cpu)| {
                            groups
                                .iter()
                                .find(|(k, _)| {
                                    k.placement == place && k.transport == transport && k.cpu == cpu
                                })
                                .map(|(_, v)| median_of(v))
                        })
                        .collect();
                    (place.label().to_owned(), color(i), values)
                })
                .collect();
            let title = format!(
                "Largest multiplicity at {ms} ms (u32 elements per cycle), median over repeats"
            );
            let panel = Bars {
                title: &title,
                y_desc: "u32 elements per cycle",
                categories: categories
                    .iter()
                    .map(|&(transport, cpu)| format!("{}, {}", transport.name(), cpu_label(cpu)))
                    .collect(),
                series: bar_series,
                reference: (ms == 1.0).then(|| {
                    (
                        format!("{}: shm, 1 ms, 0.3 CPU", DOMINION.short),
                        STUDY_SHM_U32,
                    )
                }),
                log_y: false,
            };
            let svg = bar_svg(&[panel], 960)?;
            let spreads: Vec<String> = groups
                .iter()
                .filter(|(_, v)| v.len() > 1)
                .map(|(k, v)| {
                    let (lo, hi) = range_of(v);
                    format!(
                        "{}{} {}–{}",
                        k.transport.name(),
                        k.placement_label(),
                        format_thousands(lo),
                        format_thousands(hi)
                    )
                })
                .collect();
            let mut caption = format!("Median over the repeats of the largest multiplicity that passed (≥ 99.95 % complete cycles, no overload), per placement of the two apps. The point of {}: over 200 000 u32 over shared memory at 1 ms and 0.3 CPU.", cite(&DOMINION));
            if !spreads.is_empty() {
                let _ = write!(caption, " Spread over the repeats: {}.", spreads.join("; "));
            }
            if !limited.is_empty() {
                let _ = write!(
                    caption,
                    " Reached the largest multiplicity tried (the true maximum is higher): {}.",
                    limited.join(", ")
                );
            }
            caption.push_str(&void_note);
            plots.push(Plot {
                file: "cycle.svg".to_owned(),
                svg,
                caption,
            });
        } else if !series.is_empty() {
            series.push((
                format!("{}: shm, 1 ms, 0.3 CPU", DOMINION.short),
                vec![(1.0, STUDY_SHM_U32, None)],
            ));
            let svg = xy_chart(
                "Largest multiplicity per cycle (u32 elements), median over repeats",
                "cycle time (ms)",
                "u32 elements per cycle (log scale)",
                &series,
                true,
                false,
                None,
            )?;
            let mut caption = format!("Median over the repeats of the largest multiplicity that passed (≥ 99.95 % complete cycles, no overload); the bar spans the repeats. The point of {}: over 200 000 u32 over shared memory at 1 ms and 0.3 CPU.", cite(&DOMINION));
            if !limited.is_empty() {
                let _ = write!(
                    caption,
                    " Reached the largest multiplicity tried (the true maximum is higher): {}.",
                    limited.join(", ")
                );
            }
            caption.push_str(&void_note);
            plots.push(Plot {
                file: "cycle.svg".to_owned(),
                svg,
                caption,
            });
        }
        Ok(Section { plots, sentence })
    }

    /// The study's figures at 1 ms: over 200 000 u32 over shared memory and under 200 000 over UDP
    /// at 0.3 CPU (its figure 3), and over shared memory at 1.5 CPU more than twice its figure at
    /// 0.3 CPU (its figure 5). One line per placement measured.
    fn summary(results: &Results<Self>) -> Vec<SummaryLine> {
        let rs: &[Row] = &results.rows;
        let mut lines = Vec::new();
        for (key, values) in &groups(rs) {
            if key.cycle_ms != 1.0 {
                continue;
            }
            let study = if key.cpu == Some(0.3) {
                match key.transport {
                    Subject::Shm => "over 200 000 u32",
                    _ => "under 200 000 u32",
                }
            } else if key.cpu == Some(1.5) && key.transport == Subject::Shm {
                "more than twice its figure at 0.3 CPU"
            } else {
                continue;
            };
            let transport = match key.transport {
                Subject::Shm => "shared memory",
                _ => "UDP",
            };
            let mut ferry = format!("{} u32", format_thousands(median_of(values)));
            if values.len() > 1 {
                let _ = write!(ferry, " (median of {} repeats)", values.len());
            }
            lines.push(SummaryLine {
                what: format!(
                    "largest u32 array per 1 ms cycle, {transport}, {}{}",
                    cpu_label(key.cpu),
                    key.placement_label()
                ),
                ferry,
                floor: None,
                best_peer: None,
                study: Some(format!("{study} ({})", cite(&DOMINION))),
            });
        }
        lines
    }
}

// ---------------------------------------------------------------------------------------------
// Results

/// How a cycle run was made: the settings after `--study` and the defaults, and the rules.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Setup {
    transports: Vec<Subject>,
    cycle_ms: Vec<f64>,
    /// null: unlimited.
    cpu: Vec<Option<f64>>,
    cycles: u64,
    success_percent: f64,
    repeat: u32,
    max_multiplicity: u64,
    resolution_percent: f64,
    bisection: String,
    success_rule: String,
    steal_rule: String,
    overload_rule: String,
    deadline_miss: String,
    /// Per transport.
    #[schemars(with = "PerTransport<crate::args::DeliverySchema>")]
    delivery: PerTransport<Delivery>,
    /// How each transport carries one cycle's array.
    unit: PerTransport<String>,
    spin_us: u64,
    tolerance_percent: f64,
    cgroup: CgroupSetup,
    placements: Vec<Placement>,
    placement_rule: String,
    study: bool,
}

/// One value for each transport.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct PerTransport<T> {
    shm: T,
    udp: T,
}

/// The cgroup interface of this machine, and the group the runs used.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct CgroupSetup {
    used: bool,
    /// null: this machine has no cgroup CPU controller.
    version: Option<CgroupVersion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    period_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    quota: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    V1,
    V2,
}

impl From<cgroup::Version> for CgroupVersion {
    fn from(v: cgroup::Version) -> CgroupVersion {
        match v {
            cgroup::Version::V1 => CgroupVersion::V1,
            cgroup::Version::V2 => CgroupVersion::V2,
        }
    }
}

/// One bisection's result.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    pub transport: Subject,
    pub cycle_ms: f64,
    /// CPUs (null: unlimited).
    pub cpu: Option<f64>,
    pub placement: Placement,
    /// The writer's and the reader's CPU (null: placed by the kernel).
    pub writer_cpu: Option<usize>,
    pub reader_cpu: Option<usize>,
    pub repeat: u32,
    /// The largest multiplicity that passed (0: none did).
    pub max_multiplicity: u64,
    /// Writer plus reader deadline misses in the run at `max_multiplicity` (null: none passed).
    pub deadline_misses: Option<u64>,
    pub writer_misses: Option<u64>,
    pub reader_misses: Option<u64>,
    pub cycles: u64,
    pub bytes_per_cycle: u64,
    pub mbit_per_s: f64,
    /// The largest multiplicity passed the limit: the true maximum may be higher.
    pub reached_limit: bool,
    /// The smallest multiplicity that failed (null: none did).
    pub min_failed: Option<u64>,
    pub trials: Vec<Trial>,
}

/// One run of the writer and reader at one multiplicity.
#[derive(Debug, Default, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Trial {
    pub multiplicity: u64,
    pub success: bool,
    /// Why it failed.
    pub reason: Option<String>,
    pub complete_percent: f64,
    pub complete: u64,
    pub corrupt: u64,
    pub writer_misses: u64,
    pub reader_misses: u64,
    pub writer_overloads: u64,
    pub reader_overloads: u64,
    pub writer_max_lateness_us: f64,
    pub reader_max_lateness_us: f64,
    pub writer_work_us_mean: f64,
    pub reader_work_us_mean: f64,
    /// CPU time (user and system) each app used per cycle run: the pair's demand on the budget.
    pub writer_cpu_us_per_cycle: f64,
    pub reader_cpu_us_per_cycle: f64,
    /// CPU time the hypervisor took from this machine (all CPUs) during the run, when reported.
    pub host_steal_ms: Option<f64>,
    pub throttled_periods: Option<u64>,
    pub throttled_ms: Option<f64>,
    /// It failed within its CPU budget while the host stole at least `--steal-retry-ms`: not
    /// counted, run again.
    pub void: bool,
    pub seconds: f64,
    pub warnings: Vec<String>,
}

impl Trial {
    /// Pass, FAIL or VOID, and the figures behind it, for the progress lines.
    fn outcome(&self) -> String {
        let verdict = match (self.success, self.void) {
            (true, _) => "pass",
            (false, false) => "FAIL",
            (false, true) => "VOID (host steal), run again",
        };
        let mut line = format!(
            "{verdict} (complete {:.2} %, misses w/r {}/{}, overloads w/r {}/{}, CPU/cycle w/r {:.0}/{:.0} µs",
            self.complete_percent,
            self.writer_misses,
            self.reader_misses,
            self.writer_overloads,
            self.reader_overloads,
            self.writer_cpu_us_per_cycle,
            self.reader_cpu_us_per_cycle,
        );
        if let Some(ms) = self.host_steal_ms.filter(|&ms| ms > 0.0) {
            let _ = write!(line, ", host steal {ms:.0} ms");
        }
        if let Some(ms) = self.throttled_ms {
            let _ = write!(line, ", throttled {ms:.0} ms");
        }
        line.push(')');
        line
    }
}

/// What an app reports to the main side when it is done.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Report {
    cycles: u64,
    misses: u64,
    overloads: u64,
    skipped: u64,
    max_lateness_ns: u64,
    mean_lateness_ns: f64,
    max_backlog: u64,
    max_work_ns: u64,
    total_work_ns: u64,
    /// CPU time (all threads, user and system) used while cycling.
    cpu_ns: u64,
    /// The writer stopped at an overload.
    aborted: bool,
    /// Writer: messages sent. Reader: messages taken.
    messages: u64,
    /// Reader: distinct cycles that arrived complete and intact.
    complete: u64,
    corrupt: u64,
    duplicates: u64,
    /// Reader: messages ferry said were skipped (latest delivery) or lost.
    ferry_skipped: u64,
    warnings: Vec<String>,
}

impl Report {
    fn from_stats(s: &CycleStats) -> Report {
        Report {
            cycles: s.cycles,
            misses: s.misses,
            overloads: s.overloads,
            skipped: s.skipped,
            max_lateness_ns: s.max_lateness_ns,
            mean_lateness_ns: s.mean_lateness_ns(),
            max_backlog: s.max_backlog,
            max_work_ns: s.max_work_ns,
            total_work_ns: s.total_work_ns,
            ..Report::default()
        }
    }
}

/// The writer's end-of-run message: one u32 no cycle number reaches.
const END: u32 = u32::MAX;
/// How long the writer waits for its reader to attach, and the reader for its first message.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// The reader gives up when nothing arrived for this long (plus a few periods) after the start.
const IDLE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long an app waits to be told to start (the main side moves it into its cgroup first).
const GO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the main side waits for an app that is done to say so and exit.
const FINISH_TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// The main side

/// One bisection's fixed parameters.
#[derive(Debug, Clone, Copy)]
struct Point {
    transport: Subject,
    cycle_ms: f64,
    cpu: Option<f64>,
    placement: Placement,
    /// The writer's and the reader's CPU, `None`: placed by the kernel.
    cpus: Option<(usize, usize)>,
}

impl Point {
    fn period(&self) -> Duration {
        Duration::from_secs_f64(self.cycle_ms / 1000.0)
    }

    /// For the progress lines: "shm 1 ms cpu 0.3 one-cpu".
    fn describe(&self) -> String {
        format!(
            "{} {} ms cpu {} {}",
            self.transport.name(),
            self.cycle_ms,
            self.cpu.map_or("none".to_owned(), |c| c.to_string()),
            self.placement.name()
        )
    }
}

/// Finds the largest multiplicity that passes at `point`.
fn bisection(
    config: &Config,
    setup: &Setup,
    domain: &str,
    run_index: &mut u64,
    point: Point,
    repeat: u32,
) -> Result<Row> {
    let mut trials = Vec::new();
    let stop = |good: u64| stop_gap(good, setup.resolution_percent);
    let budget_us = point.cpu.map(|c| c * point.cycle_ms * 1000.0);
    let bounds = bisect(setup.max_multiplicity, stop, |m| {
        let mut voided = 0;
        loop {
            *run_index += 1;
            let mut t = trial(config, setup, domain, *run_index, &point, m)?;
            t.void = void_for_steal(&t, config.steal_retry_ms, budget_us, voided);
            note!("  {}: {m:>9} u32 {}", point.describe(), t.outcome());
            let (ok, void) = (t.success, t.void);
            trials.push(t);
            if void {
                voided += 1;
                continue;
            }
            break Ok(ok);
        }
    })?;
    Ok(build_row(
        &point,
        repeat,
        setup.cycles,
        setup.max_multiplicity,
        bounds,
        trials,
    ))
}

/// A bisection's row from its bounds `(good, bad)` and its trials.
fn build_row(
    point: &Point,
    repeat: u32,
    cycles: u64,
    max: u64,
    (good, bad): (u64, u64),
    trials: Vec<Trial>,
) -> Row {
    let best = trials.iter().find(|t| t.success && t.multiplicity == good);
    let bytes = good.saturating_mul(4);
    Row {
        transport: point.transport,
        cycle_ms: point.cycle_ms,
        cpu: point.cpu,
        placement: point.placement,
        writer_cpu: point.cpus.map(|c| c.0),
        reader_cpu: point.cpus.map(|c| c.1),
        repeat,
        max_multiplicity: good,
        deadline_misses: best.map(|t| t.writer_misses.saturating_add(t.reader_misses)),
        writer_misses: best.map(|t| t.writer_misses),
        reader_misses: best.map(|t| t.reader_misses),
        cycles,
        bytes_per_cycle: bytes,
        mbit_per_s: bytes as f64 * 8.0 / (point.cycle_ms / 1000.0) / 1e6,
        reached_limit: good >= max,
        min_failed: (bad <= max).then_some(bad),
        trials,
    }
}

/// The setup of `config`: its settings after `--study` and the defaults, and the rules.
fn setup_of(config: &Config) -> Result<Setup> {
    let needs_cgroup = config.budgets().iter().any(Option::is_some);
    let cgroup = match (needs_cgroup, cgroup::detect()) {
        (false, v) => CgroupSetup {
            used: false,
            version: v.map(CgroupVersion::from),
            dir: None,
            period_us: None,
            quota: None,
        },
        (true, None) => bail!(
            "--cpu: this machine has no cgroup CPU controller under /sys/fs/cgroup; use --cpu none"
        ),
        (true, Some(v)) => {
            let dir = match v {
                cgroup::Version::V1 => {
                    format!("/sys/fs/cgroup/cpu/ferry-lab-{}", std::process::id())
                }
                cgroup::Version::V2 => format!("/sys/fs/cgroup/ferry-lab-{}", std::process::id()),
            };
            CgroupSetup {
                used: true,
                version: Some(v.into()),
                dir: Some(dir),
                period_us: Some(cgroup::PERIOD_US),
                quota: Some("cpu × period (cpu.cfs_quota_us on v1, cpu.max on v2), over the writer and the reader together; created for each run and removed after it".to_owned()),
            }
        }
    };
    Ok(describe(config, cgroup))
}

fn describe(config: &Config, cgroup: CgroupSetup) -> Setup {
    let delivery = |t| config.delivery.for_transport(t);
    Setup {
        transports: config.transport.clone(),
        cycle_ms: config.cycle_times(),
        cpu: config.budgets(),
        cycles: config.cycles,
        success_percent: config.success,
        repeat: config.repeat,
        max_multiplicity: config.max(),
        resolution_percent: config.resolution_percent(),
        bisection: "binary search between a known-good and a known-bad multiplicity (0 and max+1 at first; the first test is half the limit, as in the study); stops when they are at most max(2, resolution % of the good one) apart; the result is the largest that passed".to_owned(),
        success_rule: "at least success_percent of the cycles arrived complete and intact, none corrupt, and no overload in the writer or the reader".to_owned(),
        steal_rule: if config.steal_retry_ms > 0.0 {
            format!("a run that failed although the two apps used no more CPU per cycle than the budget gives, while the host stole at least {} ms of CPU from this machine (all CPUs, /proc/stat, 10 ms resolution), is void (\"void\": true in its trial) and run again, at most {MAX_STEAL_RETRIES} times; a pass always counts", config.steal_retry_ms)
        } else {
            "none: every run counts".to_owned()
        },
        overload_rule: "the study's timer rule: a counting semaphore raised once per period and lowered once per cycle run (the backlog of due cycles); passing 100 raises an overload and resets it to 10 (the other due cycles are given up); the writer stops at its first overload".to_owned(),
        deadline_miss: format!("a cycle that began more than {} % of the period after its absolute deadline", config.tolerance_pct),
        delivery: PerTransport {
            shm: delivery(Subject::Shm),
            udp: delivery(Subject::Udp4),
        },
        unit: PerTransport {
            shm: "one ferry message per cycle (one ring record, written in place through a loan)".to_owned(),
            udp: "one ferry message per cycle; ferry cuts it into 1472-byte datagrams (MTU 1500, IPv4 loopback)".to_owned(),
        },
        spin_us: config.spin_us,
        tolerance_percent: config.tolerance_pct,
        cgroup,
        placements: config.placement.clone(),
        placement_rule: "one-cpu: both apps pinned to the last CPU this process may use; two-cpus: the writer on the second last, the reader on the last; scheduler: not pinned (the study's containers). The budget is the cgroup quota in every case".to_owned(),
        study: config.study,
    }
}

/// How often one multiplicity is run again after runs made void by the host's steal.
const MAX_STEAL_RETRIES: u32 = 2;

/// Whether a run is void: it failed although the two apps used no more CPU per cycle than the
/// budget gives (`budget_us`, None: unlimited), while the host stole at least `limit_ms` (0:
/// never), and `voided` earlier runs of this multiplicity leave room for another. A run that
/// needed more than its budget failed on its own account, steal or not.
fn void_for_steal(t: &Trial, limit_ms: f64, budget_us: Option<f64>, voided: u32) -> bool {
    let within_budget = budget_us.map_or(true, |b| {
        t.writer_cpu_us_per_cycle + t.reader_cpu_us_per_cycle <= b
    });
    !t.success
        && within_budget
        && limit_ms > 0.0
        && voided < MAX_STEAL_RETRIES
        && t.host_steal_ms.is_some_and(|ms| ms >= limit_ms)
}

/// The largest gap between the good and bad bounds at which the bisection stops.
fn stop_gap(good: u64, resolution_percent: f64) -> u64 {
    ((good as f64 * resolution_percent / 100.0) as u64).max(2)
}

/// Binary search for the largest `m` in 1..=max with `test(m)` true, assuming monotony. Returns
/// (largest good, smallest bad): (0, _) when nothing passed, (_, max + 1) when max passed.
fn bisect(
    max: u64,
    stop: impl Fn(u64) -> u64,
    mut test: impl FnMut(u64) -> Result<bool>,
) -> Result<(u64, u64)> {
    let (mut good, mut bad) = (0u64, max + 1);
    while bad - good > 1 && bad - good > stop(good) {
        let mid = good + (bad - good) / 2;
        if test(mid)? {
            good = mid;
        } else {
            bad = mid;
        }
    }
    // The limit itself when everything below passed by the stop rule's margin.
    if bad == max + 1 && good < max && bad - good > 1 && test(max)? {
        good = max;
    }
    Ok((good, bad))
}

// ---------------------------------------------------------------------------------------------
// One run: two peer processes

crate::choice! {
    /// Which app a peer process is.
    pub enum Role: "role" {
        Writer = "writer",
        Reader = "reader",
    }
}

/// The main side's commands to an app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Command {
    /// It is in its cgroup: start cycling.
    Go,
    /// (To the writer.) The reader is done: let the messages go and exit.
    Stop,
}

/// What the main side asks of an app.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerRequest {
    role: Role,
    transport: Subject,
    domain: String,
    topic: String,
    period_ns: u64,
    tolerance_ns: u64,
    spin_ns: u64,
    cycles: u64,
    multiplicity: u64,
    delivery: Delivery,
    /// Pin this app to this CPU before it starts.
    pin_cpu: Option<usize>,
}

impl PeerRequest {
    /// Refuses a request out of the bounds a configuration has (it may come from another
    /// machine, through an agent).
    fn check(&self) -> Result<()> {
        SUBJECTS.check("transport", &[self.transport])?;
        let min_ns = (MIN_CYCLE_MS * 1e6) as u64;
        let max_ns = (MAX_CYCLE_MS * 1e6) as u64;
        if !(min_ns..=max_ns).contains(&self.period_ns) {
            bail!("a cycle of {} ns was refused", self.period_ns);
        }
        if self.tolerance_ns > self.period_ns.saturating_mul(10) {
            bail!("a tolerance of {} ns was refused", self.tolerance_ns);
        }
        if self.spin_ns > MAX_SPIN_US * 1000 {
            bail!("a spin of {} ns was refused", self.spin_ns);
        }
        if !(1..=MAX_CYCLES).contains(&self.cycles) {
            bail!("{} cycles were refused", self.cycles);
        }
        if !(1..=MAX_MULTIPLICITY).contains(&self.multiplicity) {
            bail!("a multiplicity of {} was refused", self.multiplicity);
        }
        Ok(())
    }

    fn multiplicity(&self) -> usize {
        // Checked: at most MAX_MULTIPLICITY.
        self.multiplicity as usize
    }

    fn period(&self) -> Duration {
        Duration::from_nanos(self.period_ns)
    }

    /// How long the main side may wait for the reader: the longest a run may take.
    fn run_limit(&self) -> Duration {
        let run_time = self.period() * u32::try_from(self.cycles).unwrap_or(u32::MAX);
        START_TIMEOUT * 2 + run_time * 3 + IDLE_TIMEOUT
    }
}

/// One run (see `run_trial`), and then whatever it left in `domain`: apps killed on an error or
/// Ctrl-C leave their shared memory behind.
fn trial(
    config: &Config,
    setup: &Setup,
    domain: &str,
    run_index: u64,
    point: &Point,
    multiplicity: u64,
) -> Result<Trial> {
    let outcome = run_trial(config, setup, domain, run_index, point, multiplicity);
    if outcome.is_err() {
        let _ = ferry::admin::clean(Some(domain));
    }
    outcome
}

fn run_trial(
    config: &Config,
    setup: &Setup,
    domain: &str,
    run_index: u64,
    point: &Point,
    multiplicity: u64,
) -> Result<Trial> {
    let started = Instant::now();
    let steal_before = crate::host_steal();
    let period_ns = point.period().as_nanos() as u64;
    let request = |role: Role, pin_cpu: Option<usize>| PeerRequest {
        role,
        transport: point.transport,
        domain: domain.to_owned(),
        topic: format!("cyc{run_index}"),
        period_ns,
        tolerance_ns: (period_ns as f64 * config.tolerance_pct / 100.0) as u64,
        spin_ns: config.spin_us.saturating_mul(1000),
        cycles: setup.cycles,
        multiplicity,
        delivery: config.delivery.for_transport(point.transport),
        pin_cpu,
    };
    let reader_request = request(Role::Reader, point.cpus.map(|c| c.1));
    let writer_request = request(Role::Writer, point.cpus.map(|c| c.0));
    // Declared before the apps, so that it is dropped (removed) after they were reaped.
    let group = point.cpu.map(|c| CpuGroup::create(c, "")).transpose()?;
    let place = Place::local();
    let mut reader =
        Peer::start::<Cycle>(&reader_request, &place).context("cannot start the reader process")?;
    let mut writer =
        Peer::start::<Cycle>(&writer_request, &place).context("cannot start the writer process")?;
    if let Some(g) = &group {
        for (peer, role) in [(&reader, Role::Reader), (&writer, Role::Writer)] {
            let Some(pid) = peer.pid() else {
                bail!(
                    "the {} runs on another machine: it cannot join the cgroup",
                    role.name()
                );
            };
            g.add(pid)
                .context(format!("cannot move the {} into the cgroup", role.name()))?;
            if !g.contains(pid) {
                bail!(
                    "the {} (pid {pid}) is not in {} after the move",
                    role.name(),
                    g.path().display()
                );
            }
        }
    }
    reader
        .send(&Command::Go)
        .context("cannot start the reader")?;
    writer
        .send(&Command::Go)
        .context("cannot start the writer")?;
    let r = wait_report(
        &mut reader,
        Role::Reader,
        reader_request.run_limit(),
        Some(&mut writer),
    )?;
    reader.finish(FINISH_TIMEOUT).context("the reader")?;
    // The reader is done: the writer may let its messages go.
    writer
        .send(&Command::Stop)
        .context("cannot stop the writer")?;
    let w = wait_report(&mut writer, Role::Writer, FINISH_TIMEOUT, None)?;
    writer.finish(FINISH_TIMEOUT).context("the writer")?;
    let throttling = group.as_ref().map(CpuGroup::throttling);
    let steal = steal_before
        .zip(crate::host_steal())
        .map(|(a, b)| b.saturating_sub(a));
    drop(group);

    let cycles = setup.cycles;
    let complete_percent = 100.0 * r.complete as f64 / cycles as f64;
    let mut reasons = Vec::new();
    if complete_percent < setup.success_percent {
        reasons.push(format!(
            "{} of {cycles} cycles complete ({complete_percent:.2} %)",
            r.complete
        ));
    }
    if r.corrupt > 0 {
        reasons.push(format!("{} corrupt messages", r.corrupt));
    }
    if w.overloads > 0 {
        reasons.push(format!("writer overload ({})", w.overloads));
    }
    if r.overloads > 0 {
        reasons.push(format!("reader overload ({})", r.overloads));
    }
    // Nanoseconds over an app's cycles, in µs per cycle.
    let per_cycle_us = |rep: &Report, ns: u64| {
        if rep.cycles == 0 {
            0.0
        } else {
            ns as f64 / rep.cycles as f64 / 1000.0
        }
    };
    Ok(Trial {
        multiplicity,
        success: reasons.is_empty(),
        reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
        complete_percent,
        complete: r.complete,
        corrupt: r.corrupt,
        writer_misses: w.misses,
        reader_misses: r.misses,
        writer_overloads: w.overloads,
        reader_overloads: r.overloads,
        writer_max_lateness_us: w.max_lateness_ns as f64 / 1000.0,
        reader_max_lateness_us: r.max_lateness_ns as f64 / 1000.0,
        writer_work_us_mean: per_cycle_us(&w, w.total_work_ns),
        reader_work_us_mean: per_cycle_us(&r, r.total_work_ns),
        writer_cpu_us_per_cycle: per_cycle_us(&w, w.cpu_ns),
        reader_cpu_us_per_cycle: per_cycle_us(&r, r.cpu_ns),
        host_steal_ms: steal.map(|d| d.as_secs_f64() * 1000.0),
        throttled_periods: throttling.map(|t| t.throttled_periods),
        throttled_ms: throttling.map(|t| t.throttled_ns as f64 / 1e6),
        void: false,
        seconds: started.elapsed().as_secs_f64(),
        warnings: r.warnings,
    })
}

/// Waits at most `timeout` for `peer`'s report, watching `other` (which must not end
/// meanwhile) and Ctrl-C.
fn wait_report(
    peer: &mut Peer,
    role: Role,
    timeout: Duration,
    mut other: Option<&mut Peer>,
) -> Result<Report> {
    let what = format!("the {}", role.name());
    let deadline = Instant::now() + timeout;
    loop {
        signal::check()?;
        if let Some(report) = peer
            .recv::<Report>(Duration::from_millis(5))
            .context(&what)?
        {
            return Ok(report);
        }
        if let Err(e) = peer.check_alive() {
            // A report that came with its last word is still queued.
            if let Some(report) = peer.recv::<Report>(Duration::ZERO).context(&what)? {
                return Ok(report);
            }
            return Err(e).context(format!("{what} sent no report"));
        }
        if let Some(o) = other.as_deref_mut() {
            let other_role = match role {
                Role::Reader => Role::Writer,
                Role::Writer => Role::Reader,
            };
            o.check_alive()
                .context(format!("the {}", other_role.name()))?;
        }
        if Instant::now() >= deadline {
            bail!(
                "the {} process did not finish within {timeout:?}",
                role.name()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The apps

fn qos(args: &PeerRequest) -> Result<Qos> {
    // A writer that finds the ring full (its reader is behind, say after a throttled quota
    // period) waits as it sleeps to its deadlines: without spinning, which the budget would pay
    // for, unless the apps spin (`--spin-us`), and then as long.
    let wait = if args.spin_ns == 0 {
        WaitStrategy::Block
    } else {
        WaitStrategy::Adaptive
    };
    let Some(q) = args.transport.qos(wait) else {
        bail!("cycle: {} is not a ferry transport", args.transport.name());
    };
    let q = q
        .spin_window(Duration::from_nanos(args.spin_ns))
        .delivery(args.delivery)
        .max_message_size((args.multiplicity() * 4).max(4))
        .send_timeout(Duration::from_secs(2));
    Ok(if args.transport.is_ferry_udp() {
        q.mtu(1500)
    } else {
        q
    })
}

fn cycle_of(args: &PeerRequest) -> ferry::Cycle {
    ferry::Cycle::new(args.period())
        .tolerance(Duration::from_nanos(args.tolerance_ns))
        .spin(Duration::from_nanos(args.spin_ns))
}

/// Element `i` of cycle `c`'s array.
#[inline]
fn fill(values: &mut [u32], c: u32) {
    for (i, v) in values.iter_mut().enumerate() {
        *v = c ^ i as u32;
    }
}

/// The cycle number if every element of `values` is right.
#[inline]
fn check(values: &[u32]) -> Option<u32> {
    let c = *values.first()?;
    let mut diff = 0u32;
    for (i, &v) in values.iter().enumerate() {
        diff |= v ^ (c ^ i as u32);
    }
    (diff == 0).then_some(c)
}

fn writer(args: &PeerRequest) -> Result<Report> {
    let node = Node::with_domain("lab-cycle-writer", &args.domain)?;
    let mut publisher = node.publisher(&args.topic, &qos(args)?)?;
    let deadline = Instant::now() + START_TIMEOUT;
    while publisher.subscriber_count() == 0 {
        signal::check()?;
        if Instant::now() >= deadline {
            bail!("the reader did not attach within {START_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let m = args.multiplicity();
    let mut sent = 0u64;
    let mut failure: Option<Error> = None;
    let mut aborted = false;
    let cpu_start = crate::process_cpu_time();
    let stats = cycle_of(args).run_for(args.cycles, |tick| {
        if tick.overloads > 0 {
            aborted = true;
            return ControlFlow::Break(());
        }
        let result = (|| -> Result<()> {
            signal::check()?;
            let mut loan = publisher.loan_slice::<u32>(m)?;
            fill(loan.as_mut_slice(), tick.index as u32);
            loan.send()?;
            Ok(())
        })();
        match result {
            Ok(()) => {
                sent += 1;
                ControlFlow::Continue(())
            }
            Err(e) => {
                failure = Some(e);
                ControlFlow::Break(())
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    // The end, three times a period apart (a UDP datagram can be dropped).
    for _ in 0..3 {
        publisher.send_slice(&[END])?;
        std::thread::sleep(args.period().min(Duration::from_millis(20)));
    }
    let mut report = Report::from_stats(&stats);
    report.cpu_ns = (crate::process_cpu_time() - cpu_start).as_nanos() as u64;
    report.aborted = aborted;
    report.messages = sent;
    Ok(report)
}

#[derive(Default)]
struct Tally {
    seen: Vec<bool>,
    messages: u64,
    complete: u64,
    corrupt: u64,
    duplicates: u64,
    skipped: u64,
    ended: bool,
    scratch: Vec<u32>,
}

impl Tally {
    fn take(&mut self, bytes: &[u8], aligned: Option<&[u32]>, skipped: u64, m: usize) {
        self.messages += 1;
        self.skipped = self.skipped.saturating_add(skipped);
        let values: &[u32] = match aligned {
            Some(v) => v,
            None => {
                self.scratch.clear();
                self.scratch.extend(
                    bytes
                        .chunks_exact(4)
                        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]])),
                );
                &self.scratch
            }
        };
        if values == [END] {
            self.ended = true;
            return;
        }
        if bytes.len() != m * 4 {
            self.corrupt += 1;
            return;
        }
        match check(values) {
            Some(c) if (c as usize) < self.seen.len() => {
                if self.seen[c as usize] {
                    self.duplicates += 1;
                } else {
                    self.seen[c as usize] = true;
                    self.complete += 1;
                }
            }
            _ => self.corrupt += 1,
        }
    }
}

fn reader(args: &PeerRequest, link: &mut PeerLink) -> Result<Report> {
    let node = Node::with_domain("lab-cycle-reader", &args.domain)?;
    let mut sub = node.subscriber(&args.topic, &qos(args)?)?;
    let m = args.multiplicity();
    let mut tally = Tally {
        // Checked: at most MAX_CYCLES.
        seen: vec![false; args.cycles as usize],
        ..Tally::default()
    };
    let period = args.period();
    let mut last = Instant::now();
    let mut first = true;
    let mut main_alive = link.watch();
    let mut failure: Option<Error> = None;
    let cpu_start = crate::process_cpu_time();
    let stats = cycle_of(args).run(|tick| {
        let result = (|| -> Result<bool> {
            signal::check()?;
            if tick.index % 64 == 0 {
                main_alive()?;
            }
            let mut got = false;
            while let Some(sample) = sub.try_recv()? {
                got = true;
                let skipped = sample.skipped();
                let aligned = sample.as_slice::<u32>().ok();
                tally.take(&sample, aligned, skipped, m);
            }
            let now = Instant::now();
            if got {
                first = false;
                last = now;
            }
            let idle = if first {
                START_TIMEOUT
            } else {
                IDLE_TIMEOUT + period * 3
            };
            Ok(tally.ended || now - last > idle)
        })();
        match result {
            Ok(false) => ControlFlow::Continue(()),
            Ok(true) => ControlFlow::Break(()),
            Err(e) => {
                failure = Some(e);
                ControlFlow::Break(())
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let mut report = Report::from_stats(&stats);
    report.cpu_ns = (crate::process_cpu_time() - cpu_start).as_nanos() as u64;
    report.messages = tally.messages;
    report.complete = tally.complete;
    report.corrupt = tally.corrupt;
    report.duplicates = tally.duplicates;
    report.ferry_skipped = tally.skipped;
    report.warnings = sub.warnings();
    Ok(report)
}

// ---------------------------------------------------------------------------------------------
// The table, the report's section and its summary

/// One line of the cycle plot: transport, CPU budget (None: unlimited), placement, cycle time.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Key {
    transport: Subject,
    cpu: Option<f64>,
    placement: Placement,
    cycle_ms: f64,
}

impl Key {
    fn placement_label(&self) -> String {
        format!(", {}", self.placement.label())
    }
}

/// A CPU budget for a label: "0.3 CPU", or "unlimited CPU".
fn cpu_label(cpu: Option<f64>) -> String {
    cpu.map_or("unlimited CPU".to_owned(), |c| format!("{c} CPU"))
}

/// The largest multiplicities per (transport, CPU budget, placement, cycle time), over the
/// repeats, in order of first appearance.
fn groups(rows: &[Row]) -> Vec<(Key, Vec<f64>)> {
    let mut groups: Vec<(Key, Vec<f64>)> = Vec::new();
    for r in rows {
        let key = Key {
            transport: r.transport,
            cpu: r.cpu,
            placement: r.placement,
            cycle_ms: r.cycle_ms,
        };
        let m = r.max_multiplicity as f64;
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => g.1.push(m),
            None => groups.push((key, vec![m])),
        }
    }
    groups
}

fn median_of(values: &[f64]) -> f64 {
    median(values.to_vec()).unwrap_or(0.0)
}

fn range_of(values: &[f64]) -> (f64, f64) {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    (lo, values.iter().copied().fold(lo, f64::max))
}

/// A made-up point and its row, for the tests: `m` passed, `m + 2` failed.
#[cfg(test)]
fn example_row(
    transport: Subject,
    placement: Placement,
    cycle_ms: f64,
    repeat: u32,
    m: u64,
) -> Row {
    let point = Point {
        transport,
        cycle_ms,
        cpu: Some(0.3),
        placement,
        cpus: (placement == Placement::OneCpu).then_some((1, 1)),
    };
    let trials = vec![
        Trial {
            multiplicity: m,
            success: true,
            complete_percent: 100.0,
            complete: 1000,
            ..Trial::default()
        },
        Trial {
            multiplicity: m + 2,
            success: false,
            reason: Some("990 of 1000 cycles complete (99.00 %)".to_owned()),
            complete_percent: 99.0,
            complete: 990,
            ..Trial::default()
        },
    ];
    build_row(&point, repeat, 1000, 4_000_000, (m, m + 2), trials)
}

/// Results of `rows`, as a run of the default configuration would record them.
#[cfg(test)]
fn example_results(rows: Vec<Row>) -> Results<Cycle> {
    let config = Config {
        cycle_ms: Some(vec![1.0]),
        ..Config::default()
    };
    let cgroup = CgroupSetup {
        used: true,
        version: Some(CgroupVersion::V2),
        dir: Some("/sys/fs/cgroup/ferry-lab-1".to_owned()),
        period_us: Some(cgroup::PERIOD_US),
        quota: None,
    };
    let setup = describe(&config, cgroup);
    Results::new(crate::Machine::probe(), config, Measured { setup, rows })
}

/// Results of a small made-up run, for the report's tests.
#[cfg(test)]
pub(crate) fn example() -> Results<Cycle> {
    example_results(vec![
        example_row(Subject::Shm, Placement::OneCpu, 1.0, 0, 500_000),
        example_row(Subject::Udp4, Placement::OneCpu, 1.0, 0, 100_000),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_and_check_agree() {
        let mut v = vec![0u32; 1000];
        fill(&mut v, 77);
        assert_eq!(check(&v), Some(77));
        v[999] ^= 1;
        assert_eq!(check(&v), None);
        assert_eq!(check(&[]), None);
    }

    #[test]
    fn only_a_failure_under_heavy_steal_is_void_and_only_twice() {
        let run = |success: bool, steal: Option<f64>| Trial {
            success,
            host_steal_ms: steal,
            writer_cpu_us_per_cycle: 150.0,
            reader_cpu_us_per_cycle: 100.0,
            ..Trial::default()
        };
        let budget = Some(300.0);
        assert!(void_for_steal(&run(false, Some(50.0)), 50.0, budget, 0));
        assert!(void_for_steal(&run(false, Some(900.0)), 50.0, budget, 1));
        assert!(void_for_steal(&run(false, Some(900.0)), 50.0, None, 0));
        // Twice at most: the third failure counts.
        assert!(!void_for_steal(&run(false, Some(900.0)), 50.0, budget, 2));
        // A pass always counts; so does a failure with little or unknown steal, with the rule
        // off, or one that needed more CPU than its budget.
        assert!(!void_for_steal(&run(true, Some(900.0)), 50.0, budget, 0));
        assert!(!void_for_steal(&run(false, Some(40.0)), 50.0, budget, 0));
        assert!(!void_for_steal(&run(false, None), 50.0, budget, 0));
        assert!(!void_for_steal(&run(false, Some(900.0)), 0.0, budget, 0));
        assert!(!void_for_steal(
            &run(false, Some(900.0)),
            50.0,
            Some(200.0),
            0
        ));
    }

    #[test]
    fn bisection_finds_the_largest_passing() {
        for truth in [0u64, 1, 2, 3, 500, 123_457, 999_999, 1_000_000] {
            let mut tests = Vec::new();
            let (good, bad) = bisect(
                1_000_000,
                |_| 2,
                |m| {
                    tests.push(m);
                    Ok(m <= truth)
                },
            )
            .unwrap();
            assert!(
                good <= truth && truth - good <= 2,
                "truth {truth}: got {good}"
            );
            assert!(bad > truth, "truth {truth}: bad {bad}");
            // The study's first test: half the limit.
            assert_eq!(tests[0], 500_000);
            assert!(tests.len() <= 22, "{} tests", tests.len());
        }
        // A relative resolution: within 2 % of the truth in fewer runs.
        let mut n = 0;
        let (good, _) = bisect(
            4_000_000,
            |g| stop_gap(g, 2.0),
            |m| {
                n += 1;
                Ok(m <= 700_000)
            },
        )
        .unwrap();
        assert!(good <= 700_000 && good as f64 >= 700_000.0 * 0.98, "{good}");
        assert!(n <= 10, "{n} runs");
        // Everything passes: the limit itself is tested and reported.
        let (good, bad) = bisect(4096, |g| stop_gap(g, 2.0), |_| Ok(true)).unwrap();
        assert_eq!((good, bad), (4096, 4097));
    }

    #[test]
    fn tally_counts_complete_cycles() {
        let mut t = Tally {
            seen: vec![false; 4],
            ..Tally::default()
        };
        let mut v = vec![0u32; 8];
        for c in [0, 1, 1, 3] {
            fill(&mut v, c);
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
            t.take(&bytes, Some(&v), 0, 8);
        }
        v[3] = 12_345;
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
        t.take(&bytes, None, 1, 8);
        assert_eq!(
            (t.complete, t.duplicates, t.corrupt, t.skipped),
            (3, 1, 1, 1)
        );
        assert!(!t.ended);
        t.take(&END.to_ne_bytes(), Some(&[END]), 0, 8);
        assert!(t.ended);
    }

    #[test]
    fn the_configuration_takes_the_study_where_not_given() {
        let plain = Config::default();
        assert_eq!(plain.cycle_times(), [1.0, 10.0]);
        assert_eq!(plain.budgets(), [Some(0.3)]);
        assert_eq!((plain.max(), plain.resolution_percent()), (4_000_000, 2.0));
        let study = Config {
            study: true,
            cpu: Some(vec![Budget(None)]),
            ..Config::default()
        };
        assert_eq!(study.cycle_times().len(), 10);
        assert_eq!(study.budgets(), [None]);
        assert_eq!((study.max(), study.resolution_percent()), (STUDY_MAX, 0.0));
        Cycle::validate(&plain).unwrap();
        let twice = Config {
            transport: vec![Subject::Shm, Subject::Shm],
            ..Config::default()
        };
        let err = Cycle::validate(&twice).unwrap_err().to_string();
        assert!(err.contains("--transport: shm is listed twice"), "{err}");
        let slow = Config {
            cycle_ms: Some(vec![20_000.0]),
            ..Config::default()
        };
        assert!(Cycle::validate(&slow)
            .unwrap_err()
            .to_string()
            .contains("--cycle-ms"));
        let cycle_twice = Config {
            cycle_ms: Some(vec![1.0, 1.0]),
            ..Config::default()
        };
        let err = Cycle::validate(&cycle_twice).unwrap_err().to_string();
        assert!(err.contains("--cycle-ms: 1 is listed twice"), "{err}");
        // The JSON names are the options'; values as the command line writes them.
        let v: Config = serde_json::from_value(serde_json::json!({
            "transport": ["udp4"], "cpu": [0.5, null], "placement": ["two-cpus"],
            "delivery": "reliable", "max_multiplicity": 4096
        }))
        .unwrap();
        assert_eq!(v.transport, [Subject::Udp4]);
        assert_eq!(v.budgets(), [Some(0.5), None]);
        assert_eq!(v.placement, [Placement::TwoCpus]);
        assert_eq!(v.delivery.for_transport(Subject::Shm), Delivery::Reliable);
        assert!(
            serde_json::from_value::<Config>(serde_json::json!({"transports": ["shm"]})).is_err()
        );
    }

    #[test]
    fn a_peer_request_out_of_bounds_is_refused() {
        let ok = PeerRequest {
            role: Role::Reader,
            transport: Subject::Shm,
            domain: "d".to_owned(),
            topic: "t".to_owned(),
            period_ns: 1_000_000,
            tolerance_ns: 100_000,
            spin_ns: 0,
            cycles: 1000,
            multiplicity: 4096,
            delivery: Delivery::Reliable,
            pin_cpu: None,
        };
        ok.check().unwrap();
        let bad = [
            PeerRequest {
                cycles: MAX_CYCLES + 1,
                ..ok.clone()
            },
            PeerRequest {
                multiplicity: MAX_MULTIPLICITY + 1,
                ..ok.clone()
            },
            PeerRequest {
                multiplicity: 0,
                ..ok.clone()
            },
            PeerRequest {
                period_ns: 0,
                ..ok.clone()
            },
            PeerRequest {
                spin_ns: u64::MAX,
                ..ok.clone()
            },
        ];
        for request in bad {
            assert!(request.check().is_err(), "{request:?}");
        }
    }

    #[test]
    fn example_results_read_back_and_draw() {
        let results = example();
        let value = serde_json::to_value(&results).unwrap();
        // The JSON of the results before the experiment was typed.
        assert_eq!(value["config"]["delivery"]["shm"], "reliable");
        assert_eq!(value["config"]["cgroup"]["period_us"], 100_000);
        assert_eq!(value["config"]["placements"][0], "one-cpu");
        assert_eq!(value["rows"][0]["transport"], "shm");
        assert_eq!(value["rows"][0]["placement"], "one-cpu");
        assert_eq!(value["rows"][0]["writer_cpu"], 1);
        assert_eq!(value["rows"][0]["min_failed"], 500_002);
        assert_eq!(value["rows"][0]["deadline_misses"], 0);
        let back = Results::<Cycle>::from_value(value).unwrap();
        assert_eq!(back.rows.len(), 2);
        assert_eq!(back.rows[1].transport, Subject::Udp4);
        assert_eq!(back.rows[1].bytes_per_cycle, 400_000);
        let section = Cycle::section(&back).unwrap();
        assert_eq!(section.plots.len(), 1);
        assert_eq!(section.plots[0].file, "cycle.svg");
        assert!(
            section.sentence.contains("shm/udp 5.0"),
            "{}",
            section.sentence
        );
        let table = Cycle::table(&back);
        assert!(
            table.contains("500000") && table.contains("one-cpu"),
            "{table}"
        );
        let summary = Cycle::summary(&back);
        assert_eq!(summary.len(), 2);
        assert_eq!(summary[0].ferry, "500 000 u32");
        assert!(
            summary[0].what.contains("shared memory"),
            "{:?}",
            summary[0]
        );
        assert!(summary[0]
            .study
            .as_deref()
            .is_some_and(|s| s.starts_with("over 200 000 u32") && s.contains(DOMINION.authors)));
        assert!(summary[1]
            .study
            .as_deref()
            .is_some_and(|s| s.starts_with("under 200 000 u32")));
    }

    #[test]
    fn cycle_plots_the_median_over_repeats_beside_the_study() {
        let row = |t, place, ms, repeat, m| example_row(t, place, ms, repeat, m);
        use Placement::{OneCpu, Scheduler};
        use Subject::{Shm, Udp4 as Udp};
        let rows = vec![
            row(Shm, OneCpu, 1.0, 0, 500_000),
            row(Shm, OneCpu, 1.0, 1, 600_000),
            row(Shm, OneCpu, 1.0, 2, 550_000),
            row(Udp, OneCpu, 1.0, 0, 110_000),
            row(Shm, Scheduler, 1.0, 0, 400_000),
            row(Udp, Scheduler, 1.0, 0, 80_000),
            row(Shm, OneCpu, 10.0, 0, 900_000),
        ];
        let sec = Cycle::section(&example_results(rows)).unwrap();
        assert_eq!(sec.plots.len(), 1);
        assert_eq!(sec.plots[0].file, "cycle.svg");
        for label in [
            "shm, 0.3 CPU, both apps on one CPU",
            "udp4, 0.3 CPU, placed by the kernel",
            &format!("{}: shm, 1 ms, 0.3 CPU", DOMINION.short),
            "cycle time (ms)",
        ] {
            assert!(sec.plots[0].svg.contains(label), "{label} missing");
        }
        // The sentence: the median per placement, its ratio to the study and to udp.
        for part in [
            "shm at 1 ms, 0.3 CPU, both apps on one CPU: 550 000 u32 (2.75 × the study's 200 000), udp 110 000 u32, shm/udp 5.0 (medians of 3 repeats)",
            "shm at 1 ms, 0.3 CPU, placed by the kernel: 400 000 u32 (2.00 × the study's 200 000), udp 80 000 u32, shm/udp 5.0",
            "shm at 10 ms, 0.3 CPU, both apps on one CPU: 900 000 u32",
        ] {
            assert!(sec.sentence.contains(part), "{part:?} missing from {}", sec.sentence);
        }
    }

    #[test]
    fn cycle_at_one_cycle_time_is_a_bar_per_placement() {
        let row = |t, place, repeat, m| example_row(t, place, 1.0, repeat, m);
        use Placement::{OneCpu, Scheduler};
        use Subject::{Shm, Udp4 as Udp};
        let mut first = row(Shm, OneCpu, 0, 500_000);
        first.trials = vec![
            Trial {
                multiplicity: 500_000,
                success: false,
                void: true,
                ..Trial::default()
            },
            Trial {
                multiplicity: 500_000,
                success: true,
                void: false,
                ..Trial::default()
            },
        ];
        let rows = vec![
            first,
            row(Udp, OneCpu, 0, 90_000),
            row(Shm, Scheduler, 0, 350_000),
            row(Udp, Scheduler, 0, 80_000),
            row(Shm, OneCpu, 1, 560_000),
            row(Udp, OneCpu, 1, 95_000),
            row(Shm, Scheduler, 1, 380_000),
            row(Udp, Scheduler, 1, 70_000),
        ];
        let sec = Cycle::section(&example_results(rows)).unwrap();
        assert_eq!(sec.plots.len(), 1);
        let svg = &sec.plots[0].svg;
        for label in [
            "Largest multiplicity at 1 ms",
            "both apps on one CPU",
            "placed by the kernel",
            "shm, 0.3 CPU",
            "udp4, 0.3 CPU",
            &format!("{}: shm, 1 ms, 0.3 CPU", DOMINION.short),
            "530000",
        ] {
            assert!(svg.contains(label), "{label} missing");
        }
        let caption = &sec.plots[0].caption;
        for part in [
            "shm, both apps on one CPU 500 000–560 000",
            "udp4, placed by the kernel 70 000–80 000",
            "1 run(s) failed while the host stole CPU time",
        ] {
            assert!(caption.contains(part), "{part:?} missing from {caption}");
        }
    }
}
