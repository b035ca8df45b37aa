//! The C and C++ examples, compiled with the system's `cc` and `c++` against the library this
//! test was built with, talking to each other and to the `ferry` command over shared memory and
//! UDP, every byte checked. Each run is bounded by a timeout.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long one example or command may run.
const RUN_TIMEOUT: Duration = Duration::from_secs(30);

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// target/<profile>/deps: where this test runs from, and where cargo builds the library it is
/// linked with, all its kinds at once (libferry_c.so and libferry_c.a beside the rlib; only a
/// `cargo build` of the library itself copies them up to target/<profile>).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.parent()
        .expect("the test runs from target/<profile>/deps")
        .to_path_buf()
}

/// target/<profile>, where cargo puts the `ferry` executable.
fn profile_dir() -> PathBuf {
    lib_dir()
        .parent()
        .expect("target/<profile>/deps has a parent")
        .to_path_buf()
}

/// A fresh directory for this test process's builds and outputs.
fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("ferry-c-examples-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir
    })
}

/// A domain of this test's own (tests run in parallel, and other processes may use ferry).
fn domain() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    // Relaxed: only uniqueness matters.
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("fc-ex-{}-{n}", std::process::id())
}

/// Runs `command` to its end, at most RUN_TIMEOUT; panics with its output if it fails.
fn run(what: &str, command: &mut Command) -> Output {
    run_within(what, command, RUN_TIMEOUT)
}

fn run_within(what: &str, command: &mut Command, timeout: Duration) -> Output {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    wait_within(what, child, timeout)
}

fn wait(what: &str, child: std::process::Child) -> Output {
    wait_within(what, child, RUN_TIMEOUT)
}

fn wait_within(what: &str, mut child: std::process::Child, timeout: Duration) -> Output {
    let deadline = Instant::now() + timeout;
    loop {
        if child.try_wait().expect("wait for a child").is_some() {
            break;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collect a killed child");
            panic!(
                "{what} did not end within {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("collect a child's output");
    assert!(
        out.status.success(),
        "{what} failed ({})\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The compiler `name` from PATH, or a failure that says what to install.
fn compiler(name: &str) -> &str {
    let found = Command::new(name)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "`{name}` is not on PATH: these tests compile the C and C++ examples against \
         libferry_c; install a C and C++ compiler (Debian/Ubuntu: apt-get install build-essential \
         g++)"
    );
    name
}

/// The examples, compiled once: pub, sub (C) and pubsub (C++), linked to libferry_c.so, and
/// pingpong (C; only compiled here: it pins threads to CPUs 0 and 1 and spins).
struct Built {
    publisher: PathBuf,
    subscriber: PathBuf,
    pubsub: PathBuf,
}

fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let lib = lib_dir();
        assert!(
            lib.join("libferry_c.so").exists() && lib.join("libferry_c.a").exists(),
            "libferry_c.so and libferry_c.a are not in {} (cargo builds them with this test)",
            lib.display()
        );
        let include = root().join("crates/ferry-c/include");
        let link = |cmd: &mut Command| {
            cmd.arg("-L")
                .arg(&lib)
                .arg("-lferry_c")
                .arg(format!("-Wl,-rpath,{}", lib.display()));
        };
        let compile = |tool: &str, std: &str, source: &str, out: &str| {
            let exe = scratch().join(out);
            let mut cmd = Command::new(compiler(tool));
            cmd.args([
                std,
                "-pthread",
                "-Wall",
                "-Wextra",
                "-Wpedantic",
                "-Werror",
                "-O1",
                "-I",
            ])
            .arg(&include)
            .arg(root().join(source))
            .arg("-o")
            .arg(&exe);
            link(&mut cmd);
            run(&format!("{tool} {source}"), &mut cmd);
            exe
        };
        let built = Built {
            publisher: compile("cc", "-std=c11", "examples/c/pub.c", "pub"),
            subscriber: compile("cc", "-std=c11", "examples/c/sub.c", "sub"),
            pubsub: compile("c++", "-std=c++17", "examples/cpp/pubsub.cpp", "pubsub"),
        };
        compile("cc", "-std=c11", "examples/c/pingpong.c", "pingpong");
        built
    })
}

/// The `ferry` command of this build. cargo builds it with the workspace's tests (ferry-cli's
/// own tests need it), but not when only this crate is tested, and a `ferry` left in the target
/// directory by an earlier build may speak an older shared-memory layout: so cargo is asked for
/// it once here (it does nothing when the command is up to date).
fn ferry_cli() -> &'static Path {
    static FERRY: OnceLock<PathBuf> = OnceLock::new();
    FERRY.get_or_init(|| {
        let dir = profile_dir();
        let exe = dir.join("ferry");
        let target = dir.parent().expect("target/<profile> has a parent");
        let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cargo
            .args(["build", "-p", "ferry-cli", "--bin", "ferry", "--target-dir"])
            .arg(target)
            .current_dir(root());
        if dir.file_name().is_some_and(|p| p == "release") {
            cargo.arg("--release");
        }
        // Building the command and the lab behind it takes minutes on a small machine.
        let within = Duration::from_secs(20 * 60);
        run_within(
            "cargo build -p ferry-cli (the ferry command)",
            &mut cargo,
            within,
        );
        assert!(exe.exists(), "no ferry command at {}", exe.display());
        exe
    })
}

/// A command run in `domain`, with none of the caller's other FERRY_* settings.
fn in_domain(program: &Path, domain: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.env("FERRY_DOMAIN", domain);
    for var in [
        "FERRY_KEY_FILE",
        "FERRY_PEERS",
        "FERRY_DISCOVERY",
        "FERRY_IMPAIR",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// Starts `command` in the background (its output collected).
fn start(what: &str, command: &mut Command) -> std::process::Child {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"))
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The C subscriber receives `count` messages of `size` bytes from `publisher`, started after
/// it, and checks every byte.
fn c_subscriber_receives(transport: &str, count: u64, size: usize, publisher: &mut Command) {
    let d = domain_of(publisher);
    let sub = start(
        "the C subscriber",
        in_domain(&built().subscriber, &d).args(["t", transport, &count.to_string(), "20"]),
    );
    run("the publisher", publisher);
    let out = wait("the C subscriber", sub);
    let expected = format!(
        "received {count} messages, {} bytes, every byte as expected",
        count * size as u64
    );
    assert!(stdout(&out).contains(&expected), "{}", stdout(&out));
}

fn domain_of(cmd: &Command) -> String {
    cmd.get_envs()
        .find(|(k, _)| *k == "FERRY_DOMAIN")
        .and_then(|(_, v)| v)
        .expect("the command has a domain")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_c_publisher_feeds_a_c_subscriber_over_shm_and_udp() {
    for transport in ["shm", "udp"] {
        let d = domain();
        c_subscriber_receives(
            transport,
            50,
            70_000,
            in_domain(&built().publisher, &d).args(["t", transport, "70000", "50"]),
        );
    }
}

#[test]
fn ferry_pub_feeds_the_c_subscriber_over_shm_and_udp() {
    for transport in ["shm", "udp"] {
        let d = domain();
        c_subscriber_receives(
            transport,
            50,
            70_000,
            in_domain(ferry_cli(), &d).args([
                "pub",
                "t",
                "--transport",
                transport,
                "--size",
                "70000",
                "--count",
                "50",
                "--rate",
                "0",
                "--wait-subscribers",
                "1",
            ]),
        );
    }
}

#[test]
fn the_c_publisher_feeds_ferry_echo_over_shm_and_udp() {
    // 16 bytes: `ferry echo --json` shows the first 16 bytes of each message, so every byte.
    const COUNT: u64 = 20;
    for transport in ["shm", "udp"] {
        let d = domain();
        let echo = start(
            "ferry echo",
            in_domain(ferry_cli(), &d).args([
                "echo",
                "t",
                "--json",
                "--transport",
                transport,
                "--count",
                &COUNT.to_string(),
                "--timeout",
                "20",
            ]),
        );
        run(
            "the C publisher",
            in_domain(&built().publisher, &d).args(["t", transport, "16", &COUNT.to_string()]),
        );
        let out = stdout(&wait("ferry echo", echo));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), COUNT as usize, "{out}");
        for (seq, line) in lines.iter().enumerate() {
            let mut bytes = (seq as u64).to_le_bytes().to_vec();
            bytes.extend([seq as u8; 8]);
            let head: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let expected =
                format!("{{\"seq\":{seq},\"size\":16,\"skipped\":0,\"head\":\"{head}\"}}");
            assert_eq!(*line, expected, "over {transport}");
        }
    }
}

#[test]
fn the_cpp_example_talks_over_shm_and_udp() {
    let out = run(
        "the C++ example",
        in_domain(&built().pubsub, &domain()).args(["50", "10000"]),
    );
    let text = stdout(&out);
    for transport in ["shm", "udp"] {
        let expected = format!("{transport}: 50 messages of 10000 bytes, every byte as sent");
        assert!(text.contains(&expected), "{text}");
    }
}

#[test]
fn a_c_program_links_the_static_library() {
    let lib = lib_dir();
    let exe = scratch().join("pub-static");
    run(
        "cc with libferry_c.a",
        Command::new(compiler("cc"))
            .args(["-std=c11", "-I"])
            .arg(root().join("crates/ferry-c/include"))
            .arg(root().join("examples/c/pub.c"))
            .arg(lib.join("libferry_c.a"))
            .args(["-lpthread", "-ldl", "-lm", "-o"])
            .arg(&exe),
    );
    // Started with a bad argument, it answers with its usage: it links and runs.
    let out = Command::new(&exe)
        .args(["t", "neither-shm-nor-udp"])
        .output()
        .expect("run the statically linked example");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: pub"));
}

#[test]
fn the_readmes_cpp_example_compiles() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let block = readme
        .split("```cpp\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the README has a ```cpp block");
    let (includes, body): (Vec<&str>, Vec<&str>) =
        block.lines().partition(|l| l.starts_with("#include"));
    let source = scratch().join("readme.cpp");
    std::fs::write(
        &source,
        format!(
            "{}\nint main() {{\n{}\n}}\n",
            includes.join("\n"),
            body.join("\n")
        ),
    )
    .expect("write the README's example");
    run(
        "c++ on the README's example",
        Command::new(compiler("c++"))
            .args(["-std=c++17", "-fsyntax-only", "-I"])
            .arg(root().join("crates/ferry-c/include"))
            .arg(&source),
    );
}
