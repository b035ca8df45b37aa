//! A `ferry` child a test runs while it does other things: its output collected (as text, and
//! line by line as it comes), every wait on it bounded, and killed if the test ends first.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::process::{kill_process, Pid, Signal};

use super::Ended;

/// How long [`Running::succeed`] waits for the child to exit.
pub const LONG: Duration = Duration::from_secs(60);

/// How soon a command must have stopped after SIGINT or SIGTERM: it promises 1 s; this leaves
/// room for a loaded machine.
pub const STOP_BOUND: Duration = Duration::from_secs(2);

/// A domain no other test (or test run) uses.
pub fn domain(tag: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    // Relaxed: only uniqueness matters.
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("t{}{tag}{n}", std::process::id())
}

/// `ferry`, in no domain from the environment, with nothing on standard input.
pub fn ferry() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferry"));
    cmd.env_remove("FERRY_DOMAIN").stdin(Stdio::null());
    cmd
}

/// `ferry ARGS`, its output collected.
pub fn spawn(args: &[&str]) -> Running {
    spawn_cmd(ferry(), args, true)
}

/// As `spawn`, in `domain` given the way a user's shell would: in FERRY_DOMAIN.
pub fn spawn_in(domain: &str, args: &[&str]) -> Running {
    let mut cmd = ferry();
    cmd.env("FERRY_DOMAIN", domain);
    spawn_cmd(cmd, args, true)
}

/// As `spawn_in`, but nothing reads its standard output: once the pipe is full, writes wait.
pub fn spawn_in_unread(domain: &str, args: &[&str]) -> Running {
    let mut cmd = ferry();
    cmd.env("FERRY_DOMAIN", domain);
    spawn_cmd(cmd, args, false)
}

/// Starts `cmd ARGS` (a `ferry` command), its standard error collected, and its standard output
/// too when `read_stdout`.
pub fn spawn_cmd(mut cmd: Command, args: &[&str], read_stdout: bool) -> Running {
    let child = cmd
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ferry");
    let mut r = Running {
        child,
        stdout: None,
        stderr: None,
        _unread_stdout: None,
        what: format!("ferry {}", args.join(" ")),
    };
    if read_stdout {
        r.stdout = collect(r.child.stdout.take());
    } else {
        r._unread_stdout = r.child.stdout.take();
    }
    r.stderr = collect(r.child.stderr.take());
    r
}

/// The arguments of `ferry pub TOPIC ARGS` that publishes from when `subscribers` are attached
/// (within 30 s).
pub fn pub_args<'a>(topic: &'a str, subscribers: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let wait = ["--wait-subscribers", subscribers, "--wait-timeout", "30"];
    [&["pub", topic], args, &wait].concat()
}

/// A running child whose output is collected; killed if dropped before it finished.
pub struct Running {
    child: Child,
    stdout: Option<Collected>,
    stderr: Option<Collected>,
    /// Standard output left unread (a reader that stopped reading), when asked for.
    _unread_stdout: Option<ChildStdout>,
    what: String,
}

/// The text of a stream, and its lines as they come.
struct Collected {
    text: JoinHandle<String>,
    lines: mpsc::Receiver<String>,
}

fn collect(stream: Option<impl Read + Send + 'static>) -> Option<Collected> {
    stream.map(|s| {
        let (tx, lines) = mpsc::channel();
        let text = std::thread::spawn(move || {
            let mut text = String::new();
            for line in BufReader::new(s).lines() {
                let Ok(line) = line else { break };
                text.push_str(&line);
                text.push('\n');
                // The test may not be watching.
                let _ = tx.send(line);
            }
            text
        });
        Collected { text, lines }
    })
}

impl Running {
    /// Waits at most `timeout` for the child to exit; kills it and fails the test otherwise.
    pub fn finish(mut self, timeout: Duration) -> Ended {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let err = self
                    .stderr
                    .take()
                    .map(|c| c.text.join().unwrap_or_default());
                panic!(
                    "{} did not exit within {timeout:?}; stderr: {err:?}",
                    self.what
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        Ended {
            status,
            stdout: self
                .stdout
                .take()
                .map_or_else(String::new, |c| c.text.join().unwrap()),
            stderr: self
                .stderr
                .take()
                .map_or_else(String::new, |c| c.text.join().unwrap()),
        }
    }

    /// Waits at most `LONG` for the child to exit, which must succeed.
    pub fn succeed(self) -> Ended {
        let what = self.what.clone();
        let out = self.finish(LONG);
        assert!(out.status.success(), "{what} failed: {}", out.stderr);
        out
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits at most `timeout` for a line of standard output (`stderr` false) or error that
    /// contains `needle`, and returns it; fails the test (killing the child) otherwise.
    pub fn await_line(&self, stderr: bool, needle: &str, timeout: Duration) -> String {
        let stream = if stderr { &self.stderr } else { &self.stdout };
        let lines = &stream.as_ref().expect("a collected stream").lines;
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(e) => panic!(
                    "{}: no line with {needle:?} on {} within {timeout:?} ({e})",
                    self.what,
                    if stderr { "stderr" } else { "stdout" }
                ),
            }
        }
    }

    /// Sends `signal` to the child.
    pub fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(self.pid() as i32).expect("a child's pid");
        kill_process(pid, signal).expect("send a signal");
    }

    /// Sends `signal` (SIGINT or SIGTERM) and checks that the child stops within `STOP_BOUND`
    /// with the status a shell gives a process ended by it (128 + its number), saying so.
    pub fn stop_with(self, signal: Signal) -> Ended {
        let what = self.what.clone();
        self.signal(signal);
        let out = self.finish(STOP_BOUND);
        let number = signal.as_raw();
        assert_eq!(
            out.status.code(),
            Some(128 + number),
            "{what} after signal {number}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains("ferry: stopped by SIG"),
            "{what}: {}",
            out.stderr
        );
        assert!(!out.stderr.contains("error"), "{what}: {}", out.stderr);
        assert!(!out.stderr.contains("panicked"), "{what}: {}", out.stderr);
        out
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
