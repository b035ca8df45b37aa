//! What the experiment is asked for (its options and subjects), its limits and timeouts, and
//! the settings every part of it shares: the bottom floor, which imports no other part.

use crate::cgroup::{self};
use crate::error::{bail, Result};
use crate::subject::{Subject, Subjects};
use ferry::Delivery;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

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
    pub(super) fn label(self) -> &'static str {
        match self {
            Placement::OneCpu => "both apps on one CPU",
            Placement::TwoCpus => "one CPU each",
            Placement::Scheduler => "placed by the kernel",
        }
    }

    /// The writer's and the reader's CPU, or `None` when the kernel places them.
    pub(super) fn cpus(self, allowed: &[usize]) -> Result<Option<(usize, usize)>> {
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
    pub(super) fn for_transport(self, t: Subject) -> Delivery {
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
pub(super) const STUDY_CYCLE_MS: &[f64] = &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
pub(super) const STUDY_CPU: &[f64] = &[0.3, 1.5];
pub(super) const STUDY_MAX: u64 = 1_000_000;
/// The study's shared-memory figure at 1 ms and 0.3 CPU: over 200 000 u32 (and UDP's below).
pub(super) const STUDY_SHM_U32: f64 = 200_000.0;

/// The bounds of a configuration, and of a peer request (which may come from another machine
/// through an agent).
pub(super) const MAX_CYCLES: u64 = 10_000_000;
pub(super) const MAX_MULTIPLICITY: u64 = 256 * 1024 * 1024;
pub(super) const MIN_CYCLE_MS: f64 = 0.05;
pub(super) const MAX_CYCLE_MS: f64 = 10_000.0;
pub(super) const MAX_SPIN_US: u64 = 1_000_000;

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
    pub(super) fn cycle_times(&self) -> Vec<f64> {
        match (&self.cycle_ms, self.study) {
            (Some(list), _) => list.clone(),
            (None, true) => STUDY_CYCLE_MS.to_vec(),
            (None, false) => vec![1.0, 10.0],
        }
    }

    /// CPUs per budget, `None`: unlimited.
    pub(super) fn budgets(&self) -> Vec<Option<f64>> {
        match (&self.cpu, self.study) {
            (Some(list), _) => list.iter().map(|b| b.0).collect(),
            (None, true) => STUDY_CPU.iter().map(|&c| Some(c)).collect(),
            (None, false) => vec![Some(0.3)],
        }
    }

    pub(super) fn max(&self) -> u64 {
        self.max_multiplicity
            .unwrap_or(if self.study { STUDY_MAX } else { 4_000_000 })
    }

    pub(super) fn resolution_percent(&self) -> f64 {
        self.resolution
            .unwrap_or(if self.study { 0.0 } else { 2.0 })
    }
}

/// The experiment (see the module's documentation).
pub struct Cycle;

/// One bisection's fixed parameters.
#[derive(Debug, Clone, Copy)]
pub(super) struct Point {
    pub(super) transport: Subject,
    pub(super) cycle_ms: f64,
    pub(super) cpu: Option<f64>,
    pub(super) placement: Placement,
    /// The writer's and the reader's CPU, `None`: placed by the kernel.
    pub(super) cpus: Option<(usize, usize)>,
}

impl Point {
    pub(super) fn period(&self) -> Duration {
        Duration::from_secs_f64(self.cycle_ms / 1000.0)
    }

    /// For the progress lines: "shm 1 ms cpu 0.3 one-cpu".
    pub(super) fn describe(&self) -> String {
        format!(
            "{} {} ms cpu {} {}",
            self.transport.name(),
            self.cycle_ms,
            self.cpu.map_or("none".to_owned(), |c| c.to_string()),
            self.placement.name()
        )
    }
}
