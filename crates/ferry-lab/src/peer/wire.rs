//! The control protocol's lines, as both sides and the agent read and write them: the main
//! side's first line ([`Hello`]), the peer's answers ([`Reply`]), bounded line reads, and the
//! agent's handshake as the main side answers it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

/// The longest line either side accepts: a peer request or report is a few kilobytes; anything
/// longer is refused rather than buffered.
pub const MAX_LINE: usize = 1 << 20;
/// Lines read ahead of the lab (the reader then waits, and so does the sender behind it).
pub(crate) const LINES_AHEAD: usize = 256;
/// Reports the lab holds before it reads them: more is a peer that floods, an error.
pub(crate) const MAX_QUEUED_REPORTS: usize = 1 << 16;

/// The TCP port `ferry lab agent` listens on by default.
pub const AGENT_PORT: u16 = 7447;

/// The main side's first line.
#[derive(Debug, Serialize, Deserialize)]
pub struct Hello {
    pub experiment: String,
    pub request: Value,
}

/// A line from the peer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reply {
    Report(Value),
    Done(()),
    Error(String),
}

/// Reads one line of at most [`MAX_LINE`] bytes (without its newline); `None` at the end.
pub fn read_line(input: &mut impl BufRead) -> Result<Option<String>> {
    let mut buf = Vec::new();
    let n = input
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if buf.len() > MAX_LINE {
        return Err(Error::msg(format!(
            "a control line longer than {MAX_LINE} bytes was refused"
        )));
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| Error::msg("a control line that is not UTF-8 was refused"))
}

/// Reads lines into a channel from a thread, until the end or an error (sent as `Err`).
pub(crate) fn reader_thread(input: impl Read + Send + 'static) -> Receiver<Result<String>> {
    // Bounded: a sender faster than the lab reads is held back, not buffered without end.
    let (tx, rx) = mpsc::sync_channel(LINES_AHEAD);
    std::thread::Builder::new()
        .name("lab-lines".to_owned())
        .spawn(move || {
            let mut input = BufReader::new(input);
            loop {
                match read_line(&mut input) {
                    Ok(Some(line)) => {
                        if tx.send(Ok(line)).is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                }
            }
        })
        .expect("a thread for the control lines");
    rx
}

pub(crate) fn to_line(value: &impl Serialize) -> Result<String> {
    let mut line = serde_json::to_string(value)?;
    line.push('\n');
    Ok(line)
}

// ---------------------------------------------------------------------------------------------
// The agent's handshake

/// How long the agent gives a connection's whole handshake (a connection still in it then is
/// shut), and how long either side waits for one line of it.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(if cfg!(test) { 2 } else { 10 });
/// What the tags of the challenge are made for (a key derived for this use alone).
pub(crate) const TAG_PURPOSE: &str = "ferry lab agent v1";
/// The version of the agent's handshake.
pub(crate) const VERSION: u32 = 1;

/// The agent's first line.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Greeting {
    pub agent: String,
    pub version: u32,
    /// 32 hexadecimal digits to tag, when the agent has a key.
    pub challenge: Option<String>,
}

/// The answer to a challenge.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Proof {
    pub tag: String,
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || text.len() > 128 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The main side's half of the handshake, on a fresh connection to an agent: reads its
/// greeting and, if it asks, proves the domain key (`FERRY_KEY_FILE`).
pub(crate) fn client_handshake(
    reader: &mut impl BufRead,
    stream: &TcpStream,
    address: &str,
) -> Result<()> {
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let line = read_line(reader)?
        .ok_or_else(|| Error::msg(format!("the lab agent at {address} closed the connection")))?;
    if let Ok(Reply::Error(e)) = serde_json::from_str::<Reply>(&line) {
        return Err(Error::msg(format!("the lab agent at {address}: {e}")));
    }
    let greeting: Greeting = serde_json::from_str(&line)
        .map_err(|_| Error::msg(format!("{address} is not a ferry lab agent")))?;
    if greeting.version != VERSION {
        return Err(Error::msg(format!(
            "the lab agent at {address} speaks version {} of the handshake, this lab {VERSION}: run the same ferry on both machines",
            greeting.version
        )));
    }
    if let Some(challenge) = greeting.challenge {
        let challenge = unhex(&challenge).ok_or_else(|| {
            Error::msg(format!("the lab agent at {address} sent a bad challenge"))
        })?;
        let key = ferry::NodeConfig::from_env()?.key().cloned().ok_or_else(|| {
            Error::msg(format!(
                "the lab agent at {address} asks for the domain key: set FERRY_KEY_FILE to the key file it was given"
            ))
        })?;
        let tag = key.tag(TAG_PURPOSE, &challenge)?;
        let mut s = stream;
        let mut line = serde_json::to_string(&Proof { tag: hex(&tag) })?;
        line.push('\n');
        s.write_all(line.as_bytes())?;
    }
    stream.set_read_timeout(None)?;
    Ok(())
}

/// Polls `poll` in 50 ms slices, looking at Ctrl-C before each, until it gives a value; the
/// error `late` once `timeout` has passed without one. Both ends of the control channel wait so.
pub(crate) fn poll_within<T>(
    timeout: Duration,
    late: impl FnOnce() -> Error,
    mut poll: impl FnMut(Duration) -> Result<Option<T>>,
) -> Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        crate::signal::check()?;
        if let Some(value) = poll(Duration::from_millis(50))? {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            return Err(late());
        }
    }
}
