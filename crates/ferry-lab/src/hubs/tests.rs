use super::messages::{header, intact, write_message, DATA, PROBE, WARMUP};
use super::*;
use crate::experiment::testing::{assert_contains, only_plot, read_back};
use crate::experiment::Experiment;
use crate::netns::parse_link_rate;
use crate::studies::{cite_first, DDS_HUBS};
use crate::subject::Subject;
use ferry::WaitStrategy;
use std::net::{Ipv4Addr, SocketAddrV4};

#[test]

fn example_results_read_back_and_draw() {
    let (value, back, section, table, summary) = read_back(&example());
    // The rows' JSON is what it was before the results were typed.
    let row = &value["rows"][0];
    assert_eq!(row["transport"], "shm");
    assert_eq!(row["mode"], "roundtrip");
    assert_eq!(row["wait"], "block");
    assert_eq!(row["lost"], 0);
    assert!(row.get("completion_s").is_none() && row.get("skipped").is_none());
    assert!(row["link_rate"].is_null() && row["cpu"].is_null());
    assert_eq!(row["edges"][0]["link"], "same host");
    assert_eq!(row["edges"][0]["path"], "shm");
    assert_eq!(row["processes"][0]["host"], "local");
    assert_eq!(value["rows"][1]["edges"][0]["path"], "udp");
    assert_eq!(
        value["config"]["cgroup"],
        serde_json::json!({"used": false})
    );
    assert!(value["config"]["two_hosts"].is_null());
    assert!(value["config"].get("remote").is_none());
    assert_contains(
        value["config"]["topology"].as_str().unwrap(),
        &["hubs/edge0"],
    );
    assert_eq!(back.rows.len(), 8);
    only_plot(&section, "hubs.svg");
    assert_contains(&section.sentence, &[&cite_first(&DDS_HUBS)]);
    assert_contains(&table, &["Roundtrip", "Flood", "4 shm"]);
    assert_eq!(summary.len(), 4);
    assert_contains(&summary[0].what, &["Roundtrip", "shm"]);
    assert!(summary
        .iter()
        .all(|l| l.study.is_none() && l.floor.is_none()));
}

#[test]
fn hubs_plot_laps_and_flood_completion_per_transport() {
    let results = example_with(vec![
        (Subject::Shm, Mode::Roundtrip, 0, 30_000, None),
        (Subject::Shm, Mode::Roundtrip, 1, 32_000, None),
        (Subject::Shm, Mode::Roundtrip, 2, 34_000, None),
        (Subject::Udp4, Mode::Roundtrip, 0, 50_000, None),
        (Subject::Shm, Mode::Flood, 0, 0, Some(1_000_000)),
        (Subject::Udp4, Mode::Flood, 0, 0, Some(12_000_000)),
    ]);
    // The suite names the second run's files after its step.
    let sec = Hubs::section(&results)
        .unwrap()
        .named_after(Hubs::NAME, "hubs-2hosts");
    let plot = only_plot(&sec, "hubs-2hosts.svg");
    assert_contains(
        &plot.svg,
        &[
            "Roundtrip: one lap through 4 processes",
            "Flood: 1000 messages",
            "shm",
            "udp4",
            "p99",
        ],
    );
    // The sentence gives each transport's median lap and completion.
    assert!(
        sec.sentence.contains("shm 32.0 µs") || sec.sentence.contains("shm 32 µs"),
        "{}",
        sec.sentence
    );
    assert_contains(&sec.sentence, &["udp4 12.00 ms"]);
}

#[test]
fn configurations_round_trip_with_a_link_rate() {
    let config = Config {
        hosts: 2,
        link_rate: Some(parse_link_rate("100mbit").unwrap()),
        ..Config::default()
    };
    let v = serde_json::to_value(&config).unwrap();
    assert_eq!(v["link_rate"], "100mbit");
    assert_eq!(v["transport"], serde_json::json!(["shm", "udp4"]));
    let back: Config = serde_json::from_value(v).unwrap();
    assert_eq!(back.link_rate.map(|r| r.bps), Some(100_000_000));
    let bad = serde_json::json!({"link_rate": "100mbps"});
    assert!(serde_json::from_value::<Config>(bad).is_err());
    let unknown = serde_json::json!({"hub": 3});
    assert!(serde_json::from_value::<Config>(unknown).is_err());
}

#[test]
fn remote_needs_two_hosts_and_nothing_of_this_machine_only() {
    let remote = |c: Config| Config {
        remote: Some("10.0.0.2".to_owned()),
        ..c
    };
    let err = |c: Config| Hubs::validate(&c).unwrap_err().to_string();
    assert!(err(remote(Config::default())).contains("--hosts 2"));
    let two = Config {
        hosts: 2,
        ..Config::default()
    };
    assert!(Hubs::validate(&remote(Config { ..two.clone() })).is_ok());
    let e = err(remote(Config {
        link_rate: Some(parse_link_rate("1gbit").unwrap()),
        ..two.clone()
    }));
    assert!(e.contains("--link-rate"), "{e}");
    let e = err(remote(Config {
        cpu: Some(0.5),
        ..two.clone()
    }));
    assert!(e.contains("--cpu"), "{e}");
    assert!(err(Config {
        hosts: 3,
        ..Config::default()
    })
    .contains("--hosts"));
    // The shm rows of two machines say why they were skipped.
    let reason = skip_reason(&remote(two), Subject::Shm).unwrap();
    assert!(
        reason.contains("two hosts") && reason.contains("agent"),
        "{reason}"
    );
}

#[test]
fn messages_check() {
    let mut buf = vec![0u8; 256];
    write_message(&mut buf, DATA, 42);
    assert_eq!(header(&buf), Some((DATA, 42)));
    assert!(intact(&buf, 256, DATA, 42));
    assert!(!intact(&buf, 256, DATA, 43));
    assert!(!intact(&buf, 256, WARMUP, 42));
    assert!(!intact(&buf[..255], 256, DATA, 42));
    buf[200] ^= 1;
    assert!(!intact(&buf, 256, DATA, 42));
    assert_eq!(header(&buf[..10]), None);
    let mut small = vec![0u8; HEADER];
    write_message(&mut small, PROBE, 0);
    assert!(intact(&small, HEADER, PROBE, 0));
}

#[test]
fn two_hosts_placement_and_peers() {
    assert_eq!((0..4).map(side_of).collect::<Vec<_>>(), [0, 1, 0, 1]);
    let config = Config {
        hosts: 2,
        remote: Some("10.0.0.2:9000".to_owned()),
        ..Config::default()
    };
    let remote = Remote {
        agent: "10.0.0.2:9000".to_owned(),
        here: Ipv4Addr::new(10, 0, 0, 1),
        there: Ipv4Addr::new(10, 0, 0, 2),
    };
    let ctx = Ctx {
        config: &config,
        pair: None,
        remote: Some(&remote),
        placement: placement(&config),
    };
    let peers = |i| ctx.discovery_of(i).unwrap().peers;
    assert_eq!(
        peers(0),
        [format!("10.0.0.2:{DISCOVERY_PORT}").parse().unwrap()]
    );
    assert_eq!(
        peers(3),
        [format!("10.0.0.1:{DISCOVERY_PORT}").parse().unwrap()]
    );
    assert_eq!(ctx.place_of(1).remote.as_deref(), Some("10.0.0.2:9000"));
    assert!(ctx.place_of(2).remote.is_none() && ctx.place_of(2).netns.is_none());
    let hosts: Vec<Host> = ctx.placement.iter().map(|p| p.host).collect();
    assert_eq!(hosts, [Host::A, Host::B, Host::A, Host::B]);
    // A remote process's CPUs are its machine's business.
    assert!(ctx.placement[1].cpu.is_none() && ctx.placement[3].cpu.is_none());
    let one = Config::default();
    let ctx = Ctx {
        config: &one,
        pair: None,
        remote: None,
        placement: placement(&one),
    };
    assert_eq!(ctx.discovery_of(0), None);
}

#[test]
fn peer_requests_are_bounded() {
    let good = PeerRequest {
        index: 1,
        hubs: 4,
        mode: Mode::Flood,
        transport: Subject::Udp4,
        domain: "d".to_owned(),
        size: 256,
        messages: 1000,
        warmup: 100,
        wait: WaitStrategy::Block,
        host: Host::B,
        cpu: None,
        exit_after: None,
        discovery: Some(Discovery {
            port: DISCOVERY_PORT,
            peers: vec![SocketAddrV4::new(
                Ipv4Addr::new(10, 0, 0, 1),
                DISCOVERY_PORT,
            )],
        }),
    };
    assert!(good.check().is_ok());
    let line = serde_json::to_string(&good).unwrap();
    let back: PeerRequest = serde_json::from_str(&line).unwrap();
    assert!(back.check().is_ok());
    for bad in [
        PeerRequest {
            index: 4,
            ..serde_json::from_str(&line).unwrap()
        },
        PeerRequest {
            hubs: 1_000_000,
            ..serde_json::from_str(&line).unwrap()
        },
        PeerRequest {
            messages: u64::MAX,
            ..serde_json::from_str(&line).unwrap()
        },
        PeerRequest {
            warmup: u64::MAX,
            ..serde_json::from_str(&line).unwrap()
        },
        PeerRequest {
            size: 1,
            ..serde_json::from_str(&line).unwrap()
        },
        PeerRequest {
            discovery: Some(Discovery {
                port: 7651,
                peers: vec![],
            }),
            ..serde_json::from_str(&line).unwrap()
        },
    ] {
        assert!(bad.check().is_err(), "{bad:?}");
    }
}

#[test]
fn control_lines() {
    assert_eq!(serde_json::to_string(&Command::Go).unwrap(), "\"go\"");
    let r: Report = serde_json::from_str("\"ready\"").unwrap();
    assert!(matches!(r, Report::Ready));
    let r: Report = serde_json::from_str("{\"progress\":7}").unwrap();
    assert!(matches!(r, Report::Progress(7)));
}

#[test]
fn parsers() {
    assert_eq!("flood".parse(), Ok(Mode::Flood));
    assert!("ping".parse::<Mode>().is_err());
    assert_eq!("udp4".parse(), Ok(Subject::Udp4));
    assert_eq!("auto".parse(), Ok(Subject::Auto));
    assert!(SUBJECTS.parse("udp6").is_err());
    assert_eq!("block".parse(), Ok(WaitStrategy::Block));
    assert_eq!("none".parse(), Ok(PinMode::None));
}
