//! What a run records: its setup, and a row per transport, CPU budget, placement and cycle time.

use super::options::Placement;
use crate::cgroup::{self};
use crate::subject::Subject;
use ferry::{CycleStats, Delivery};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::time::Duration;

/// How a cycle run was made: the settings after `--study` and the defaults, and the rules.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Setup {
    pub(super) transports: Vec<Subject>,
    pub(super) cycle_ms: Vec<f64>,
    /// null: unlimited.
    pub(super) cpu: Vec<Option<f64>>,
    pub(super) cycles: u64,
    pub(super) success_percent: f64,
    pub(super) repeat: u32,
    pub(super) max_multiplicity: u64,
    pub(super) resolution_percent: f64,
    pub(super) bisection: String,
    pub(super) success_rule: String,
    pub(super) steal_rule: String,
    pub(super) overload_rule: String,
    pub(super) deadline_miss: String,
    /// Per transport.
    #[schemars(with = "PerTransport<crate::args::DeliverySchema>")]
    pub(super) delivery: PerTransport<Delivery>,
    /// How each transport carries one cycle's array.
    pub(super) unit: PerTransport<String>,
    pub(super) spin_us: u64,
    pub(super) tolerance_percent: f64,
    pub(super) cgroup: CgroupSetup,
    pub(super) placements: Vec<Placement>,
    pub(super) placement_rule: String,
    pub(super) study: bool,
}

impl Setup {
    /// "delivery shm …, udp …": each transport's delivery, as the progress note and the table
    /// say them.
    pub(super) fn deliveries(&self) -> String {
        format!(
            "delivery shm {}, udp {}",
            self.delivery.shm.name(),
            self.delivery.udp.name()
        )
    }
}

/// One value for each transport.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct PerTransport<T> {
    pub(super) shm: T,
    pub(super) udp: T,
}

/// The cgroup interface of this machine, and the group the runs used.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct CgroupSetup {
    pub(super) used: bool,
    /// null: this machine has no cgroup CPU controller.
    pub(super) version: Option<CgroupVersion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) period_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) quota: Option<String>,
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
    pub(super) fn outcome(&self) -> String {
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
pub(super) struct Report {
    pub(super) cycles: u64,
    pub(super) misses: u64,
    pub(super) overloads: u64,
    pub(super) skipped: u64,
    pub(super) max_lateness_ns: u64,
    pub(super) mean_lateness_ns: f64,
    pub(super) max_backlog: u64,
    pub(super) max_work_ns: u64,
    pub(super) total_work_ns: u64,
    /// CPU time (all threads, user and system) used while cycling.
    pub(super) cpu_ns: u64,
    /// The writer stopped at an overload.
    pub(super) aborted: bool,
    /// Writer: messages sent. Reader: messages taken.
    pub(super) messages: u64,
    /// Reader: distinct cycles that arrived complete and intact.
    pub(super) complete: u64,
    pub(super) corrupt: u64,
    pub(super) duplicates: u64,
    /// Reader: messages ferry said were skipped (latest delivery) or lost.
    pub(super) ferry_skipped: u64,
    pub(super) warnings: Vec<String>,
}

impl Report {
    pub(super) fn from_stats(s: &CycleStats) -> Report {
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
pub(super) const END: u32 = u32::MAX;
/// How long the writer waits for its reader to attach, and the reader for its first message.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(10);
/// The reader gives up when nothing arrived for this long (plus a few periods) after the start.
pub(super) const IDLE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long an app waits to be told to start (the main side moves it into its cgroup first).
pub(super) const GO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the main side waits for an app that is done to say so and exit.
pub(super) const FINISH_TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
