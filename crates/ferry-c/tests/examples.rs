//! The C and C++ examples, compiled with the system's `cc` and `c++` against the library this
//! test was built with, talking to each other and to the `ferry` command over shared memory and
//! UDP, every byte checked; and the library installed by `crates/ferry-c/install.sh`, found by
//! `pkg-config` and by CMake's `find_package(ferry)`. Each run is bounded by a timeout.

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

/// The tool `name` from PATH, or a failure that says what to install (`package` on
/// Debian/Ubuntu) and why.
fn tool<'a>(name: &'a str, package: &str, why: &str) -> &'a str {
    let found = Command::new(name)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "`{name}` is not on PATH: {why}; install it (Debian/Ubuntu: apt-get install {package})"
    );
    name
}

/// The compiler `name` from PATH, or a failure that says what to install.
fn compiler(name: &str) -> &str {
    tool(
        name,
        "build-essential g++",
        "these tests compile the C and C++ examples against libferry_c",
    )
}

/// The examples, compiled once: pub, sub, service_server (C), pubsub and service_client (C++),
/// linked to libferry_c.so, and pingpong (C; only compiled here: it pins threads to CPUs 0 and 1
/// and spins); and tests/hpp_services.cpp and tests/hpp_waitset.cpp, the C++ service classes'
/// and wait set's own tests.
struct Built {
    publisher: PathBuf,
    subscriber: PathBuf,
    pubsub: PathBuf,
    service_server: PathBuf,
    service_client: PathBuf,
    hpp_services: PathBuf,
    hpp_waitset: PathBuf,
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
            service_server: compile(
                "cc",
                "-std=c11",
                "examples/c/service_server.c",
                "service_server",
            ),
            service_client: compile(
                "c++",
                "-std=c++17",
                "examples/cpp/service_client.cpp",
                "service_client",
            ),
            hpp_services: compile(
                "c++",
                "-std=c++17",
                "crates/ferry-c/tests/hpp_services.cpp",
                "hpp_services",
            ),
            hpp_waitset: compile(
                "c++",
                "-std=c++17",
                "crates/ferry-c/tests/hpp_waitset.cpp",
                "hpp_waitset",
            ),
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

/// A command run in `domain`, with none of the caller's other FERRY_* settings. A program finds
/// libferry_c by its rpath alone (this build's, or the installed one): `cargo test` sets
/// LD_LIBRARY_PATH, which the loader reads before an rpath, to directories that include
/// target/<profile>, where a `cargo build -p ferry-c` leaves a copy that may be older.
fn in_domain(program: &Path, domain: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.env("FERRY_DOMAIN", domain)
        .env_remove("LD_LIBRARY_PATH");
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

/// Over shm and then UDP, each in a domain of its own: the C subscriber gets 50 messages of
/// 70000 bytes from `program` run with `args(transport)`.
fn c_subscriber_receives_over_shm_and_udp(
    program: &Path,
    args: impl Fn(&'static str) -> Vec<&'static str>,
) {
    for transport in ["shm", "udp"] {
        let d = domain();
        c_subscriber_receives(
            transport,
            50,
            70_000,
            in_domain(program, &d).args(args(transport)),
        );
    }
}

#[test]
fn a_c_publisher_feeds_a_c_subscriber_over_shm_and_udp() {
    c_subscriber_receives_over_shm_and_udp(&built().publisher, |transport| {
        vec!["t", transport, "70000", "50"]
    });
}

#[test]
fn ferry_pub_feeds_the_c_subscriber_over_shm_and_udp() {
    c_subscriber_receives_over_shm_and_udp(ferry_cli(), |transport| {
        vec![
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
        ]
    });
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
        let expected =
            format!("{transport}: 50 messages of 10000 bytes, every byte as sent, and as kept");
        assert!(text.contains(&expected), "{text}");
    }
}

/// The C server of a service answers the C++ client: `count` requests of `size` bytes, half as
/// calls, half sent ahead; a third of them answered later and out of order, a third echoed from
/// the request's own bytes. Both check what they got.
fn the_c_server_answers_the_cpp_client(server: &Path, client: &Path, transport: &str) {
    let (count, size) = ("60", "3000");
    let d = domain();
    let service = format!("svc-{transport}");
    let serving = start(
        "the C service server",
        in_domain(server, &d).args([&service, transport, count, "20"]),
    );
    let out = run(
        "the C++ service client",
        in_domain(client, &d).args([&service, transport, count, size]),
    );
    let expected = format!("{service}: 30 calls and 30 requests sent ahead (");
    let text = stdout(&out);
    assert!(text.starts_with(&expected), "{text}");
    assert!(
        text.contains(&format!("of {size} bytes, every answer as expected")),
        "{text}"
    );
    let served = stdout(&wait("the C service server", serving));
    assert!(
        served.contains("answered 60 requests (20 later, out of order); 0 clients gone"),
        "{served}"
    );
}

#[test]
fn the_c_service_server_answers_the_cpp_client_over_shm_and_udp() {
    for transport in ["shm", "udp"] {
        the_c_server_answers_the_cpp_client(
            &built().service_server,
            &built().service_client,
            transport,
        );
    }
}

/// Runs a C++ test program (`what`, built as `program`) in a domain of its own; it passes
/// when it says `works`.
fn cpp_test_says(what: &str, program: &Path, works: &str) {
    let out = run(what, &mut in_domain(program, &domain()));
    assert!(stdout(&out).contains(works), "{}", stdout(&out));
}

#[test]
fn the_cpp_service_classes_answer_now_and_later_and_report_a_server_gone() {
    cpp_test_says(
        "tests/hpp_services.cpp",
        &built().hpp_services,
        "the C++ service classes work",
    );
}

#[test]
fn the_cpp_wait_set_reports_which_subscriber_server_or_client_is_ready() {
    cpp_test_says(
        "tests/hpp_waitset.cpp",
        &built().hpp_waitset,
        "the C++ wait set works",
    );
}

/// `crates/ferry-c/install.sh` into a fresh prefix, with the libraries of this build
/// (`FERRY_C_LIB_DIR`: a release build would take minutes here); then the C service server is
/// compiled with `pkg-config --cflags --libs ferry`, the C++ client with CMake's
/// `find_package(ferry)` and `ferry::ferry`, and a C program with `ferry::ferry_static`, and the
/// two service ends talk. pkg-config and cmake are required, as the compilers are.
#[test]
fn the_installed_library_is_found_by_pkg_config_and_cmake() {
    let pkg_config = tool(
        "pkg-config",
        "pkg-config",
        "this test compiles an example with `pkg-config --cflags --libs ferry`",
    );
    let cmake = tool(
        "cmake",
        "cmake",
        "this test builds examples with CMake's find_package(ferry)",
    );
    let prefix = scratch().join("prefix");
    let installed = run(
        "crates/ferry-c/install.sh",
        Command::new("sh")
            .arg(root().join("crates/ferry-c/install.sh"))
            .arg(&prefix)
            .env("FERRY_C_LIB_DIR", lib_dir()),
    );
    assert!(
        stdout(&installed).contains("installed ferry"),
        "{}",
        stdout(&installed)
    );
    for file in [
        "lib/libferry_c.so",
        "lib/libferry_c.a",
        "include/ferry.h",
        "include/ferry.hpp",
        "lib/pkgconfig/ferry.pc",
        "lib/cmake/ferry/ferryConfig.cmake",
        "lib/cmake/ferry/ferryConfigVersion.cmake",
    ] {
        assert!(prefix.join(file).is_file(), "install.sh wrote no {file}");
    }

    // pkg-config.
    let pkg = |args: &[&str]| {
        let out = run(
            &format!("pkg-config {}", args.join(" ")),
            Command::new(pkg_config)
                .args(args)
                .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")),
        );
        stdout(&out).trim().to_owned()
    };
    assert_eq!(pkg(&["--modversion", "ferry"]), env!("CARGO_PKG_VERSION"));
    let flags = pkg(&["--cflags", "--libs", "ferry"]);
    assert!(
        flags.contains(&format!("-I{}", prefix.join("include").display())),
        "{flags}"
    );
    let server = scratch().join("service_server-pkg-config");
    run(
        "cc with pkg-config --cflags --libs ferry",
        Command::new(compiler("cc"))
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
            .arg(root().join("examples/c/service_server.c"))
            .args(flags.split_whitespace())
            .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display()))
            .arg("-o")
            .arg(&server),
    );

    // CMake: the shared library's target and the static one's; a version this is not is refused.
    let project = scratch().join("cmake-project");
    let build = scratch().join("cmake-build");
    std::fs::create_dir_all(&project).expect("a CMake project directory");
    let version = env!("CARGO_PKG_VERSION");
    let (major, minor) = {
        let mut parts = version
            .split('.')
            .map(|p| p.parse::<u64>().expect("a number"));
        (parts.next().unwrap(), parts.next().unwrap())
    };
    let examples = root().join("examples");
    std::fs::write(
        project.join("CMakeLists.txt"),
        format!(
            r#"cmake_minimum_required(VERSION 3.10)
project(ferry_consumer LANGUAGES C CXX)
find_package(ferry {major}.{next} QUIET)
if(ferry_FOUND)
  message(FATAL_ERROR "ferry {version} was taken for {major}.{next}")
endif()
find_package(ferry {major}.{minor} REQUIRED)
add_executable(service_client "{examples}/cpp/service_client.cpp")
set_target_properties(service_client PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
target_link_libraries(service_client PRIVATE ferry::ferry)
add_executable(pub_static "{examples}/c/pub.c")
set_target_properties(pub_static PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON)
target_link_libraries(pub_static PRIVATE ferry::ferry_static)
"#,
            next = minor + 1,
            examples = examples.display(),
        ),
    )
    .expect("write CMakeLists.txt");
    run(
        "cmake (configure)",
        Command::new(cmake)
            .arg("-S")
            .arg(&project)
            .arg("-B")
            .arg(&build)
            .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display())),
    );
    // Linking the static library takes a while with a debug build's archive.
    run_within(
        "cmake --build",
        Command::new(cmake).arg("--build").arg(&build),
        Duration::from_secs(300),
    );
    // The static program links and runs: started with a bad argument, it answers its usage.
    let out = Command::new(build.join("pub_static"))
        .args(["t", "neither-shm-nor-udp"])
        .output()
        .expect("run the program linked with ferry::ferry_static");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: pub"));

    the_c_server_answers_the_cpp_client(&server, &build.join("service_client"), "shm");
    // The libraries' copies are large (a debug build's); the rest of the scratch stays.
    let _ = std::fs::remove_dir_all(&prefix);
    let _ = std::fs::remove_dir_all(&build);
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
