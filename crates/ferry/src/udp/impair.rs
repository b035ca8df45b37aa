//! Impairment injection: loss (independent or bursty), duplication, reordering, delay and jitter,
//! applied by ferry itself on send or on receive. This kernel has no `tc netem`, so the program
//! has to do it. Pure: no I/O, no clock; the caller passes the time in, and every decision comes
//! from a seeded PRNG, so a run is reproducible from its seed.
//!
//! ```text
//! FERRY_IMPAIR="loss=5%,burst=0.01/0.3/0.5,dup=1%,reorder=2%/200us,delay=1ms,jitter=100us,seed=42,dir=send"
//! ```
//!
//! API:
//! - [`ImpairConfig`]: what to inject. [`ImpairConfig::parse`] (of `FERRY_IMPAIR`, which
//!   `NodeConfig::from_env` reads, or of `Impairment::parse`), [`ImpairConfig::is_active`]; its
//!   `Display` writes a spec that parses back to the same configuration. A node's configuration
//!   carries it to the node's UDP endpoints.
//! - [`Impairer`]: [`Impairer::admit`]`(now_ns, len) -> `[`Verdict`] decides the fate of one
//!   datagram; [`Impairer::stats`] counts what it did.
//! - [`DelayQueue`]: holds delayed datagrams until their time, bounded in count and bytes;
//!   [`DelayQueue::push`], [`DelayQueue::pop_due`], [`DelayQueue::next_due`].
//!
//! Semantics, per datagram, in this order:
//! 1. Loss. Without `burst`, each datagram is lost with probability `loss`. With
//!    `burst=P_GB/P_BG/L_BAD` a Gilbert–Elliott chain runs: before each datagram the state moves
//!    good→bad with probability P_GB and bad→good with P_BG; a datagram is lost with probability
//!    `loss` in the good state and L_BAD in the bad state. The mean burst (bad-state) length is
//!    1/P_BG datagrams; the long-run loss rate is `loss·πg + L_BAD·πb` with
//!    πb = P_GB/(P_GB+P_BG).
//! 2. Duplication: a delivered datagram is delivered twice with probability `dup`.
//! 3. Delay: each copy is released at `now + delay + U(-jitter, +jitter)`, never before `now`.
//! 4. Reordering: with probability `reorder` the datagram (all its copies) is held back a further
//!    `reorder_delay`, so later datagrams overtake it.
//!
//! Every call to [`Impairer::admit`] draws the same number of random numbers whatever happens,
//! so the loss pattern for a seed does not change when duplication or reordering are turned on.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// The accepted syntax, quoted in every parse error.
pub const SYNTAX: &str =
    "comma-separated key=value pairs: loss=P, burst=P_GB/P_BG[/P_LOSS_IN_BAD], \
dup=P, reorder=P[/DELAY], delay=DELAY, jitter=DELAY, seed=N, dir=send|receive|both; \
P is a fraction 0..1 or a percentage 0%..100% (5% = 0.05), DELAY is a number with a unit \
ns, us, ms or s (200us, 1.5ms); e.g. \"loss=5%,reorder=2%/200us,seed=42\"";

/// The reorder hold-back used when a spec says `reorder=P` without a delay.
pub const DEFAULT_REORDER_DELAY: Duration = Duration::from_millis(1);

/// Where impairments apply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Direction {
    /// Datagrams this process sends (the default: each datagram is impaired once, by its sender).
    #[default]
    Send,
    /// Datagrams this process receives (each receiver of a multicast decides on its own).
    Receive,
    /// Both. Two processes both set to `both` impair each datagram twice.
    Both,
}

impl Direction {
    pub fn on_send(self) -> bool {
        matches!(self, Direction::Send | Direction::Both)
    }

    pub fn on_receive(self) -> bool {
        matches!(self, Direction::Receive | Direction::Both)
    }

    fn as_str(self) -> &'static str {
        match self {
            Direction::Send => "send",
            Direction::Receive => "receive",
            Direction::Both => "both",
        }
    }
}

/// Gilbert–Elliott burst-loss parameters (probabilities in 0..=1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Burst {
    /// Probability, per datagram, of moving from the good to the bad state.
    pub p_good_to_bad: f64,
    /// Probability, per datagram, of moving from the bad to the good state.
    pub p_bad_to_good: f64,
    /// Loss probability while in the bad state.
    pub loss_in_bad: f64,
}

/// What to inject. `Default` injects nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct ImpairConfig {
    /// Loss probability (in the good state when `burst` is set).
    pub loss: f64,
    pub burst: Option<Burst>,
    /// Probability that a delivered datagram is delivered twice.
    pub duplicate: f64,
    /// Probability that a datagram is held back by `reorder_delay`.
    pub reorder: f64,
    pub reorder_delay: Duration,
    /// Constant delay added to every datagram.
    pub delay: Duration,
    /// Each copy's delay varies uniformly within ±jitter (never releasing before `now`).
    pub jitter: Duration,
    pub seed: u64,
    pub direction: Direction,
}

impl Default for ImpairConfig {
    fn default() -> Self {
        ImpairConfig {
            loss: 0.0,
            burst: None,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            seed: 0,
            direction: Direction::Send,
        }
    }
}

/// A spec that could not be parsed: what was wrong, and the syntax that is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad impairment spec {item:?}: {reason}; expected {SYNTAX}")]
pub struct ImpairParseError {
    /// The offending `key=value` item (or the whole spec).
    pub item: String,
    pub reason: String,
}

impl ImpairParseError {
    fn new(item: &str, reason: impl Into<String>) -> Self {
        ImpairParseError {
            item: item.to_owned(),
            reason: reason.into(),
        }
    }
}

impl ImpairConfig {
    /// Parses a spec such as `loss=5%,burst=0.01/0.3/0.5,dup=1%,reorder=2%/200us,delay=1ms,
    /// jitter=100us,seed=42,dir=send` (see [`SYNTAX`]). Keys may come in any order, each at most
    /// once; `duplicate` and `direction` are accepted as long forms of `dup` and `dir`. An empty
    /// spec (or `off`/`none`) is the default, inactive configuration.
    pub fn parse(spec: &str) -> Result<ImpairConfig, ImpairParseError> {
        let mut cfg = ImpairConfig::default();
        let trimmed = spec.trim();
        if trimmed.is_empty()
            || trimmed.eq_ignore_ascii_case("off")
            || trimmed.eq_ignore_ascii_case("none")
        {
            return Ok(cfg);
        }
        let mut seen: Vec<&'static str> = Vec::new();
        for raw in trimmed.split(',') {
            let item = raw.trim();
            if item.is_empty() {
                return Err(ImpairParseError::new(
                    spec,
                    "empty item (two commas in a row, or a trailing comma)",
                ));
            }
            let Some((key, value)) = item.split_once('=') else {
                return Err(ImpairParseError::new(
                    item,
                    "missing '=' between key and value",
                ));
            };
            let (key, value) = (key.trim(), value.trim());
            let canonical: &'static str = match key.to_ascii_lowercase().as_str() {
                "loss" => "loss",
                "burst" => "burst",
                "dup" | "duplicate" => "dup",
                "reorder" => "reorder",
                "delay" => "delay",
                "jitter" => "jitter",
                "seed" => "seed",
                "dir" | "direction" => "dir",
                _ => return Err(ImpairParseError::new(item, format!("unknown key {key:?}"))),
            };
            if seen.contains(&canonical) {
                return Err(ImpairParseError::new(
                    item,
                    format!("key {canonical:?} given twice"),
                ));
            }
            seen.push(canonical);
            match canonical {
                "loss" => cfg.loss = parse_prob(item, value)?,
                "dup" => cfg.duplicate = parse_prob(item, value)?,
                "delay" => cfg.delay = parse_duration(item, value)?,
                "jitter" => cfg.jitter = parse_duration(item, value)?,
                "burst" => {
                    let parts: Vec<&str> = value.split('/').collect();
                    if !(2..=3).contains(&parts.len()) {
                        return Err(ImpairParseError::new(
                            item,
                            "burst takes P_GB/P_BG or P_GB/P_BG/P_LOSS_IN_BAD",
                        ));
                    }
                    let p_good_to_bad = parse_prob(item, parts[0])?;
                    let p_bad_to_good = parse_prob(item, parts[1])?;
                    let loss_in_bad = match parts.get(2) {
                        Some(p) => parse_prob(item, p)?,
                        None => 1.0,
                    };
                    cfg.burst = Some(Burst {
                        p_good_to_bad,
                        p_bad_to_good,
                        loss_in_bad,
                    });
                }
                "reorder" => match value.split_once('/') {
                    Some((p, d)) => {
                        cfg.reorder = parse_prob(item, p)?;
                        cfg.reorder_delay = parse_duration(item, d)?;
                    }
                    None => {
                        cfg.reorder = parse_prob(item, value)?;
                        cfg.reorder_delay = DEFAULT_REORDER_DELAY;
                    }
                },
                "seed" => {
                    let v = value.replace('_', "");
                    let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
                        Some(hex) => u64::from_str_radix(hex, 16),
                        None => v.parse::<u64>(),
                    };
                    cfg.seed = parsed.map_err(|_| {
                        ImpairParseError::new(
                            item,
                            format!("seed {value:?} is not an unsigned 64-bit integer"),
                        )
                    })?;
                }
                "dir" => {
                    cfg.direction = match value.to_ascii_lowercase().as_str() {
                        "send" | "tx" => Direction::Send,
                        "receive" | "recv" | "rx" => Direction::Receive,
                        "both" => Direction::Both,
                        _ => {
                            return Err(ImpairParseError::new(
                                item,
                                format!("direction {value:?} is not send, receive or both"),
                            ))
                        }
                    }
                }
                _ => unreachable!("every canonical key is handled"),
            }
        }
        Ok(cfg)
    }

    /// True when this configuration changes anything.
    pub fn is_active(&self) -> bool {
        self.loss > 0.0
            || self
                .burst
                .is_some_and(|b| b.p_good_to_bad > 0.0 && b.loss_in_bad > 0.0)
            || self.duplicate > 0.0
            || (self.reorder > 0.0 && !self.reorder_delay.is_zero())
            || !self.delay.is_zero()
            || !self.jitter.is_zero()
    }

    /// The long-run loss rate this configuration produces.
    pub fn expected_loss(&self) -> f64 {
        match self.burst {
            None => self.loss,
            Some(b) => {
                let denom = b.p_good_to_bad + b.p_bad_to_good;
                if denom == 0.0 {
                    // The chain never moves: it stays in the good state it starts in.
                    self.loss
                } else {
                    let pi_bad = b.p_good_to_bad / denom;
                    self.loss * (1.0 - pi_bad) + b.loss_in_bad * pi_bad
                }
            }
        }
    }
}

/// Writes a spec that [`ImpairConfig::parse`] reads back to an equal configuration (fractions,
/// not percentages, so that the value is exact; durations in the largest exact unit).
impl fmt::Display for ImpairConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = ImpairConfig::default();
        let mut items: Vec<String> = Vec::new();
        if self.loss != d.loss {
            items.push(format!("loss={}", self.loss));
        }
        if let Some(b) = self.burst {
            items.push(format!(
                "burst={}/{}/{}",
                b.p_good_to_bad, b.p_bad_to_good, b.loss_in_bad
            ));
        }
        if self.duplicate != d.duplicate {
            items.push(format!("dup={}", self.duplicate));
        }
        if self.reorder != d.reorder || self.reorder_delay != d.reorder_delay {
            items.push(format!(
                "reorder={}/{}",
                self.reorder,
                DisplayDuration(self.reorder_delay)
            ));
        }
        if self.delay != d.delay {
            items.push(format!("delay={}", DisplayDuration(self.delay)));
        }
        if self.jitter != d.jitter {
            items.push(format!("jitter={}", DisplayDuration(self.jitter)));
        }
        if self.seed != d.seed {
            items.push(format!("seed={}", self.seed));
        }
        if self.direction != d.direction {
            items.push(format!("dir={}", self.direction.as_str()));
        }
        f.write_str(&items.join(","))
    }
}

/// A duration in the largest unit that holds it exactly.
struct DisplayDuration(Duration);

impl fmt::Display for DisplayDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos();
        if ns == 0 {
            return f.write_str("0");
        }
        for (unit, per) in [("s", 1_000_000_000u128), ("ms", 1_000_000), ("us", 1_000)] {
            if ns % per == 0 {
                return write!(f, "{}{unit}", ns / per);
            }
        }
        write!(f, "{ns}ns")
    }
}

/// A probability: a fraction in 0..=1 or a percentage in 0%..=100%.
fn parse_prob(item: &str, text: &str) -> Result<f64, ImpairParseError> {
    let text = text.trim();
    let (number, percent) = match text.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (text, false),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| ImpairParseError::new(item, format!("{text:?} is not a probability")))?;
    if !value.is_finite() {
        return Err(ImpairParseError::new(
            item,
            format!("{text:?} is not a finite number"),
        ));
    }
    if value < 0.0 {
        return Err(ImpairParseError::new(
            item,
            format!("probability {text:?} is negative"),
        ));
    }
    if percent {
        if value > 100.0 {
            return Err(ImpairParseError::new(
                item,
                format!("probability {text:?} is above 100%"),
            ));
        }
        Ok(value / 100.0)
    } else {
        if value > 1.0 {
            return Err(ImpairParseError::new(
                item,
                format!(
                    "probability {text:?} is above 1 (a fraction is expected; write {text}% for a percentage)"
                ),
            ));
        }
        Ok(value)
    }
}

/// A duration: a non-negative number with a unit (ns, us/µs, ms, s); a bare `0` is accepted.
fn parse_duration(item: &str, text: &str) -> Result<Duration, ImpairParseError> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let split = text
        .find(|c: char| c.is_ascii_alphabetic() || c == 'µ')
        .ok_or_else(|| {
            ImpairParseError::new(
                item,
                format!("duration {text:?} has no unit (ns, us, ms or s)"),
            )
        })?;
    let (number, unit) = (text[..split].trim(), &text[split..]);
    let per_unit: f64 = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => {
            return Err(ImpairParseError::new(
                item,
                format!("unknown duration unit {unit:?} (ns, us, ms or s)"),
            ))
        }
    };
    // Integers are converted exactly; fractions through f64, rounded to the nanosecond.
    if let Ok(n) = number.parse::<u64>() {
        return n
            .checked_mul(per_unit as u64)
            .map(Duration::from_nanos)
            .ok_or_else(|| ImpairParseError::new(item, format!("duration {text:?} is too long")));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| ImpairParseError::new(item, format!("{text:?} is not a duration")))?;
    if !value.is_finite() || value < 0.0 {
        return Err(ImpairParseError::new(
            item,
            format!("duration {text:?} is negative or not finite"),
        ));
    }
    let ns = (value * per_unit).round();
    if ns >= u64::MAX as f64 {
        return Err(ImpairParseError::new(
            item,
            format!("duration {text:?} is too long"),
        ));
    }
    Ok(Duration::from_nanos(ns as u64))
}

/// xoshiro256** seeded through SplitMix64: small, fast, and good enough for coin flips.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut sm = seed;
        let mut next = || {
            sm = sm.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = sm;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        // SplitMix64 never yields four zeros in a row, so the state is never all zero.
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1), 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (always consumes one number).
    #[cfg(any(test, feature = "internals"))]
    pub fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }
}

/// The fate of one datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Drop,
    /// Deliver `copies` (1 or 2) copies; copy `i` is due at `at_ns[i]` (>= the admit time).
    /// `at_ns[1]` is meaningful only when `copies == 2`.
    Deliver {
        copies: u8,
        at_ns: [u64; 2],
    },
}

impl Verdict {
    /// The release times of the copies to deliver (none for a drop).
    pub fn release_times(&self) -> &[u64] {
        match self {
            Verdict::Drop => &[],
            Verdict::Deliver { copies, at_ns } => &at_ns[..(*copies as usize).min(2)],
        }
    }

    pub fn is_drop(&self) -> bool {
        matches!(self, Verdict::Drop)
    }
}

/// What an [`Impairer`] did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImpairStats {
    /// Datagrams admitted.
    pub seen: u64,
    pub seen_bytes: u64,
    pub dropped: u64,
    pub dropped_bytes: u64,
    /// Datagrams delivered twice.
    pub duplicated: u64,
    /// Datagrams held back by the reorder delay.
    pub reordered: u64,
    /// Datagrams with at least one copy released later than its admit time.
    pub delayed: u64,
}

/// Decides, datagram by datagram, what the configured impairments do.
#[derive(Clone, Debug)]
pub struct Impairer {
    cfg: ImpairConfig,
    rng: Rng,
    bad: bool,
    stats: ImpairStats,
}

impl Impairer {
    pub fn new(cfg: ImpairConfig) -> Impairer {
        Impairer {
            rng: Rng::new(cfg.seed),
            cfg,
            bad: false,
            stats: ImpairStats::default(),
        }
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn config(&self) -> &ImpairConfig {
        &self.cfg
    }

    /// Decides the fate of one datagram of `len` bytes at time `now_ns`.
    pub fn admit(&mut self, now_ns: u64, len: usize) -> Verdict {
        // A fixed number of draws per datagram (see the module docs).
        let r_state = self.rng.next_f64();
        let r_loss = self.rng.next_f64();
        let r_dup = self.rng.next_f64();
        let r_reorder = self.rng.next_f64();
        let r_jitter = [self.rng.next_f64(), self.rng.next_f64()];

        self.stats.seen += 1;
        self.stats.seen_bytes += len as u64;

        let p_loss = match self.cfg.burst {
            None => self.cfg.loss,
            Some(b) => {
                self.bad = if self.bad {
                    r_state >= b.p_bad_to_good
                } else {
                    r_state < b.p_good_to_bad
                };
                if self.bad {
                    b.loss_in_bad
                } else {
                    self.cfg.loss
                }
            }
        };
        if r_loss < p_loss {
            self.stats.dropped += 1;
            self.stats.dropped_bytes += len as u64;
            return Verdict::Drop;
        }

        let copies: u8 = if r_dup < self.cfg.duplicate { 2 } else { 1 };
        if copies == 2 {
            self.stats.duplicated += 1;
        }
        let reorder = r_reorder < self.cfg.reorder && !self.cfg.reorder_delay.is_zero();
        if reorder {
            self.stats.reordered += 1;
        }
        let base = now_ns as i128 + self.cfg.delay.as_nanos() as i128;
        let jitter = self.cfg.jitter.as_nanos() as i128;
        let hold = if reorder {
            self.cfg.reorder_delay.as_nanos() as i128
        } else {
            0
        };
        let mut at_ns = [now_ns; 2];
        for (i, at) in at_ns.iter_mut().enumerate().take(copies as usize) {
            // Uniform in [-jitter, +jitter].
            let offset = if jitter == 0 {
                0
            } else {
                ((r_jitter[i] * 2.0 - 1.0) * jitter as f64).round() as i128
            };
            let t = (base + offset).max(now_ns as i128) + hold;
            *at = t.min(u64::MAX as i128) as u64;
        }
        if at_ns[..copies as usize].iter().any(|&t| t > now_ns) {
            self.stats.delayed += 1;
        }
        Verdict::Deliver { copies, at_ns }
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn stats(&self) -> ImpairStats {
        self.stats
    }
}

/// A datagram waiting in a [`DelayQueue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delayed {
    /// When it is due (nanoseconds, the caller's clock).
    pub at_ns: u64,
    /// The peer: the destination of a datagram to send, the source of one received.
    pub addr: SocketAddr,
    pub data: Vec<u8>,
}

#[derive(Debug)]
struct Entry {
    at_ns: u64,
    seq: u64,
    addr: SocketAddr,
    data: Vec<u8>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at_ns, self.seq) == (other.at_ns, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at_ns, self.seq).cmp(&(other.at_ns, other.seq))
    }
}

/// Datagrams held until their release time; ties leave in the order they came. Bounded in count
/// and in bytes: a datagram that does not fit is dropped and counted in
/// [`DelayQueue::overflow_drops`].
#[derive(Debug)]
pub struct DelayQueue {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    bytes: usize,
    max_count: usize,
    max_bytes: usize,
    overflow_drops: u64,
    pool: Vec<Vec<u8>>,
}

impl DelayQueue {
    /// Keeps at most `max_count` datagrams and `max_bytes` payload bytes.
    pub fn new(max_count: usize, max_bytes: usize) -> DelayQueue {
        DelayQueue {
            heap: BinaryHeap::new(),
            seq: 0,
            bytes: 0,
            max_count,
            max_bytes,
            overflow_drops: 0,
            pool: Vec::new(),
        }
    }

    /// Queues `data` for `at_ns`. Returns false (and counts an overflow drop) when it would
    /// exceed a bound.
    pub fn push(&mut self, at_ns: u64, addr: SocketAddr, data: Vec<u8>) -> bool {
        if self.heap.len() >= self.max_count
            || self.bytes.saturating_add(data.len()) > self.max_bytes
        {
            self.overflow_drops += 1;
            self.recycle(data);
            return false;
        }
        self.bytes += data.len();
        let seq = self.seq;
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            at_ns,
            seq,
            addr,
            data,
        }));
        true
    }

    /// Queues a copy of `data`, reusing a buffer given back through [`DelayQueue::recycle`].
    pub fn push_copy(&mut self, at_ns: u64, addr: SocketAddr, data: &[u8]) -> bool {
        if self.heap.len() >= self.max_count
            || self.bytes.saturating_add(data.len()) > self.max_bytes
        {
            self.overflow_drops += 1;
            return false;
        }
        let mut buf = self.pool.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(data);
        self.push(at_ns, addr, buf)
    }

    /// The earliest datagram due at or before `now_ns`, if any.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<Delayed> {
        if self.heap.peek()?.0.at_ns > now_ns {
            return None;
        }
        let Reverse(e) = self.heap.pop()?;
        self.bytes -= e.data.len();
        Some(Delayed {
            at_ns: e.at_ns,
            addr: e.addr,
            data: e.data,
        })
    }

    /// When the earliest datagram is due.
    pub fn next_due(&self) -> Option<u64> {
        self.heap.peek().map(|e| e.0.at_ns)
    }

    /// Gives a buffer back for [`DelayQueue::push_copy`] to reuse.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if self.pool.len() < 64 && buf.capacity() > 0 {
            self.pool.push(buf);
        }
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Payload bytes held.
    #[cfg(any(test, feature = "internals"))]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Datagrams refused because a bound was reached.
    #[cfg(any(test, feature = "internals"))]
    pub fn overflow_drops(&self) -> u64 {
        self.overflow_drops
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const N: u64 = 100_000;

    fn addr() -> SocketAddr {
        "127.0.0.1:9".parse().unwrap()
    }

    fn cfg(spec: &str) -> ImpairConfig {
        ImpairConfig::parse(spec).unwrap()
    }

    /// Runs `n` datagrams, one per microsecond; returns the drop pattern.
    fn run(imp: &mut Impairer, n: u64) -> Vec<bool> {
        (0..n).map(|i| imp.admit(i * 1000, 100).is_drop()).collect()
    }

    /// Lengths of the runs of consecutive losses.
    fn loss_runs(pattern: &[bool]) -> Vec<usize> {
        let mut runs = Vec::new();
        let mut cur = 0;
        for &lost in pattern {
            if lost {
                cur += 1;
            } else if cur > 0 {
                runs.push(cur);
                cur = 0;
            }
        }
        if cur > 0 {
            runs.push(cur);
        }
        runs
    }

    #[test]
    fn independent_loss_rate_matches() {
        for (p, seed) in [(0.01, 1u64), (0.05, 2), (0.2, 3), (0.5, 4)] {
            let mut imp = Impairer::new(ImpairConfig {
                loss: p,
                seed,
                ..Default::default()
            });
            let dropped = run(&mut imp, N).iter().filter(|&&d| d).count() as f64;
            let rate = dropped / N as f64;
            // 5 standard deviations of a binomial proportion.
            let tol = 5.0 * (p * (1.0 - p) / N as f64).sqrt();
            assert!((rate - p).abs() < tol, "p={p}: observed {rate}, tol {tol}");
            assert_eq!(imp.stats().dropped, dropped as u64);
            assert_eq!(imp.stats().seen, N);
            assert_eq!(imp.stats().seen_bytes, N * 100);
        }
    }

    #[test]
    fn no_loss_and_full_loss_are_exact() {
        let mut imp = Impairer::new(ImpairConfig::default());
        assert!(run(&mut imp, 10_000).iter().all(|&d| !d));
        let mut imp = Impairer::new(cfg("loss=100%"));
        assert!(run(&mut imp, 10_000).iter().all(|&d| d));
    }

    #[test]
    fn burst_loss_is_burstier_than_independent() {
        let bursty = cfg("burst=0.01/0.2/0.9,seed=7");
        let expected = bursty.expected_loss();
        let mut imp = Impairer::new(bursty);
        let pattern = run(&mut imp, N);
        let rate = pattern.iter().filter(|&&d| d).count() as f64 / N as f64;
        // Bursts make the estimate noisier than a binomial one: a looser tolerance.
        assert!(
            (rate - expected).abs() < 0.25 * expected,
            "observed {rate}, expected {expected}"
        );
        let runs = loss_runs(&pattern);
        let mean_run = runs.iter().sum::<usize>() as f64 / runs.len() as f64;

        // Independent loss at the same rate: mean run 1/(1-p), close to 1.
        let mut indep = Impairer::new(ImpairConfig {
            loss: rate,
            seed: 7,
            ..Default::default()
        });
        let runs_i = loss_runs(&run(&mut indep, N));
        let mean_i = runs_i.iter().sum::<usize>() as f64 / runs_i.len() as f64;
        assert!(mean_i < 1.2, "independent mean run {mean_i}");
        // In the bad state (mean stay 5 datagrams, 90 % loss) runs average several datagrams.
        assert!(
            mean_run > 2.5 * mean_i,
            "burst mean run {mean_run} vs {mean_i}"
        );
        assert!(runs.iter().max() > runs_i.iter().max());
    }

    #[test]
    fn same_seed_same_decisions_other_seed_differs() {
        let spec = "loss=10%,dup=5%,reorder=5%/200us,delay=1ms,jitter=100us,seed=42";
        let a: Vec<Verdict> = {
            let mut imp = Impairer::new(cfg(spec));
            (0..10_000).map(|i| imp.admit(i * 10_000, 64)).collect()
        };
        let b: Vec<Verdict> = {
            let mut imp = Impairer::new(cfg(spec));
            (0..10_000).map(|i| imp.admit(i * 10_000, 64)).collect()
        };
        assert_eq!(a, b);
        let c: Vec<Verdict> = {
            let mut imp = Impairer::new(cfg(&spec.replace("seed=42", "seed=43")));
            (0..10_000).map(|i| imp.admit(i * 10_000, 64)).collect()
        };
        assert_ne!(a, c);
    }

    #[test]
    fn loss_pattern_independent_of_other_impairments() {
        let mut plain = Impairer::new(cfg("loss=10%,seed=9"));
        let mut busy = Impairer::new(cfg("loss=10%,dup=50%,reorder=30%/1ms,jitter=1ms,seed=9"));
        assert_eq!(run(&mut plain, 20_000), run(&mut busy, 20_000));
    }

    #[test]
    fn duplication_and_reorder_counts() {
        let mut imp = Impairer::new(cfg("dup=10%,reorder=5%/500us,seed=5"));
        let mut copies = 0u64;
        let mut held = 0u64;
        for i in 0..N {
            let now = i * 1000;
            match imp.admit(now, 10) {
                Verdict::Drop => panic!("no loss configured"),
                Verdict::Deliver { copies: c, at_ns } => {
                    copies += c as u64;
                    for &t in &at_ns[..c as usize] {
                        assert!(t == now || t == now + 500_000, "{t} vs {now}");
                    }
                    if at_ns[0] > now {
                        held += 1;
                    }
                }
            }
        }
        let s = imp.stats();
        assert_eq!(copies, N + s.duplicated);
        assert_eq!(held, s.reordered);
        assert_eq!(s.delayed, s.reordered);
        let tol = |p: f64| 5.0 * (p * (1.0 - p) / N as f64).sqrt() * N as f64;
        assert!((s.duplicated as f64 - 0.10 * N as f64).abs() < tol(0.10));
        assert!((s.reordered as f64 - 0.05 * N as f64).abs() < tol(0.05));
    }

    #[test]
    fn reordered_datagrams_are_overtaken() {
        let mut imp = Impairer::new(cfg("reorder=10%/50us,seed=3"));
        let mut q = DelayQueue::new(1 << 20, 1 << 30);
        let mut order = Vec::new();
        for i in 0u64..10_000 {
            let now = i * 10_000; // 10 us apart: a 50 us hold lets about 5 pass.
            while let Some(d) = q.pop_due(now) {
                order.push(u64::from_le_bytes(d.data[..8].try_into().unwrap()));
            }
            for &at in imp.admit(now, 8).release_times() {
                assert!(q.push_copy(at, addr(), &i.to_le_bytes()));
            }
        }
        while let Some(d) = q.pop_due(u64::MAX) {
            order.push(u64::from_le_bytes(d.data[..8].try_into().unwrap()));
        }
        assert_eq!(order.len(), 10_000);
        let inversions = order.windows(2).filter(|w| w[0] > w[1]).count() as u64;
        assert!(inversions > 0);
        assert!(inversions <= imp.stats().reordered);
    }

    #[test]
    fn delay_and_jitter_bounds() {
        let mut imp = Impairer::new(cfg("delay=1ms,jitter=100us,dup=50%,seed=11"));
        let (mut lo, mut hi) = (u64::MAX, 0);
        for i in 0..N {
            let now = 5_000_000 + i;
            for &t in imp.admit(now, 1).release_times() {
                let d = t - now;
                lo = lo.min(d);
                hi = hi.max(d);
            }
        }
        assert!((900_000..=910_000).contains(&lo), "{lo}");
        assert!((1_090_000..=1_100_000).contains(&hi), "{hi}");
        assert_eq!(imp.stats().delayed, N);
        // Jitter larger than the delay never releases before admission.
        let mut imp = Impairer::new(cfg("delay=10us,jitter=1ms,seed=1"));
        for i in 0..10_000 {
            for &t in imp.admit(i, 1).release_times() {
                assert!(t >= i);
            }
        }
    }

    #[test]
    fn parse_full_spec() {
        let c = cfg(
            "loss=5%,burst=0.01/0.3/0.5,dup=1%,reorder=2%/200us,delay=1ms,jitter=100us,seed=42,dir=send",
        );
        assert_eq!(c.loss, 0.05);
        assert_eq!(
            c.burst,
            Some(Burst {
                p_good_to_bad: 0.01,
                p_bad_to_good: 0.3,
                loss_in_bad: 0.5
            })
        );
        assert_eq!(c.duplicate, 0.01);
        assert_eq!(c.reorder, 0.02);
        assert_eq!(c.reorder_delay, Duration::from_micros(200));
        assert_eq!(c.delay, Duration::from_millis(1));
        assert_eq!(c.jitter, Duration::from_micros(100));
        assert_eq!(c.seed, 42);
        assert_eq!(c.direction, Direction::Send);
        assert!(c.is_active());

        let c =
            cfg(" LOSS = 0.5 , direction=Both, seed=0x10, burst=0.1/0.2, reorder=1%, delay=1.5ms ");
        assert_eq!(c.loss, 0.5);
        assert_eq!(c.direction, Direction::Both);
        assert_eq!(c.seed, 16);
        assert_eq!(c.burst.unwrap().loss_in_bad, 1.0);
        assert_eq!(c.reorder_delay, DEFAULT_REORDER_DELAY);
        assert_eq!(c.delay, Duration::from_micros(1500));

        for empty in ["", "  ", "off", "none"] {
            let c = cfg(empty);
            assert_eq!(c, ImpairConfig::default());
            assert!(!c.is_active());
        }
        assert!(!cfg("seed=5,dir=both").is_active());
        assert!(cfg("jitter=1us").is_active());
    }

    #[test]
    fn parse_rejects_bad_specs_with_messages() {
        let cases = [
            ("loss=-5%", "negative"),
            ("loss=-0.1", "negative"),
            ("loss=150%", "above 100%"),
            ("loss=5", "write 5% for a percentage"),
            ("loss=abc", "not a probability"),
            ("loss=NaN", "not a finite number"),
            ("lost=5%", "unknown key \"lost\""),
            ("loss", "missing '='"),
            ("loss=1%,loss=2%", "given twice"),
            ("loss=1%,,dup=1%", "empty item"),
            ("burst=0.1", "burst takes"),
            ("burst=0.1/0.2/0.3/0.4", "burst takes"),
            ("delay=5", "no unit"),
            ("delay=5h", "unknown duration unit"),
            ("delay=-1ms", "negative"),
            ("jitter=1.2.3ms", "not a duration"),
            ("reorder=2%/abc", "unknown duration unit"),
            ("delay=ms", "not a duration"),
            ("seed=-1", "not an unsigned 64-bit integer"),
            ("dir=sideways", "not send, receive or both"),
        ];
        for (spec, needle) in cases {
            let err = ImpairConfig::parse(spec).expect_err(spec);
            let msg = err.to_string();
            assert!(msg.contains(needle), "{spec}: {msg}");
            // Every message carries the accepted syntax.
            assert!(msg.contains("loss=P"), "{spec}: {msg}");
        }
    }

    #[test]
    fn display_round_trips_examples() {
        for spec in [
            "loss=5%,burst=0.01/0.3/0.5,dup=1%,reorder=2%/200us,delay=1ms,jitter=100us,seed=42,dir=send",
            "reorder=0/5ms",
            "delay=1234567ns,dir=receive",
            "",
        ] {
            let c = cfg(spec);
            let shown = c.to_string();
            assert_eq!(cfg(&shown), c, "{spec} -> {shown}");
        }
        assert_eq!(cfg("delay=1.5ms").to_string(), "delay=1500us");
        assert_eq!(ImpairConfig::default().to_string(), "");
    }

    #[test]
    fn delay_queue_orders_by_time_then_arrival() {
        let mut q = DelayQueue::new(10, 1000);
        assert_eq!(q.next_due(), None);
        assert!(q.push(30, addr(), vec![3]));
        assert!(q.push(10, addr(), vec![1]));
        assert!(q.push(20, addr(), vec![2]));
        assert!(q.push(10, addr(), vec![11]));
        assert_eq!(q.next_due(), Some(10));
        assert_eq!(q.len(), 4);
        assert_eq!(q.bytes(), 4);
        assert_eq!(q.pop_due(9), None);
        assert_eq!(q.pop_due(10).unwrap().data, vec![1]);
        assert_eq!(q.pop_due(10).unwrap().data, vec![11]);
        assert_eq!(q.pop_due(10), None);
        let d = q.pop_due(100).unwrap();
        assert_eq!((d.at_ns, d.data.as_slice()), (20, &[2u8][..]));
        q.recycle(d.data);
        assert_eq!(q.pop_due(100).unwrap().data, vec![3]);
        assert!(q.is_empty());
        assert_eq!(q.bytes(), 0);
    }

    #[test]
    fn delay_queue_bounds() {
        let mut q = DelayQueue::new(3, 100);
        assert!(q.push_copy(1, addr(), &[0; 40]));
        assert!(q.push_copy(2, addr(), &[0; 40]));
        // Bytes bound: 40 + 40 + 40 > 100.
        assert!(!q.push_copy(3, addr(), &[0; 40]));
        assert!(q.push(3, addr(), vec![0; 20]));
        // Count bound.
        assert!(!q.push(4, addr(), vec![]));
        assert_eq!(q.overflow_drops(), 2);
        assert_eq!((q.len(), q.bytes()), (3, 100));
        q.pop_due(1).unwrap();
        assert!(q.push(4, addr(), vec![0; 40]));
        assert_eq!(q.bytes(), 100);
    }

    fn arb_prob() -> impl Strategy<Value = f64> {
        prop_oneof![Just(0.0), Just(1.0), 0.0..=1.0f64]
    }

    fn arb_duration() -> impl Strategy<Value = Duration> {
        prop_oneof![
            Just(Duration::ZERO),
            (0u64..1_000_000_000_000).prop_map(Duration::from_nanos),
            (0u64..100_000).prop_map(Duration::from_micros),
        ]
    }

    fn arb_config() -> impl Strategy<Value = ImpairConfig> {
        (
            arb_prob(),
            proptest::option::of((arb_prob(), arb_prob(), arb_prob())),
            arb_prob(),
            arb_prob(),
            arb_duration(),
            arb_duration(),
            arb_duration(),
            any::<u64>(),
            prop_oneof![
                Just(Direction::Send),
                Just(Direction::Receive),
                Just(Direction::Both)
            ],
        )
            .prop_map(
                |(
                    loss,
                    burst,
                    duplicate,
                    reorder,
                    reorder_delay,
                    delay,
                    jitter,
                    seed,
                    direction,
                )| {
                    ImpairConfig {
                        loss,
                        burst: burst.map(|(a, b, c)| Burst {
                            p_good_to_bad: a,
                            p_bad_to_good: b,
                            loss_in_bad: c,
                        }),
                        duplicate,
                        reorder,
                        reorder_delay,
                        delay,
                        jitter,
                        seed,
                        direction,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn prop_display_parse_round_trip(c in arb_config()) {
            let shown = c.to_string();
            prop_assert_eq!(ImpairConfig::parse(&shown).unwrap(), c);
        }

        #[test]
        fn prop_parse_never_panics(s in "[a-z=,/%.0-9µ -]{0,40}") {
            let _ = ImpairConfig::parse(&s);
        }

        #[test]
        fn prop_verdicts_are_sane(c in arb_config(), now in 0u64..u64::MAX / 2, n in 1usize..200) {
            let mut imp = Impairer::new(c);
            for i in 0..n as u64 {
                let t = now + i;
                match imp.admit(t, 10) {
                    Verdict::Drop => {}
                    Verdict::Deliver { copies, at_ns } => {
                        prop_assert!(copies == 1 || copies == 2);
                        for &a in &at_ns[..copies as usize] {
                            prop_assert!(a >= t);
                        }
                    }
                }
            }
            let s = imp.stats();
            prop_assert_eq!(s.seen, n as u64);
            prop_assert!(s.dropped <= s.seen);
            prop_assert!(s.duplicated <= s.seen - s.dropped);
            prop_assert!(s.reordered <= s.seen - s.dropped);
        }

        #[test]
        fn prop_delay_queue_pops_in_time_order(
            items in proptest::collection::vec((0u64..1000, 0usize..50), 0..200),
            max_count in 0usize..100,
            max_bytes in 0usize..3000,
        ) {
            let mut q = DelayQueue::new(max_count, max_bytes);
            let mut accepted = 0u64;
            for (i, &(at, len)) in items.iter().enumerate() {
                let mut data = vec![0u8; len.max(4)];
                data[..4].copy_from_slice(&(i as u32).to_le_bytes());
                if q.push(at, addr(), data) {
                    accepted += 1;
                }
                prop_assert!(q.len() <= max_count);
                prop_assert!(q.bytes() <= max_bytes);
            }
            prop_assert_eq!(accepted + q.overflow_drops(), items.len() as u64);
            let mut last: Option<(u64, u32)> = None;
            while let Some(d) = q.pop_due(u64::MAX) {
                let idx = u32::from_le_bytes(d.data[..4].try_into().unwrap());
                if let Some((t, j)) = last {
                    prop_assert!(t < d.at_ns || (t == d.at_ns && j < idx));
                }
                last = Some((d.at_ns, idx));
            }
            prop_assert_eq!(q.bytes(), 0);
        }
    }
}
