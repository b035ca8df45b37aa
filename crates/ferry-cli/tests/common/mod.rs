//! What the command's integration tests share: a `ferry lab agent` started for a test, a child
//! with a bounded life, bounded lab runs and their results, two network namespaces made and
//! removed, and readers of echo's output; `running`: a `ferry` child that runs beside the test.
//! Each test binary uses some of it.
#![allow(dead_code)]

pub mod running;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ferry_lab::netns::{self, Pair, Spec};

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

    /// Starts `ferry lab agent` in namespace B of `pair`, on its address (port 7447), for a lab
    /// in namespace A only.
    pub fn in_namespace_b(pair: &Pair) -> Agent {
        let listen = format!("{}:7447", pair.addr[1]);
        let lab = pair.addr[0].to_string();
        Agent::start(
            pair.command(1, env!("CARGO_BIN_EXE_ferry")),
            &["--listen", &listen, "--allow", &lab],
        )
    }

    /// Two network namespaces joined by a link (named after `prefix` and `device`, on subnet
    /// 10.`net`, no link rate) and `ferry lab agent` in B, for a lab in A.
    pub fn across_namespaces(prefix: &str, device: &str, net: u8) -> (Pair, Agent) {
        let pair = two_namespaces(&Spec {
            prefix,
            device,
            net,
            rate: None,
        });
        let agent = Agent::in_namespace_b(&pair);
        (pair, agent)
    }

    /// What the agent has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Checks that the agent has logged `needle`.
    pub fn check_logged(&self, needle: &str) {
        let log = self.log();
        assert!(log.contains(needle), "{log}");
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Starts `cmd` with its output piped; it is killed after `limit` whatever happens (nothing
/// outlives a test's bound), and its output comes back through [`Bounded::ended`].
pub fn start_bounded(mut cmd: Command, limit: Duration) -> Bounded {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawn");
    let pid = child.id();
    let (tx, output) = std::sync::mpsc::channel();
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
    Bounded { output, limit }
}

/// A command started by [`start_bounded`].
pub struct Bounded {
    output: std::sync::mpsc::Receiver<std::io::Result<Output>>,
    limit: Duration,
}

impl Bounded {
    /// Waits until the command (`what`, for the failure) ends, at its limit at the latest.
    pub fn ended(self, what: &str) -> Ended {
        let out = self
            .output
            .recv_timeout(self.limit + Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("{what} did not end"))
            .unwrap_or_else(|e| panic!("{what}'s output: {e}"));
        Ended {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// How a command ended, and what it wrote, as text.
pub struct Ended {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Ended {
    /// Whether the command exited 0.
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// Fails the test, with everything the command (`what`) wrote, unless it succeeded.
    pub fn check_success(&self, what: &str) {
        assert!(
            self.success(),
            "{what} failed ({})\nstdout: {}\nstderr: {}",
            self.status,
            self.stdout,
            self.stderr
        );
    }
}

/// Two network namespaces joined by a veth pair, as `spec` asks (a link rate too, if it names
/// one). What they need is asserted first, by name: CI runs the tests that make them as root.
pub fn two_namespaces(spec: &Spec) -> Pair {
    let with_rate = spec.rate.is_some();
    let missing = netns::missing(with_rate);
    assert!(
        missing.is_empty(),
        "two namespaces{} need {missing:?}; CI runs this test as root with iproute2",
        if with_rate { " and a link rate" } else { "" }
    );
    Pair::create(spec).expect("two network namespaces joined by a link")
}

/// Two network namespaces, hosts as far as ferry can tell, and the domain a test uses in them.
pub struct Hosts {
    pub pair: Pair,
    pub domain: String,
}

impl Hosts {
    /// The namespaces `spec` asks for (see [`two_namespaces`]), and a domain named after `tag`.
    pub fn new(spec: &Spec, tag: &str) -> Hosts {
        Hosts {
            pair: two_namespaces(spec),
            domain: format!("{tag}{}", std::process::id()),
        }
    }

    /// `ferry ARGS` over UDP in the test's domain in namespace `side`, discovery reaching the
    /// other one; no domain or key from the environment, nothing on standard input.
    pub fn ferry(&self, side: usize, args: &[&str]) -> Command {
        let mut cmd = self.pair.command(side, env!("CARGO_BIN_EXE_ferry"));
        cmd.args(args)
            .args(["--transport", "udp", "--domain", &self.domain])
            .env("FERRY_PEERS", self.pair.addr[1 - side].to_string())
            .env_remove("FERRY_DOMAIN")
            .env_remove("FERRY_KEY_FILE")
            .stdin(Stdio::null());
        cmd
    }
}

/// Asserts that this test runs as root and that ip and tc are here, which `what` needs; the path
/// of ip.
pub fn root_ip_and_tc(what: &str) -> PathBuf {
    assert!(
        rustix::process::geteuid().is_root(),
        "network namespaces need root; CI runs this test as root"
    );
    let (Some(ip), Some(_)) = (netns::find_tool("ip"), netns::find_tool("tc")) else {
        panic!("{what} needs ip and tc (iproute2); CI installs them");
    };
    ip
}

/// Checks that the namespaces a run's results name (`{"A": NAME, "B": NAME}`) are gone.
pub fn check_namespaces_gone(ip: &Path, namespaces: &serde_json::Value) {
    let left = netns::list(ip).expect("ip netns list");
    for side in ["A", "B"] {
        let ns = namespaces[side].as_str().expect("a namespace");
        assert!(
            !left.iter().any(|l| l == ns),
            "namespace {ns} was left behind: {left:?}"
        );
    }
}

/// Removes `pair`, and checks that its namespaces are gone.
pub fn remove_namespaces(pair: Pair) {
    let ns = pair.ns.clone();
    let ip = netns::find_tool("ip").expect("ip");
    drop(pair);
    let list = netns::list(&ip).expect("ip netns list");
    for n in ns {
        assert!(!list.contains(&n), "{n} is still there: {list:?}");
    }
}

/// Runs `ferry lab ARGS` with `command` (the ferry executable, perhaps behind `ip netns exec`),
/// in no domain of the environment, its output to files (so no pipe can fill); killed, and the
/// test failed with what it printed, after `limit`.
pub fn run_lab(mut command: Command, args: &[&str], limit: Duration) -> Ended {
    let (out_path, err_path) = (tmp_path("lab-out"), tmp_path("lab-err"));
    let mut child = command
        .env_remove("FERRY_DOMAIN")
        .arg("lab")
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("start ferry lab");
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |p: &Path| {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        let _ = std::fs::remove_file(p);
        text
    };
    let (stdout, stderr) = (read(&out_path), read(&err_path));
    let Some(status) = status else {
        panic!("ferry lab {args:?} ran past {limit:?}\nstdout: {stdout}\nstderr: {stderr}");
    };
    Ended {
        status,
        stdout,
        stderr,
    }
}

/// The arguments of a `ferry lab throughput` short enough for a test: 1 KiB messages for 0.3 s,
/// one round.
pub const SHORT_THROUGHPUT: [&str; 6] = ["--sizes", "1K", "--duration", "0.3", "--rounds", "1"];

/// Runs `ferry lab EXPERIMENT ARGS` as [`run_lab`] does.
pub fn lab(experiment: &str, args: &[&str], limit: Duration) -> Ended {
    run_lab(
        Command::new(env!("CARGO_BIN_EXE_ferry")),
        &[&[experiment], args].concat(),
        limit,
    )
}

/// Runs `ferry lab EXPERIMENT ARGS --json FILE` as [`lab`] does, which must succeed; what it
/// printed, and the results it wrote, which must be EXPERIMENT's (the file is removed).
pub fn lab_results(experiment: &str, args: &[&str], limit: Duration) -> (Ended, serde_json::Value) {
    let json = tmp_path(&format!("{experiment}.json"));
    let all = [args, &["--json", json.to_str().expect("a UTF-8 path")]].concat();
    let out = lab(experiment, &all, limit);
    out.check_success(&format!("ferry lab {experiment}"));
    let results = read_json(&json);
    assert_eq!(results["experiment"], experiment);
    (out, results)
}

/// Runs `ferry lab EXPERIMENT ARGS`, which must be refused (within 30 s) saying `says`.
pub fn lab_refuses(experiment: &str, args: &[&str], says: &str) {
    let out = lab(experiment, args, Duration::from_secs(30));
    assert!(!out.success(), "{args:?} should be refused");
    assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
}

/// Fails the test, showing `text` (what `what` printed), unless it contains each of `parts`.
pub fn check_contains(what: &str, text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{what} lacks {part:?}: {text}");
    }
}

/// The ROS 2 IMU definition the typed tests declare.
pub const IMU_SCHEMA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../ferry-types/tests/data/Imu.msg"
);

/// The sequence numbers of `ferry echo`'s lines (`seq N  size ...`), as printed.
pub fn text_seqs(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect()
}

/// The sequence numbers of `ferry echo --json`'s lines.
pub fn json_seqs(stdout: &str) -> Vec<u64> {
    stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

/// The row of `transport` in a lab run's `rows`.
pub fn row_of<'a>(rows: &'a [serde_json::Value], transport: &str) -> &'a serde_json::Value {
    rows.iter()
        .find(|r| r["transport"] == transport)
        .unwrap_or_else(|| panic!("no {transport} row in {rows:?}"))
}

/// The results JSON a lab run wrote at `path` (the file is removed).
pub fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).expect("results JSON written");
    let _ = std::fs::remove_file(path);
    serde_json::from_str(&text).expect("valid JSON")
}
