//! The peer side: the subscribers, one thread each, counting what they receive. The fast ones
//! read every message as it comes; the slow one sleeps after each message.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferry::Subscriber;

use super::options::{qos, Counts, PeerRequest, DRAIN_LIMIT, QUIET, TOPIC};
use crate::error::{bail, Error, Result};

/// How long a subscriber waits for a message before it looks at the stop flag again.
const SLICE: Duration = Duration::from_millis(50);

/// The subscribers' threads.
pub(super) struct Readers {
    /// Set once the publisher has sent its last message.
    stop: Arc<AtomicBool>,
    fast: Vec<JoinHandle<Result<u64>>>,
    slow: Option<JoinHandle<Result<u64>>>,
    /// The subscribers' node.
    node: ferry::Node,
}

/// A subscriber's loop: the subscriber, the message size, the stop flag, the pause after each
/// message; returns the messages it received.
type Read = fn(Subscriber, usize, &AtomicBool, Duration) -> Result<u64>;

impl Readers {
    /// Makes every subscriber of `request` and starts its thread; they read from then on.
    pub(super) fn start(request: &PeerRequest) -> Result<Readers> {
        let mut readers = Readers {
            stop: Arc::new(AtomicBool::new(false)),
            fast: Vec::new(),
            slow: None,
            node: crate::lab_node("lab-fanout-peer", &request.domain, false)?,
        };
        // On an error, the threads already started are told to stop as `readers` is dropped.
        for i in 0..request.fast {
            let thread = readers.spawn(
                format!("fanout-fast-{i}"),
                request,
                read_fast,
                Duration::ZERO,
            )?;
            readers.fast.push(thread);
        }
        if let Some(ns) = request.slow_pause_ns {
            let pause = Duration::from_nanos(ns);
            readers.slow =
                Some(readers.spawn("fanout-slow".to_owned(), request, read_slow, pause)?);
        }
        Ok(readers)
    }

    /// Makes a subscriber and starts a thread that reads it with `read`.
    fn spawn(
        &self,
        name: String,
        request: &PeerRequest,
        read: Read,
        pause: Duration,
    ) -> Result<JoinHandle<Result<u64>>> {
        let sub = self.node.subscriber(TOPIC, &qos(request.size))?;
        let stop = self.stop.clone();
        let size = request.size;
        std::thread::Builder::new()
            .name(name)
            .spawn(move || read(sub, size, &stop, pause))
            .map_err(|e| Error::msg(format!("cannot start a subscriber's thread: {e}")))
    }

    /// An error if a subscriber's thread has ended (it must not before [`Readers::finish`]).
    pub(super) fn check(&self) -> Result<()> {
        let ended = self
            .fast
            .iter()
            .chain(&self.slow)
            .any(JoinHandle::is_finished);
        if ended {
            bail!("a subscriber stopped reading before the last message");
        }
        Ok(())
    }

    /// Tells the subscribers that the last message has been sent and returns their counts, once
    /// the fast ones have read what was left (and the slow one has stopped where it was).
    pub(super) fn finish(mut self) -> Result<Counts> {
        self.stop.store(true, Ordering::Relaxed);
        let join = |h: JoinHandle<Result<u64>>| -> Result<u64> {
            h.join()
                .map_err(|_| Error::msg("a subscriber's thread panicked"))?
        };
        let fast = std::mem::take(&mut self.fast)
            .into_iter()
            .map(join)
            .collect::<Result<Vec<u64>>>()?;
        let slow = self.slow.take().map(join).transpose()?;
        Ok(Counts { fast, slow })
    }
}

impl Drop for Readers {
    /// The threads end by themselves once told to (within [`DRAIN_LIMIT`]); a peer that stops on
    /// an error does not wait for them.
    fn drop(&mut self) {
        // Relaxed: a flag; nothing else is handed over with it.
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Checks a message's length.
fn check_size(got: usize, size: usize) -> Result<()> {
    if got != size {
        bail!("a message of {got} bytes came; the publisher sends {size}");
    }
    Ok(())
}

/// A fast subscriber: counts every message; once told to stop, reads on until [`QUIET`] passes
/// without a message (at most [`DRAIN_LIMIT`]).
fn read_fast(mut sub: Subscriber, size: usize, stop: &AtomicBool, _: Duration) -> Result<u64> {
    let mut count = 0u64;
    let mut stopped: Option<Instant> = None;
    loop {
        // Relaxed: a flag; the counts go back through the thread's join.
        if stopped.is_none() && stop.load(Ordering::Relaxed) {
            stopped = Some(Instant::now());
        }
        let wait = if stopped.is_some() { QUIET } else { SLICE };
        match sub.recv_timeout(wait)? {
            Some(sample) => {
                check_size(sample.len(), size)?;
                count += 1;
            }
            None if stopped.is_some() => return Ok(count),
            None => {}
        }
        if stopped.is_some_and(|t| t.elapsed() >= DRAIN_LIMIT) {
            return Ok(count);
        }
    }
}

/// The slow subscriber: counts a message, then sleeps `pause`; stops when told to (what it has
/// not read by then is not counted: it read at its own pace while the publisher sent).
fn read_slow(mut sub: Subscriber, size: usize, stop: &AtomicBool, pause: Duration) -> Result<u64> {
    let mut count = 0u64;
    // Relaxed: as in `read_fast`.
    while !stop.load(Ordering::Relaxed) {
        let Some(sample) = sub.recv_timeout(SLICE)? else {
            continue;
        };
        check_size(sample.len(), size)?;
        drop(sample);
        count += 1;
        // In slices, so that a long pause does not hold the end.
        let until = Instant::now() + pause;
        loop {
            let now = Instant::now();
            if now >= until || stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep((until - now).min(SLICE));
        }
    }
    Ok(count)
}
