//! The peer's end of the control channel, as an experiment's peer side holds it.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::wire::{to_line, Reply};
use crate::error::{bail, Error, Result};

/// The peer's end of the control channel: the main side's commands in, reports out.
pub struct PeerLink {
    /// Started by `ferry lab agent` for a lab on another machine.
    for_agent: bool,
    input: Receiver<Result<String>>,
    /// Set once the main side's input ended.
    main_gone: Arc<AtomicBool>,
    out: Box<dyn Write + Send>,
}

impl PeerLink {
    pub(super) fn new(
        input: Receiver<Result<String>>,
        out: Box<dyn Write + Send>,
        for_agent: bool,
    ) -> PeerLink {
        PeerLink {
            for_agent,
            input,
            main_gone: Arc::new(AtomicBool::new(false)),
            out,
        }
    }

    /// Whether this peer serves a lab on another machine (started by `ferry lab agent`): it
    /// then refuses what only makes sense on one machine (shared memory, local names).
    pub fn for_agent(&self) -> bool {
        self.for_agent
    }

    /// Sends the main side a report.
    pub fn report(&mut self, message: &impl Serialize) -> Result<()> {
        let line = to_line(&Reply::Report(serde_json::to_value(message)?))?;
        self.write(&line)
    }

    pub(super) fn write(&mut self, line: &str) -> Result<()> {
        self.out
            .write_all(line.as_bytes())
            .and_then(|()| self.out.flush())
            .map_err(|e| Error::msg(format!("cannot talk to the lab's main side: {e}")))
    }

    /// Waits at most `timeout` for the main side's next command; `None` if none came. An error
    /// once the main side went away.
    pub fn recv<T: DeserializeOwned>(&mut self, timeout: Duration) -> Result<Option<T>> {
        match self.input.recv_timeout(timeout) {
            Ok(line) => {
                let line = line?;
                serde_json::from_str(&line)
                    .map(Some)
                    .map_err(|e| Error::msg(format!("a command the peer cannot read: {e}")))
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => {
                // Relaxed: a flag read by this thread only.
                self.main_gone.store(true, Ordering::Relaxed);
                Err(Error::msg(MAIN_GONE))
            }
        }
    }

    /// Waits at most `timeout` for the main side's next command, which should be `want` (the
    /// error names it if none came), looking at Ctrl-C between short waits.
    pub fn await_command<T: DeserializeOwned>(
        &mut self,
        timeout: Duration,
        want: &str,
    ) -> Result<T> {
        let late = || {
            Error::msg(format!(
                "the main side did not say {want} within {timeout:?}"
            ))
        };
        super::wire::poll_within(timeout, late, |slice| self.recv::<T>(slice))
    }

    /// Waits at most `timeout` until `publisher` has matched a subscriber, watching the main
    /// side and Ctrl-C meanwhile.
    pub fn await_subscriber(
        &mut self,
        publisher: &ferry::Publisher,
        timeout: Duration,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while publisher.subscriber_count() < 1 {
            crate::signal::check()?;
            self.check_main()?;
            if Instant::now() >= deadline {
                bail!("no subscriber matched the publisher within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    }

    /// An error once the main side went away (its input ended). Cheap: call it between waits.
    pub fn check_main(&mut self) -> Result<()> {
        // Relaxed: see `recv`.
        if self.main_gone.load(Ordering::Relaxed) {
            return Err(Error::msg(MAIN_GONE));
        }
        match self.input.try_recv() {
            Err(mpsc::TryRecvError::Disconnected) => {
                self.main_gone.store(true, Ordering::Relaxed);
                Err(Error::msg(MAIN_GONE))
            }
            // A command that the experiment does not wait for is not expected: say so.
            Ok(Ok(line)) => Err(Error::msg(format!(
                "the main side sent an unexpected command: {}",
                line.chars().take(80).collect::<String>()
            ))),
            Ok(Err(e)) => Err(e),
            Err(mpsc::TryRecvError::Empty) => Ok(()),
        }
    }

    /// A closure for the peers' wait loops: `check_main` as `FnMut() -> Result<()>`.
    pub fn watch(&mut self) -> impl FnMut() -> Result<()> + '_ {
        move || self.check_main()
    }
}

/// The error a peer stops with when its main side went away.
pub const MAIN_GONE: &str = "the lab's main side went away";
