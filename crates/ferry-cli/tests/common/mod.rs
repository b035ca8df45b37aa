//! What the command's integration tests share: a `ferry lab agent` started for a test, a child
//! with a bounded life. Each test binary uses some of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A fresh path in the temporary directory, unique to this process and call.
pub fn tmp_path(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    // Relaxed: only uniqueness matters.
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("ferry-test-{}-{name}-{n}", std::process::id()))
}

/// A `ferry lab agent` started for a test (here, or in a network namespace through `command`);
/// killed when dropped. Its log goes to a file.
pub struct Agent {
    child: Child,
    log: PathBuf,
    /// Where it listens, from its first line.
    pub address: String,
}

impl Agent {
    /// Starts `ferry lab agent ARGS` here.
    pub fn here(args: &[&str]) -> Agent {
        Agent::start(Command::new(env!("CARGO_BIN_EXE_ferry")), args)
    }

    /// Starts `ferry lab agent ARGS` with `command` (the ferry executable, perhaps behind
    /// `ip netns exec`) and waits until it says where it listens.
    pub fn start(mut command: Command, args: &[&str]) -> Agent {
        let log = tmp_path("agent-log");
        let mut child = command
            .args(["lab", "agent"])
            .args(args)
            .env_remove("FERRY_KEY_FILE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("agent log"))
            .spawn()
            .expect("start ferry lab agent");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(rest) = text.split("listening on ").nth(1) {
                let address = rest
                    .split([',', ' ', '\n'])
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                return Agent {
                    child,
                    log,
                    address,
                };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the agent exited ({status}): {text}");
            }
            assert!(
                Instant::now() < deadline,
                "the agent did not listen: {text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the agent has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Starts `cmd` with its output piped; the output comes back on the returned channel when it
/// ends, and it is killed after `limit` whatever happens (nothing outlives a test's bound).
pub fn start_bounded(
    mut cmd: Command,
    limit: Duration,
) -> std::sync::mpsc::Receiver<std::io::Result<std::process::Output>> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawn");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        // SAFETY: kill(2) takes plain integers and has no memory effects; at worst the pid has
        // already ended.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
    });
    rx
}

/// Runs `ferry lab EXPERIMENT ARGS`, killed (and the test failed, with what it printed) after
/// `limit`.
pub fn lab(experiment: &str, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .env_remove("FERRY_DOMAIN")
        .args(["lab", experiment])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ferry");
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("reap");
            panic!(
                "ferry lab {experiment} {args:?} ran past {limit:?}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("reap")
}

/// The results JSON a lab run wrote at `path` (the file is removed).
pub fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).expect("results JSON written");
    let _ = std::fs::remove_file(path);
    serde_json::from_str(&text).expect("valid JSON")
}
