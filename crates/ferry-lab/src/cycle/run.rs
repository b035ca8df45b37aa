//! The main side: every configuration of the sweep, each in its own pair of peer processes.

use super::apps::trial;
use super::options::{Config, Point};
use super::results::{CgroupSetup, CgroupVersion, PerTransport, Row, Setup, Trial};
use crate::cgroup::{self};
use crate::error::{bail, note, Result};
use crate::subject::Subject;

/// Finds the largest multiplicity that passes at `point`.
pub(super) fn bisection(
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
pub(super) fn build_row(
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
pub(super) fn setup_of(config: &Config) -> Result<Setup> {
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

pub(super) fn describe(config: &Config, cgroup: CgroupSetup) -> Setup {
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
pub(super) const MAX_STEAL_RETRIES: u32 = 2;

/// Whether a run is void: it failed although the two apps used no more CPU per cycle than the
/// budget gives (`budget_us`, None: unlimited), while the host stole at least `limit_ms` (0:
/// never), and `voided` earlier runs of this multiplicity leave room for another. A run that
/// needed more than its budget failed on its own account, steal or not.
pub(super) fn void_for_steal(
    t: &Trial,
    limit_ms: f64,
    budget_us: Option<f64>,
    voided: u32,
) -> bool {
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
pub(super) fn stop_gap(good: u64, resolution_percent: f64) -> u64 {
    ((good as f64 * resolution_percent / 100.0) as u64).max(2)
}

/// Binary search for the largest `m` in 1..=max with `test(m)` true, assuming monotony. Returns
/// (largest good, smallest bad): (0, _) when nothing passed, (_, max + 1) when max passed.
pub(super) fn bisect(
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
