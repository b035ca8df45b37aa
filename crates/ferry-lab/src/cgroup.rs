//! A real CPU budget for the lab's processes: a cgroup with a CFS quota, as Docker's `--cpus`
//! sets it (period 100 ms, quota = CPUs × period). cgroup v1 (`cpu` controller:
//! `cpu.cfs_period_us`, `cpu.cfs_quota_us`) and v2 (`cpu.max`) are both handled. The group is
//! removed when the guard is dropped (after an error or Ctrl-C too); its processes must have
//! exited by then.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{bail, Context, Result};

/// Docker's CFS period.
pub const PERIOD_US: u64 = 100_000;

const ROOT: &str = "/sys/fs/cgroup";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Version {
    V1,
    V2,
}

/// Which cgroup interface this machine has for the CPU controller, if any.
pub fn detect() -> Option<Version> {
    if Path::new(ROOT).join("cpu/cpu.cfs_quota_us").exists() {
        Some(Version::V1)
    } else if Path::new(ROOT).join("cgroup.controllers").exists() {
        Some(Version::V2)
    } else {
        None
    }
}

/// A cgroup limited to `cpus` CPUs, removed on drop.
#[derive(Debug)]
pub struct CpuGroup {
    dir: PathBuf,
    version: Version,
}

/// Throttling counts from `cpu.stat`.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Throttling {
    pub periods: u64,
    pub throttled_periods: u64,
    pub throttled_ns: u64,
}

impl CpuGroup {
    /// Creates `ferry-lab-<pid>` (with `tag` appended when not empty) limited to `cpus`.
    pub fn create(cpus: f64, tag: &str) -> Result<CpuGroup> {
        if !(cpus > 0.0 && cpus <= 1024.0) {
            bail!("a CPU limit must be above 0 (got {cpus})");
        }
        let quota_us = ((cpus * PERIOD_US as f64).round() as u64).max(1000);
        let Some(version) = detect() else {
            bail!(
                "no cgroup CPU controller at {ROOT} (neither v1 cpu/cpu.cfs_quota_us nor v2 \
                 cgroup.controllers): cannot limit the CPU; use --cpu none to run unlimited"
            );
        };
        let name = if tag.is_empty() {
            format!("ferry-lab-{}", std::process::id())
        } else {
            format!("ferry-lab-{}-{tag}", std::process::id())
        };
        let parent = match version {
            Version::V1 => Path::new(ROOT).join("cpu"),
            Version::V2 => PathBuf::from(ROOT),
        };
        let dir = parent.join(name);
        if version == Version::V2 {
            // The cpu controller must be enabled for the children of the root; best effort (it
            // fails harmlessly when it already is, and the write of cpu.max says the rest).
            let _ = std::fs::write(parent.join("cgroup.subtree_control"), "+cpu");
        }
        if let Err(e) = std::fs::create_dir(&dir) {
            let hint = if e.kind() == std::io::ErrorKind::PermissionDenied
                || e.raw_os_error() == Some(libc::EROFS)
            {
                " (needs root and a writable cgroup filesystem; use --cpu none to run unlimited)"
            } else {
                ""
            };
            bail!("cannot create the cgroup {}: {e}{hint}", dir.display());
        }
        // From here on the guard removes the directory.
        let group = CpuGroup { dir, version };
        match version {
            Version::V1 => {
                group.write("cpu.cfs_period_us", &PERIOD_US.to_string())?;
                group.write("cpu.cfs_quota_us", &quota_us.to_string())?;
            }
            Version::V2 => group.write("cpu.max", &format!("{quota_us} {PERIOD_US}"))?,
        }
        Ok(group)
    }

    fn write(&self, file: &str, value: &str) -> Result<()> {
        let path = self.dir.join(file);
        std::fs::write(&path, value)
            .context(format!("cannot write {value:?} to {}", path.display()))
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Moves process `pid` (all its threads) into the group.
    pub fn add(&self, pid: u32) -> Result<()> {
        self.write("cgroup.procs", &pid.to_string())
    }

    /// Whether process `pid` is in this group (from `/proc/<pid>/cgroup`).
    pub fn contains(&self, pid: u32) -> bool {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            return false;
        };
        let Some(name) = self.dir.file_name().and_then(|n| n.to_str()) else {
            return false;
        };
        text.lines().any(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
            let cpu = match self.version {
                Version::V1 => controllers.is_some_and(|c| c.split(',').any(|c| c == "cpu")),
                Version::V2 => controllers == Some(""),
            };
            cpu && path.is_some_and(|p| p.trim_end().ends_with(&format!("/{name}")))
        })
    }

    /// The throttling counts so far.
    pub fn throttling(&self) -> Throttling {
        let text = std::fs::read_to_string(self.dir.join("cpu.stat")).unwrap_or_default();
        let get = |key: &str| {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == key).then(|| v.trim().parse::<u64>().ok())?
            })
        };
        Throttling {
            periods: get("nr_periods").unwrap_or(0),
            throttled_periods: get("nr_throttled").unwrap_or(0),
            throttled_ns: get("throttled_time")
                .or_else(|| get("throttled_usec").map(|us| us * 1000))
                .unwrap_or(0),
        }
    }
}

impl Drop for CpuGroup {
    fn drop(&mut self) {
        // A process that just exited may stay listed for a moment: retry briefly.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match std::fs::remove_dir(&self.dir) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(e) => {
                    if Instant::now() >= deadline {
                        eprintln!(
                            "ferry lab: cannot remove the cgroup {}: {e}",
                            self.dir.display()
                        );
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
}

/// Parses a CPU budget: a number of CPUs (0.05 … 1.5 in the study), or `none`.
pub fn parse_cpu(text: &str) -> Result<Option<f64>, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    match t.parse::<f64>() {
        Ok(v) if (0.01..=1024.0).contains(&v) => Ok(Some(v)),
        _ => Err(format!(
            "invalid CPU budget {text:?}: a number of CPUs from 0.01 (such as 0.3 or 1.5), or none"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_budgets() {
        assert_eq!(parse_cpu("none"), Ok(None));
        assert_eq!(parse_cpu("0.3"), Ok(Some(0.3)));
        assert_eq!(parse_cpu("1.5"), Ok(Some(1.5)));
        for bad in ["", "0", "-1", "x", "0.001", "nan"] {
            assert!(parse_cpu(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
