//! `Player`: publishes a recording's messages again with their recorded timing.
//!
//! The file is read twice: a first pass checks all of it (a malformed file is refused before
//! anything is sent) and finds each topic's largest message, so that its publisher is made
//! with room for it; the second pass sends. Message `k` is due at
//! `start + (log_time_k - first_log_time) / rate` — an absolute schedule, as the cyclic runtime
//! keeps it: a late message does not delay the ones after it, and the schedule never drifts.
//! The player sleeps until shortly before a message is due and spins the rest, then reports
//! how late each message went out.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferry::{Node, Publisher, Qos, SendError};

use crate::reader::{Event, McapReader, ReadLimits};
use crate::Error;

/// How fast to play.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// The recorded timing, sped up (2.0) or slowed down (0.5).
    Factor(f64),
    /// As fast as possible, without a schedule.
    Max,
}

#[derive(Debug, Clone)]
pub struct PlayOptions {
    pub rate: Rate,
    /// Start again from the beginning after the end, until stopped.
    pub looping: bool,
    /// Only these topics (all when `None`).
    pub topics: Option<Vec<String>>,
    pub limits: ReadLimits,
}

impl Default for PlayOptions {
    fn default() -> PlayOptions {
        PlayOptions {
            rate: Rate::Factor(1.0),
            looping: false,
            topics: None,
            limits: ReadLimits::default(),
        }
    }
}

/// A topic of the recording, as the first pass found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicScan {
    pub topic: String,
    pub messages: u64,
    pub max_size: usize,
    /// The type it was recorded with (of its first channel), declared again when played.
    pub topic_type: Option<ferry::TopicType>,
}

/// What the first pass found (of the topics played).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    pub topics: Vec<TopicScan>,
    pub messages: u64,
    pub first_log_time: u64,
    pub last_log_time: u64,
}

/// How late messages went out after their due time (timed rates only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lateness {
    pub messages: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Messages more than 1 ms late.
    pub over_1ms: u64,
}

/// The end of a play.
#[derive(Debug, Clone, PartialEq)]
pub struct PlayReport {
    pub sent: u64,
    /// Passes over the file begun (more than one with looping).
    pub passes: u64,
    pub elapsed: Duration,
    /// `None` at `Rate::Max` or when nothing was sent.
    pub lateness: Option<Lateness>,
    /// Sends that waited their whole timeout for a reliable subscriber (and were retried).
    pub stalls: u64,
}

/// How long before a message's due time the player stops sleeping and spins.
const SPIN: Duration = Duration::from_micros(200);
/// The longest sleep before the stop callback is asked again.
const SLICE: Duration = Duration::from_millis(100);

pub struct Player {
    path: PathBuf,
    options: PlayOptions,
    scan: Scan,
    publishers: HashMap<String, Publisher>,
}

/// Reads `path` once, checking all of it: the topics (those of `only` when given) with their
/// counts and largest message, and the first and last log time.
pub fn scan(path: &Path, limits: ReadLimits, only: Option<&[String]>) -> Result<Scan, Error> {
    let mut reader = McapReader::open(path, limits)?;
    let mut topics: Vec<TopicScan> = Vec::new();
    let mut all: Vec<String> = Vec::new();
    let (mut first, mut last, mut messages) = (u64::MAX, 0u64, 0u64);
    while let Some(ev) = reader.next_event() {
        let Event::Message(m) = ev? else { continue };
        let channel = &reader.channels()[&m.channel];
        let topic = &channel.topic;
        if !all.contains(topic) {
            all.push(topic.clone());
        }
        if only.is_some_and(|o| !o.contains(topic)) {
            continue;
        }
        let t = match topics.iter().position(|t| &t.topic == topic) {
            Some(i) => &mut topics[i],
            None => {
                topics.push(TopicScan {
                    topic: topic.clone(),
                    messages: 0,
                    max_size: 0,
                    topic_type: channel.topic_type.clone(),
                });
                topics.last_mut().expect("pushed")
            }
        };
        t.messages += 1;
        t.max_size = t.max_size.max(m.payload.len());
        messages += 1;
        first = first.min(m.log_time);
        last = last.max(m.log_time);
    }
    if let Some(only) = only {
        let missing: Vec<&String> = only
            .iter()
            .filter(|o| !topics.iter().any(|t| &t.topic == *o))
            .collect();
        if !missing.is_empty() {
            return Err(Error::Usage(format!(
                "{} has no message on {missing:?} (it has {all:?})",
                path.display(),
            )));
        }
    }
    Ok(Scan {
        topics,
        messages,
        first_log_time: if messages == 0 { 0 } else { first },
        last_log_time: last,
    })
}

/// The slowest speed factor: any recording's due times, `log time / rate` on, stay times the
/// clock can count (a recording spans at most 2^64 ns).
pub const MIN_RATE: f64 = 1e-6;

impl Player {
    /// Checks the file and makes a publisher per topic played (with `qos`, and room for the
    /// topic's largest message).
    pub fn new(node: &Node, qos: &Qos, path: &Path, options: PlayOptions) -> Result<Player, Error> {
        if let Rate::Factor(f) = options.rate {
            if !(f.is_finite() && f >= MIN_RATE) {
                return Err(Error::Usage(format!(
                    "rate {f} must be a speed factor of at least {MIN_RATE}"
                )));
            }
        }
        let scan = scan(path, options.limits, options.topics.as_deref())?;
        let mut publishers = HashMap::new();
        for t in &scan.topics {
            let mut q = qos.clone().max_message_size(t.max_size.max(1));
            if q.topic_type.is_none() {
                q.topic_type = t.topic_type.clone();
            }
            let p = node
                .publisher(&t.topic, &q)
                .map_err(|e| Error::Publish(t.topic.clone(), e))?;
            publishers.insert(t.topic.clone(), p);
        }
        Ok(Player {
            path: path.to_owned(),
            options,
            scan,
            publishers,
        })
    }

    /// What the first pass found.
    pub fn scan(&self) -> &Scan {
        &self.scan
    }

    /// The fewest subscribers any played topic has now.
    pub fn min_subscribers(&self) -> usize {
        self.publishers
            .values()
            .map(Publisher::subscriber_count)
            .min()
            .unwrap_or(0)
    }

    /// Plays the file (again and again with looping) until its end or until `stop` says so
    /// (asked at least every 100 ms).
    pub fn play(&mut self, stop: &mut dyn FnMut() -> bool) -> Result<PlayReport, Error> {
        let began = Instant::now();
        let mut late: Vec<u64> = Vec::new();
        let (mut sent, mut passes, mut stalls) = (0u64, 0u64, 0u64);
        let t0 = self.scan.first_log_time;
        'passes: loop {
            if self.scan.messages == 0 || stop() {
                break;
            }
            passes += 1;
            let mut reader = McapReader::open(&self.path, self.options.limits)?;
            let start = Instant::now();
            while let Some(ev) = reader.next_event() {
                let Event::Message(m) = ev? else { continue };
                let topic = &reader.channels()[&m.channel].topic;
                let Some(publisher) = self.publishers.get_mut(topic) else {
                    continue;
                };
                let due = match self.options.rate {
                    Rate::Max => None,
                    Rate::Factor(f) => {
                        let offset = m.log_time.saturating_sub(t0) as f64 / f;
                        Some(start + Duration::from_secs_f64(offset * 1e-9))
                    }
                };
                if let Some(due) = due {
                    if !wait_until(due, stop) {
                        break 'passes;
                    }
                    late.push(u64::try_from(due.elapsed().as_nanos()).unwrap_or(u64::MAX));
                }
                loop {
                    match publisher.send(&m.payload) {
                        Ok(()) => break,
                        Err(SendError::Timeout(_)) => {
                            stalls += 1;
                            if stop() {
                                break 'passes;
                            }
                        }
                        Err(e) => return Err(Error::Send(topic.clone(), e)),
                    }
                }
                sent += 1;
            }
            if !self.options.looping {
                break;
            }
        }
        Ok(PlayReport {
            sent,
            passes,
            elapsed: began.elapsed(),
            lateness: lateness(&mut late),
            stalls,
        })
    }
}

/// Sleeps until shortly before `due`, then spins; false when `stop` said so first.
fn wait_until(due: Instant, stop: &mut dyn FnMut() -> bool) -> bool {
    loop {
        let now = Instant::now();
        if now >= due {
            return true;
        }
        let left = due - now;
        if left > SPIN {
            if stop() {
                return false;
            }
            std::thread::sleep((left - SPIN).min(SLICE));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Percentiles (nearest rank) of `late`, sorted in place.
pub fn lateness(late: &mut [u64]) -> Option<Lateness> {
    if late.is_empty() {
        return None;
    }
    late.sort_unstable();
    let n = late.len();
    let rank = |p: f64| late[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
    Some(Lateness {
        messages: n as u64,
        p50_ns: rank(0.50),
        p99_ns: rank(0.99),
        max_ns: late[n - 1],
        over_1ms: late.iter().filter(|&&l| l > 1_000_000).count() as u64,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn lateness_percentiles_by_nearest_rank() {
        assert_eq!(super::lateness(&mut []), None);
        let mut late: Vec<u64> = (1..=100).map(|i| i * 20_000).collect();
        let l = super::lateness(&mut late).unwrap();
        assert_eq!(l.messages, 100);
        assert_eq!(l.p50_ns, 1_000_000);
        assert_eq!(l.p99_ns, 1_980_000);
        assert_eq!(l.max_ns, 2_000_000);
        assert_eq!(l.over_1ms, 50);
    }
}
