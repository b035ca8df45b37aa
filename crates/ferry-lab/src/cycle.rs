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

use crate::chart::{bar_svg, color, format_thousands, xy_chart, Bars, Plot, Section, SummaryLine};
use crate::error::{bail, note, Result};
use crate::experiment::{head, Experiment, Measured, Results};
use crate::peer::PeerLink;
use crate::studies::{cite, cite_first, DOMINION};
use crate::subject::Subject;
use crate::table::Table;
use report::*;
use run::*;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

mod apps;
mod options;
mod report;
mod results;
mod run;

pub use apps::*;
pub use options::*;
pub use results::*;

impl Experiment for Cycle {
    head!("cycle", "Largest array per cycle under a CPU budget");

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
            "cycle: {} cycles per run, success at {} %, multiplicity up to {}, {}",
            setup.cycles,
            setup.success_percent,
            setup.max_multiplicity,
            setup.deliveries(),
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
            "\nLargest multiplicity (u32 elements per cycle) with at least {} % of {} cycles complete and no overload, up to {}; {}.\n\n{}",
            setup.success_percent,
            setup.cycles,
            setup.max_multiplicity,
            setup.deliveries(),
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
        // The plot and the start of its caption: bars at one cycle time, lines across several.
        let drawn = if let [ms] = cycle_times[..] {
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
            Some((svg, caption))
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
            let caption = format!("Median over the repeats of the largest multiplicity that passed (≥ 99.95 % complete cycles, no overload); the bar spans the repeats. The point of {}: over 200 000 u32 over shared memory at 1 ms and 0.3 CPU.", cite(&DOMINION));
            Some((svg, caption))
        } else {
            None
        };
        let mut plots = Vec::new();
        if let Some((svg, mut caption)) = drawn {
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
        period_us: Some(crate::cgroup::PERIOD_US),
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
mod tests;
