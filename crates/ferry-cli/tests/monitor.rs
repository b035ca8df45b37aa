//! `ferry monitor` against running `ferry pub` and `ferry echo`: its state and event stream, its
//! refusals of hostile requests, and (with Chromium) the page itself showing the topic, its
//! ends and the publisher's rate, then the publisher gone once it is killed. Every wait is
//! bounded; every child is killed when the test ends.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

/// A child killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ferry(args: &[&str]) -> Running {
    Running(
        Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(args)
            .env_remove("FERRY_DOMAIN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start ferry"),
    )
}

fn domain(tag: &str) -> String {
    format!("mon{}{tag}", std::process::id())
}

/// `ferry monitor` on a free loopback port, and the address it printed.
fn monitor(dom: &str) -> (Running, String) {
    monitor_with(dom, &[])
}

/// As `monitor`, with these environment variables.
fn monitor_with(dom: &str, env: &[(&str, String)]) -> (Running, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args([
            "monitor",
            "--listen",
            "127.0.0.1:0",
            "--domain",
            dom,
            "--period",
            "0.25",
        ])
        .env_remove("FERRY_PEERS")
        .env_remove("FERRY_DISCOVERY")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ferry monitor");
    // Its first line says where it listens: read by a thread, waited for at most 20 s.
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stderr).read_line(&mut line);
        let _ = tx.send(line);
    });
    let child = Running(child);
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the monitor said where it listens within 20 s");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    (child, addr)
}

/// One request (`head` as sent), and the whole response.
fn request(addr: &str, head: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn get(addr: &str, path: &str) -> String {
    request(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n"),
    )
}

fn state(addr: &str) -> serde_json::Value {
    let r = get(addr, "/api/state");
    let body = r.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {r}"))
}

/// The publishers and subscribers of `topic` in a state, as (role, node, alive, rate).
fn ends(s: &serde_json::Value, topic: &str) -> Vec<(String, String, bool, Option<f64>)> {
    s["topics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["topic"] == topic)
        .flat_map(|t| t["endpoints"].as_array().unwrap().clone())
        .map(|e| {
            (
                e["role"].as_str().unwrap().to_owned(),
                e["node"].as_str().unwrap().to_owned(),
                e["alive"].as_bool().unwrap(),
                e["rate"].as_f64(),
            )
        })
        .collect()
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// The highest rate any live publisher of `topic` shows.
fn publisher_rate(s: &serde_json::Value, topic: &str) -> f64 {
    ends(s, topic)
        .iter()
        .filter(|e| e.0 == "publisher" && e.2)
        .filter_map(|e| e.3)
        .fold(0.0, f64::max)
}

#[test]
fn the_state_shows_the_topic_its_ends_and_the_rate_and_the_stream_follows() {
    let dom = domain("state");
    let _publ = ferry(&[
        "pub", "demo", "--rate", "50", "--size", "64", "--domain", &dom,
    ]);
    let _echo = ferry(&["echo", "demo", "--domain", &dom]);
    let (_mon, addr) = monitor(&dom);
    // The rate is taken over the last second (four periods): wait for a steady one.
    assert!(
        wait_until(Duration::from_secs(20), || {
            let r = publisher_rate(&state(&addr), "demo");
            (r - 50.0).abs() <= 2.5
        }),
        "the publisher's rate within 5 % of 50/s: {:?}",
        ends(&state(&addr), "demo")
    );
    let s = state(&addr);
    let e = ends(&s, "demo");
    assert!(e
        .iter()
        .any(|e| e.0 == "publisher" && e.1 == "ferry-pub" && e.2));
    assert!(e
        .iter()
        .any(|e| e.0 == "subscriber" && e.1 == "ferry-echo" && e.2));
    assert!(s["build_ms"].as_f64().unwrap() >= 0.0);

    // The event stream: each new state as it comes.
    let mut conn = TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    conn.write_all(b"GET /api/events HTTP/1.1\r\n\r\n").unwrap();
    let mut reader = BufReader::new(conn);
    let mut times = Vec::new();
    let mut line = String::new();
    while times.len() < 3 {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended");
        if let Some(json) = line.strip_prefix("data: ") {
            let v: serde_json::Value = serde_json::from_str(json).unwrap();
            times.push(v["time_ms"].as_u64().unwrap());
        }
    }
    assert!(times[0] < times[1] && times[1] < times[2], "{times:?}");

    // The page and its script come from the binary.
    assert!(get(&addr, "/").contains("<title>ferry monitor</title>"));
    assert!(get(&addr, "/monitor.js").contains("api/state"));
}

/// The topic page's last message: read from the publisher's ring without subscribing, decoded
/// by the topic's type when it has one, hex otherwise; a bad request gets an error.
#[test]
fn the_last_message_is_shown_decoded_when_the_topic_has_a_type_and_as_hex_otherwise() {
    let dom = domain("last");
    let _typed = ferry(&[
        "pub",
        "imu",
        "--rate",
        "20",
        "--type",
        "sensor_msgs/msg/Imu",
        "--schema",
        common::IMU_SCHEMA,
        "--yaml",
        "{header: {frame_id: base}, linear_acceleration: {z: 9.5}}",
        "--domain",
        &dom,
    ]);
    let _raw = ferry(&[
        "pub", "raw", "--rate", "20", "--size", "300", "--domain", &dom,
    ]);
    let (_mon, addr) = monitor(&dom);
    let last = |topic: &str| -> serde_json::Value {
        let body = get(&addr, &format!("/api/last?domain={dom}&topic={topic}"));
        serde_json::from_str(body.split("\r\n\r\n").nth(1).unwrap_or("null")).unwrap_or_default()
    };
    assert!(
        wait_until(Duration::from_secs(20), || {
            last("imu")["messages"]
                .as_array()
                .is_some_and(|m| !m.is_empty())
                && last("raw")["messages"]
                    .as_array()
                    .is_some_and(|m| !m.is_empty())
        }),
        "both publishers' newest messages: {} {}",
        last("imu"),
        last("raw")
    );
    let imu = &last("imu")["messages"][0];
    assert_eq!(imu["node"], "ferry-pub");
    let decoded: serde_json::Value =
        serde_json::from_str(imu["decoded"].as_str().expect("decoded")).unwrap();
    assert_eq!(decoded["header"]["frame_id"], "base");
    assert_eq!(decoded["linear_acceleration"]["z"], 9.5);
    let raw = &last("raw")["messages"][0];
    assert!(raw["decoded"].is_null(), "{raw}");
    assert_eq!(raw["len"], 300);
    // `ferry pub --size` sends its sequence number, then that number's low byte over and over.
    let hex = raw["hex"].as_str().unwrap();
    assert_eq!(hex.len(), 2 * 256, "the first 256 bytes as hex");
    let seq = raw["seq"].as_u64().unwrap();
    assert!(hex.ends_with(&format!("{:02x}", seq as u8)), "{hex}");
    // Sequence numbers move on as the publishers send.
    assert!(wait_until(Duration::from_secs(10), || {
        last("raw")["messages"][0]["seq"].as_u64() > Some(seq)
    }));
    // Bad requests: a name ferry refuses, a missing topic.
    let bad = get(&addr, &format!("/api/last?domain={dom}&topic=a%20b"));
    assert!(
        bad.starts_with("HTTP/1.1 400") && bad.contains("invalid topic name"),
        "{bad}"
    );
    let missing = get(&addr, &format!("/api/last?domain={dom}"));
    assert!(missing.starts_with("HTTP/1.1 400"), "{missing}");
    let none = last("absent");
    assert_eq!(none["messages"].as_array().map(Vec::len), Some(0), "{none}");
}

/// Links are told apart: a multicast publisher and subscriber, and the Zenoh bridge's ends
/// (its node's name).
#[test]
fn multicast_links_and_the_zenoh_bridges_ends_are_told_apart() {
    use ferry::{Node, Qos, Transport};
    let dom = domain("links");
    let port = 30_000 + (std::process::id() % 20_000) as u16;
    let group = ferry::MulticastGroup::parse(&format!("239.255.78.1:{port}"), None, 0).unwrap();
    let node = Node::with_domain("mcast", &dom).unwrap();
    let q = Qos::default().transport(Transport::Udp).multicast(group);
    let _mp = node.publisher("m", &q).unwrap();
    let _ms = node.subscriber("m", &q).unwrap();
    let bridge = Node::with_domain(ferry::admin::ZENOH_BRIDGE_NODE, &dom).unwrap();
    let _bp = bridge
        .publisher("z", &Qos::default().transport(Transport::Shm))
        .unwrap();
    let (_mon, addr) = monitor(&dom);
    let s = state(&addr);
    let topic = |name: &str| {
        s["topics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["topic"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {s}"))
    };
    let m = topic("m");
    let ends = m["endpoints"].as_array().unwrap();
    assert_eq!(ends.len(), 2, "{m}");
    assert!(
        ends.iter()
            .all(|e| e["multicast"] == true && e["transport"] == "udp"),
        "{m}"
    );
    let z = topic("z");
    assert_eq!(z["endpoints"][0]["bridge"], "zenoh", "{z}");
    assert_eq!(z["endpoints"][0]["multicast"], false, "{z}");
}

/// A discovery announcement (version 3) from another host: one entry per (role, topic, port),
/// untyped, reliable.
fn announcement(dom: &str, entries: &[(u8, &str, u16)]) -> Vec<u8> {
    let mut b = vec![0x46, 0x44, 3, 1];
    b.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    b.extend_from_slice(&0x0A11_0CA7_u64.to_le_bytes());
    b.extend_from_slice(&(dom.len() as u16).to_le_bytes());
    b.extend_from_slice(dom.as_bytes());
    for (i, (role, topic, port)) in entries.iter().enumerate() {
        b.extend_from_slice(&[*role, 1]);
        b.extend_from_slice(&port.to_le_bytes());
        b.extend_from_slice(&(0x100 + i as u64).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&(topic.len() as u16).to_le_bytes());
        b.extend_from_slice(topic.as_bytes());
    }
    b
}

#[test]
fn endpoints_other_hosts_announce_are_shown() {
    let dom = domain("remote");
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (_mon, addr) = monitor_with(
        &dom,
        &[
            ("FERRY_PEERS", "127.0.0.1".to_owned()),
            ("FERRY_DISCOVERY_PORT", port.to_string()),
        ],
    );
    let forger = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let datagram = announcement(&dom, &[(1, "far/away", 7001), (2, "far/away", 7002)]);
    let shown = wait_until(Duration::from_secs(20), || {
        let _ = forger.send_to(&datagram, ("127.0.0.1", port));
        let s = state(&addr);
        let remote = s["remote"].as_array().cloned().unwrap_or_default();
        remote.len() == 2
            && remote.iter().any(|r| {
                r["role"] == "publisher"
                    && r["topic"] == "far/away"
                    && r["address"] == "127.0.0.1:7001"
            })
    });
    assert!(shown, "{}", state(&addr));
    // Without discovery the state says why no other host is shown.
    let (_alone, alone) = monitor(&domain("alone"));
    let s = state(&alone);
    assert!(s["remote"].as_array().unwrap().is_empty());
    assert!(
        s["remote_note"].as_str().unwrap().contains("discovery"),
        "{s}"
    );
}

#[test]
fn hostile_requests_are_refused_within_bounds() {
    let dom = domain("hostile");
    let (_mon, addr) = monitor(&dom);
    let status = |r: &str| r.split(' ').nth(1).unwrap_or("").to_owned();
    assert_eq!(status(&request(&addr, "POST / HTTP/1.1\r\n\r\n")), "405");
    assert_eq!(status(&request(&addr, "NOT HTTP\r\n\r\n")), "400");
    let huge = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(20_000));
    assert_eq!(status(&request(&addr, &huge)), "431");
    for path in [
        "/lab/../Cargo.toml",
        "/lab/.hidden.html",
        "/lab/x.sh",
        "/etc/passwd",
    ] {
        assert_eq!(status(&get(&addr, path)), "404", "{path}");
    }
    // No lab report in this test's working directory: said so, not served.
    assert!(get(&addr, "/api/lab").contains("\"report\":null"));
    // Idle connections beyond the limit are answered 503 at once; the monitor still serves
    // once they go.
    let idle: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let mut refused = 0;
    for mut c in (0..8).map(|_| TcpStream::connect(&addr).unwrap()) {
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        if out.starts_with("HTTP/1.1 503") {
            refused += 1;
        }
    }
    assert!(refused > 0, "more than the connection limit were served");
    drop(idle);
    assert!(
        wait_until(Duration::from_secs(10), || status(&get(
            &addr,
            "/api/state"
        )) == "200"),
        "served again once the idle connections went"
    );
}

/// Chromium renders `url` (JavaScript run for `ms` of virtual time) and gives its DOM.
fn chromium_dom(url: &str, ms: u32) -> String {
    let out = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .arg(format!("--virtual-time-budget={ms}"))
        .args(["--dump-dom", url])
        .stderr(Stdio::null())
        .output()
        .expect("run chromium");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn chromium_screenshot(url: &str, path: &Path, height: u32) {
    let ok = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!("--window-size=1300,{height}"))
        .arg("--virtual-time-budget=3000")
        .arg(format!("--screenshot={}", path.display()))
        .arg(url)
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("run chromium")
        .success();
    assert!(ok && path.is_file(), "no screenshot at {}", path.display());
}

fn chromium() -> &'static str {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .expect("Chromium (the page is tested in a real browser; .ci/run installs it)")
}

/// The page's endpoint rows as (role, alive, rate).
fn rows(dom: &str) -> Vec<(String, bool, Option<f64>)> {
    dom.split("<tr ")
        .skip(1)
        .filter(|r| r.contains("data-role=\"") && r.contains("data-topic-row=\"demo\""))
        .map(|r| {
            let attr = |name: &str| {
                r.split(&format!("{name}=\""))
                    .nth(1)
                    .and_then(|v| v.split('"').next())
                    .unwrap_or("")
                    .to_owned()
            };
            (
                attr("data-role"),
                attr("data-alive") == "true",
                attr("data-rate").parse().ok(),
            )
        })
        .collect()
}

#[test]
#[ignore = "needs Chromium (CI installs it and runs this test by name)"]
fn the_page_in_chromium_shows_the_topic_its_ends_and_the_rate_then_the_publisher_gone() {
    let dom = domain("page");
    let mut publ = ferry(&[
        "pub", "demo", "--rate", "50", "--size", "64", "--domain", &dom,
    ]);
    let _echo = ferry(&["echo", "demo", "--domain", &dom]);
    let (_mon, addr) = monitor(&dom);
    assert!(
        wait_until(Duration::from_secs(20), || {
            (publisher_rate(&state(&addr), "demo") - 50.0).abs() <= 2.5
        }),
        "a steady rate first"
    );
    // ?poll: the page reads the state each second, which a headless browser can wait for
    // (the event stream it opens otherwise never finishes loading).
    let url = format!("http://{addr}/?poll");
    let page = chromium_dom(&url, 3000);
    assert!(
        page.contains("data-topic=\"demo\""),
        "the graph shows the topic: {page}"
    );
    let live = rows(&page);
    let publisher = live
        .iter()
        .filter(|r| r.0 == "publisher" && r.1)
        .filter_map(|r| r.2)
        .fold(0.0, f64::max);
    assert!(
        (publisher - 50.0).abs() <= 2.5,
        "the page shows the publisher's rate within 5 % of 50/s: {live:?}"
    );
    assert!(live.iter().any(|r| r.0 == "subscriber" && r.1), "{live:?}");

    // Screenshots of the graph and of the topic's page (docs/ holds the ones made so).
    let shots = std::env::var_os("FERRY_MONITOR_SHOTS")
        .map_or_else(|| common::tmp_path("monitor-shots"), Into::into);
    std::fs::create_dir_all(&shots).unwrap();
    chromium_screenshot(&url, &shots.join("monitor-graph.png"), 560);
    chromium_screenshot(
        &format!("{url}#/topic/{dom}/demo"),
        &shots.join("monitor-topic.png"),
        900,
    );

    // The topic's page shows its last message.
    let topic_page = chromium_dom(&format!("{url}#/topic/{dom}/demo"), 3000);
    assert!(
        topic_page.contains("data-last-seq=\""),
        "the topic's page shows the last message: {topic_page}"
    );

    // Killed, the publisher is shown gone.
    let _ = publ.0.kill();
    let _ = publ.0.wait();
    assert!(
        wait_until(Duration::from_secs(20), || {
            let after = rows(&chromium_dom(&url, 2000));
            !after.is_empty() && !after.iter().any(|r| r.0 == "publisher" && r.1)
        }),
        "the page shows the killed publisher gone"
    );
}
