//! Helpers of the bridge's tests: payloads that catch any wrong byte, the bridge as a child
//! process (stopped with SIGTERM, its counts read back), Zenoh sessions on given endpoints, and
//! bounded waits.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use zenoh::Wait;

/// A unique ferry domain per test and run.
pub fn domain(test: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "z{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        &test[..test.len().min(10)]
    )
}

/// Message `seq` of `len` bytes (at least 8): the sequence number, then bytes derived from it.
pub fn payload(seq: u64, len: usize) -> Vec<u8> {
    let mut out = seq.to_le_bytes().to_vec();
    out.extend((0..len.saturating_sub(8)).map(|i| (seq as u8).wrapping_mul(31) ^ (i as u8)));
    out
}

/// The sequence number of a payload whose every byte is right.
pub fn check(bytes: &[u8]) -> Option<u64> {
    let seq = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    (payload(seq, bytes.len()) == bytes).then_some(seq)
}

/// Waits up to `limit` for `done`, looking every 10 ms.
pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    done()
}

/// A TCP port free on loopback now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Zenoh session of `mode` that connects to and listens on the given endpoints, with
/// multicast scouting off (it reaches nothing the test did not name).
pub fn zenoh_session(mode: &str, connect: &[String], listen: &[String]) -> zenoh::Session {
    let mut config = zenoh::Config::default();
    let list = |items: &[String]| {
        let q: Vec<String> = items.iter().map(|e| format!("\"{e}\"")).collect();
        format!("[{}]", q.join(","))
    };
    config.insert_json5("mode", &format!("\"{mode}\"")).unwrap();
    config
        .insert_json5("connect/endpoints", &list(connect))
        .unwrap();
    config
        .insert_json5("listen/endpoints", &list(listen))
        .unwrap();
    config
        .insert_json5("scouting/multicast/enabled", "false")
        .unwrap();
    zenoh::open(config).wait().expect("open a Zenoh session")
}

/// The bridge's binary.
pub const EXE: &str = env!("CARGO_BIN_EXE_ferry-zenoh");

/// A running `ferry-zenoh`, killed if the test ends before it is stopped.
pub struct BridgeProcess {
    child: Option<Child>,
    stdout: Option<ChildStdout>,
}

impl BridgeProcess {
    /// Starts `ferry-zenoh ARGS` here and waits until it says it is ready.
    pub fn start(args: &[&str]) -> BridgeProcess {
        Self::start_with(Command::new(EXE), args)
    }

    /// Starts `ferry-zenoh ARGS` with `cmd`, a command that runs the bridge (`EXE`, or a
    /// wrapper that runs it), and waits until it says it is ready.
    pub fn start_with(mut cmd: Command, args: &[&str]) -> BridgeProcess {
        let mut child = cmd
            .args(args)
            .arg("--json")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ferry-zenoh");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[bridge] {line}");
                if line.starts_with("ferry-zenoh: ready") {
                    let _ = tx.send(());
                }
            }
        });
        let stdout = child.stdout.take();
        let mut bridge = BridgeProcess {
            child: Some(child),
            stdout,
        };
        if rx.recv_timeout(Duration::from_secs(60)).is_err() {
            bridge.kill();
            panic!("ferry-zenoh did not say it was ready within 60 s");
        }
        bridge
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops it with SIGTERM and returns the counts it printed (JSON).
    pub fn stop(mut self) -> serde_json::Value {
        let mut child = self.child.take().unwrap();
        // SAFETY: kill has no memory preconditions; the pid is our own child, not yet reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > end {
                let _ = child.kill();
                panic!("ferry-zenoh did not stop within 30 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        self.stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(
            status.code(),
            Some(143),
            "exit status after SIGTERM: {status}"
        );
        counts(&out)
    }
}

impl Drop for BridgeProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The counts a bridge printed.
pub fn counts(json: &str) -> serde_json::Value {
    serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("bridge counts {json:?}: {e}"))
}
