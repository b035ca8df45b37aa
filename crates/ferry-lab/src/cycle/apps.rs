//! One run: the two cyclic apps (peer processes), their messages and what they report.

use super::options::{
    Config, Cycle, Point, MAX_CYCLES, MAX_CYCLE_MS, MAX_MULTIPLICITY, MAX_SPIN_US, MIN_CYCLE_MS,
    SUBJECTS,
};
use super::results::{Report, Setup, Trial, END, FINISH_TIMEOUT, IDLE_TIMEOUT, START_TIMEOUT};
use crate::cgroup::CpuGroup;
use crate::error::{bail, Context, Error, Result};
use crate::peer::{Peer, PeerLink, Place};
use crate::signal;
use crate::subject::Subject;
use ferry::{Delivery, Node, Qos, WaitStrategy};
use serde::{Deserialize, Serialize};
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

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
pub(super) enum Command {
    /// It is in its cgroup: start cycling.
    Go,
    /// (To the writer.) The reader is done: let the messages go and exit.
    Stop,
}

/// What the main side asks of an app.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerRequest {
    pub(super) role: Role,
    pub(super) transport: Subject,
    pub(super) domain: String,
    pub(super) topic: String,
    pub(super) period_ns: u64,
    pub(super) tolerance_ns: u64,
    pub(super) spin_ns: u64,
    pub(super) cycles: u64,
    pub(super) multiplicity: u64,
    pub(super) delivery: Delivery,
    /// Pin this app to this CPU before it starts.
    pub(super) pin_cpu: Option<usize>,
}

impl PeerRequest {
    /// Refuses a request out of the bounds a configuration has (it may come from another
    /// machine, through an agent).
    pub(super) fn check(&self) -> Result<()> {
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

    pub(super) fn multiplicity(&self) -> usize {
        // Checked: at most MAX_MULTIPLICITY.
        self.multiplicity as usize
    }

    pub(super) fn period(&self) -> Duration {
        Duration::from_nanos(self.period_ns)
    }

    /// How long the main side may wait for the reader: the longest a run may take.
    pub(super) fn run_limit(&self) -> Duration {
        let run_time = self.period() * u32::try_from(self.cycles).unwrap_or(u32::MAX);
        START_TIMEOUT * 2 + run_time * 3 + IDLE_TIMEOUT
    }
}

/// One run (see `run_trial`), and then whatever it left in `domain`: apps killed on an error or
/// Ctrl-C leave their shared memory behind.
pub(super) fn trial(
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

pub(super) fn run_trial(
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
pub(super) fn wait_report(
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

pub(super) fn qos(args: &PeerRequest) -> Result<Qos> {
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

pub(super) fn cycle_of(args: &PeerRequest) -> ferry::Cycle {
    ferry::Cycle::new(args.period())
        .tolerance(Duration::from_nanos(args.tolerance_ns))
        .spin(Duration::from_nanos(args.spin_ns))
}

/// Element `i` of cycle `c`'s array.
#[inline]
pub(super) fn fill(values: &mut [u32], c: u32) {
    for (i, v) in values.iter_mut().enumerate() {
        *v = c ^ i as u32;
    }
}

/// The cycle number if every element of `values` is right.
#[inline]
pub(super) fn check(values: &[u32]) -> Option<u32> {
    let c = *values.first()?;
    let mut diff = 0u32;
    for (i, &v) in values.iter().enumerate() {
        diff |= v ^ (c ^ i as u32);
    }
    (diff == 0).then_some(c)
}

pub(super) fn writer(args: &PeerRequest) -> Result<Report> {
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
pub(super) struct Tally {
    pub(super) seen: Vec<bool>,
    pub(super) messages: u64,
    pub(super) complete: u64,
    pub(super) corrupt: u64,
    pub(super) duplicates: u64,
    pub(super) skipped: u64,
    pub(super) ended: bool,
    pub(super) scratch: Vec<u32>,
}

impl Tally {
    pub(super) fn take(&mut self, bytes: &[u8], aligned: Option<&[u32]>, skipped: u64, m: usize) {
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

pub(super) fn reader(args: &PeerRequest, link: &mut PeerLink) -> Result<Report> {
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
