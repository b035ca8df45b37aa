//! Whole behaviours across real processes: the test binary re-runs itself as publisher or
//! subscriber children (see `child_entry`), each test in its own domain so segments never clash.
//! Every wait has a deadline; no test asserts a timing.

use std::time::Duration;

use ferry::{Node, Qos};

mod common;
use common::*;

/// The children. Not a test of its own: the tests below start it with a role.
#[test]
#[ignore = "entry point of child processes started by the other tests"]
fn child_entry() {
    run_child();
}

#[test]
fn every_delivery_and_wait_strategy_across_processes() {
    for wait in ["spin", "block", "adaptive"] {
        let (received, skipped, last) = exchange(
            "combo",
            &format!("{wait},reliable,max=65536"),
            3000,
            65536,
            0,
        );
        assert_eq!(
            (received, skipped, last),
            (3000, 0, 2999),
            "reliable + {wait} delivers everything"
        );
        let (received, skipped, last) =
            exchange("combo", &format!("{wait},latest,max=65536"), 3000, 65536, 0);
        assert_eq!(last, 2999, "latest + {wait} sees the last message");
        assert!(
            received > 0 && received + skipped <= 3000,
            "latest + {wait}: {received} + {skipped}"
        );
    }
}

#[test]
fn random_sizes_up_to_8_mib_arrive_intact() {
    let max = 8 << 20;
    let (received, skipped, _) =
        exchange("big", &format!("adaptive,reliable,max={max}"), 120, max, 0);
    assert_eq!((received, skipped), (120, 0));
}

#[test]
fn a_latest_subscriber_slower_than_its_publisher_skips_and_counts_but_never_tears() {
    // A 64 KiB ring, messages up to 8 KiB, and a reader that naps after each message.
    let (received, skipped, last) = exchange(
        "slow",
        "block,latest,max=8192,ring=65536",
        20_000,
        8192,
        200,
    );
    println!("latest, slow subscriber: 20000 sent, {received} received intact, {skipped} skipped (counted)");
    assert_eq!(last, 19_999);
    assert!(
        skipped > 0,
        "a slow latest subscriber must be lapped (received {received})"
    );
    assert!(received < 20_000);
}

#[test]
fn subscriber_survives_sigkill_of_the_publisher_and_a_restart_resumes_the_topic() {
    let dom = domain("pubkill");
    let node = Node::with_domain("reader", &dom).unwrap();
    let max = 256 << 10;
    let qos = parse_qos(&format!("adaptive,reliable,max={max}"));
    let mut sub = node.subscriber("data", &qos).unwrap();
    for round in 0..4u64 {
        let mut publ = spawn_on(
            "publisher",
            (&dom, "data", &format!("adaptive,reliable,max={max}")),
            &[("MAXSIZE", max.to_string()), ("WAIT_SUBS", "1".into())],
        );
        // Read a while, then kill the publisher at an arbitrary point of its stream.
        let mut got = 0;
        let mut last = None;
        while got < 200 + round * 37 {
            let s = sub
                .recv_timeout(Duration::from_secs(20))
                .unwrap()
                .expect("publisher sends");
            assert!(check(s.seq(), &s), "intact payload");
            if let Some(l) = last {
                assert_eq!(s.seq(), l + 1, "reliable: no gap");
            }
            last = Some(s.seq());
            got += 1;
        }
        kill9(&mut publ);
        // Whatever it committed before dying still arrives intact; then the topic goes quiet.
        while let Some(s) = sub.recv_timeout(Duration::from_millis(300)).unwrap() {
            assert!(check(s.seq(), &s), "intact payload after the kill");
        }
        assert!(
            wait_until(Duration::from_secs(5), || sub.publisher_count() == 0),
            "the subscriber sees the publisher gone"
        );
    }
    // The dead publishers' data segments are gone.
    let left: Vec<_> = ferry::sys::shm_list(&format!("ferry.{dom}.data@")).unwrap();
    assert!(left.is_empty(), "stale data segments: {left:?}");
}

#[test]
fn a_reliable_publisher_stops_waiting_for_a_subscriber_killed_by_sigkill() {
    let dom = domain("subkill");
    let node = Node::with_domain("writer", &dom).unwrap();
    let qos = parse_qos("block,reliable,max=1024,ring=65536,timeout=20000");
    let mut publ = node.publisher("data", &qos).unwrap();
    let mut sub = spawn_on(
        "subscriber",
        (&dom, "data", "block,reliable"),
        &[("MAXSIZE", "1024".into()), ("STOP_AFTER", "10".into())],
    );
    assert!(wait_until(Duration::from_secs(30), || publ
        .subscriber_count()
        == 1));
    // The subscriber reads 10 messages and stalls; once the publisher is seen waiting on the full
    // ring, a watcher kills the subscriber.
    let watch_dom = dom.clone();
    let killer = std::thread::spawn(move || {
        let waiting = wait_until(Duration::from_secs(30), || {
            ferry::admin::topic(&watch_dom, "data")
                .ok()
                .flatten()
                .is_some_and(|t| t.publishers.first().is_some_and(|p| p.waits >= 1))
        });
        std::thread::sleep(Duration::from_millis(50));
        kill9(&mut sub);
        waiting
    });
    // 5000 messages of up to 1 KiB cannot fit a 64 KiB ring: the sends must wait, and go on once
    // the dead subscriber is evicted (well within the 20 s send timeout).
    for seq in 0..5000 {
        let len = size_of_msg(seq, 1024);
        let mut loan = publ
            .loan(len)
            .expect("no timeout: the dead subscriber is evicted");
        fill(seq, loan.as_mut_slice());
        loan.send().unwrap();
    }
    assert!(
        killer.join().unwrap(),
        "the publisher waited for the stalled subscriber"
    );
    let snap = ferry::admin::topic(&dom, "data").unwrap().unwrap();
    assert_eq!(snap.publishers[0].evictions, 1, "one eviction counted");
    assert_eq!(snap.publishers[0].timeouts, 0);
    assert!(snap.publishers[0].waits >= 1);
    assert!(
        snap.subscribers.is_empty(),
        "the dead subscriber's slot is freed"
    );
}

/// A latest subscriber killed while it holds a large message in place: the publisher, which
/// steps over the held record every lap, finds the holder gone within its liveness period,
/// leaves its slot (one eviction, its topic slot freed) and lets go of the hold.
#[test]
fn a_publisher_lets_go_of_a_hold_whose_subscriber_was_killed() {
    use std::io::BufRead;
    let dom = domain("holdkill");
    let node = Node::with_domain("writer", &dom).unwrap();
    let max = 64 << 10;
    let mut publ = node
        .publisher("data", &parse_qos("spin,latest,max=65536"))
        .unwrap();
    let mut sub = spawn_on(
        "subscriber",
        (&dom, "data", "spin,latest"),
        &[
            ("MAXSIZE", max.to_string()),
            ("SIZES", "max".into()),
            ("HOLD_LARGE", "1".into()),
        ],
    );
    let lines = std::io::BufReader::new(sub.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    assert!(wait_until(Duration::from_secs(30), || publ
        .subscriber_count()
        == 1));
    // The sizes the child expects (SIZES=max): the full size for even sequence numbers.
    let mut seq = 0u64;
    let mut send = |publ: &mut ferry::Publisher| {
        let len = if seq % 2 == 0 {
            max
        } else {
            1 + seq as usize % 100
        };
        let mut loan = publ.loan(len).unwrap();
        fill(seq, loan.as_mut_slice());
        loan.send().unwrap();
        seq += 1;
        std::thread::sleep(Duration::from_millis(1));
    };
    let start = std::time::Instant::now();
    loop {
        send(&mut publ);
        if rx.try_iter().any(|l| l.starts_with("HOLDING")) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the subscriber held nothing"
        );
    }
    kill9(&mut sub);
    let evictions = || {
        ferry::admin::topic(&dom, "data")
            .unwrap()
            .unwrap()
            .publishers[0]
            .evictions
    };
    assert_eq!(evictions(), 0);
    let start = std::time::Instant::now();
    while evictions() == 0 {
        send(&mut publ);
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the dead holder was never let go"
        );
    }
    let snap = ferry::admin::topic(&dom, "data").unwrap().unwrap();
    assert_eq!(snap.publishers[0].evictions, 1);
    assert!(
        snap.subscribers.is_empty(),
        "the dead subscriber's slot is freed"
    );
    // The publisher goes on, and a new subscriber holds and reads intact messages.
    let mut late = node
        .subscriber("data", &parse_qos("spin,latest,max=65536"))
        .unwrap();
    assert!(wait_until(Duration::from_secs(10), || late
        .publisher_count()
        == 1));
    for _ in 0..20 {
        send(&mut publ);
        let s = late.try_recv().unwrap().expect("the newest message");
        assert!(check(s.seq(), &s), "message {} damaged", s.seq());
    }
}

#[test]
fn a_reliable_publisher_times_out_on_a_live_stalled_subscriber() {
    let dom = domain("stall");
    let node = Node::with_domain("writer", &dom).unwrap();
    let mut publ = node
        .publisher(
            "data",
            &parse_qos("spin,reliable,max=1024,ring=4096,timeout=200"),
        )
        .unwrap();
    let _stalled = node
        .subscriber("data", &parse_qos("block,reliable"))
        .unwrap();
    let mut result = Ok(());
    for _ in 0..100 {
        result = publ.send(&[1u8; 1000]);
        if result.is_err() {
            break;
        }
    }
    assert_eq!(
        result,
        Err(ferry::SendError::Timeout(Duration::from_millis(200)))
    );
    let snap = ferry::admin::topic(&dom, "data").unwrap().unwrap();
    assert_eq!(snap.publishers[0].timeouts, 1);
    assert!(snap.publishers[0].waits >= 1);
}

fn write_segment(name: &str, bytes: &[u8]) {
    std::fs::write(format!("/dev/shm/{name}"), bytes).unwrap();
}

#[test]
fn foreign_truncated_and_other_version_segments_are_refused() {
    let dom = domain("foreign");
    let node = Node::with_domain("n", &dom).unwrap();
    let qos = Qos::default();

    write_segment(&format!("ferry.{dom}.garbage"), &[0xAB; 8192]);
    let e = node.publisher("garbage", &qos).unwrap_err();
    assert!(matches!(e, ferry::Error::Foreign { .. }), "{e}");
    assert!(e.to_string().contains("not a ferry segment"));

    write_segment(&format!("ferry.{dom}.short"), &[1, 2, 3]);
    let e = node.subscriber("short", &qos).unwrap_err();
    assert!(matches!(e, ferry::Error::Truncated { .. }), "{e}");

    // A real control segment, then its version changed under it.
    drop(node.publisher("versioned", &qos).unwrap());
    let _keep = node.subscriber("versioned", &qos).unwrap();
    let path = format!("/dev/shm/ferry.{dom}.versioned");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8..12].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let e = node.publisher("versioned", &qos).unwrap_err();
    assert!(matches!(e, ferry::Error::Version { found: 99, .. }), "{e}");

    for t in ["garbage", "short", "versioned"] {
        let _ = ferry::sys::shm_unlink(&format!("ferry.{dom}.{t}"));
    }
}

#[test]
fn a_corrupt_record_is_an_error_for_that_publisher_only() {
    let dom = domain("corrupt");
    let node = Node::with_domain("n", &dom).unwrap();
    let qos = parse_qos("spin,reliable,max=1024");
    let mut sub = node.subscriber("data", &qos).unwrap();
    let mut bad = node.publisher("data", &qos).unwrap();
    let mut good = node.publisher("data", &qos).unwrap();
    assert_eq!(sub.publisher_count(), 2);
    bad.send(b"first").unwrap();
    // Scribble over the record header of `bad`'s first message, as a foreign writer would.
    let seg = ferry::sys::shm_list(&format!("ferry.{dom}.data@")).unwrap();
    let header = ferry::sys::page_size() * 3; // data block header is at most 16 KiB
    let mut hit = false;
    for name in seg {
        let path = format!("/dev/shm/{name}");
        let mut bytes = std::fs::read(&path).unwrap();
        for off in (0..=header).step_by(ferry::sys::page_size()) {
            if bytes.len() > off + 21 && &bytes[off + 16..off + 21] == b"first" {
                bytes[off + 8..off + 16].copy_from_slice(&[0xFF; 8]);
                std::fs::write(&path, &bytes).unwrap();
                hit = true;
            }
        }
    }
    assert!(hit, "found the record to corrupt");
    good.send(b"second").unwrap();
    let mut errors = 0;
    let mut got = Vec::new();
    for _ in 0..4 {
        match sub.try_recv() {
            Ok(Some(s)) => got.push(s.to_vec()),
            Ok(None) => {}
            Err(ferry::RecvError::Corrupt { .. }) => errors += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(errors, 1, "the corrupt ring is reported once");
    assert_eq!(
        got,
        vec![b"second".to_vec()],
        "the healthy publisher is still read"
    );
    assert_eq!(sub.refused_publishers().len(), 1);
}

#[test]
fn segments_are_owner_only_and_clean_removes_what_the_dead_left() {
    use std::os::unix::fs::PermissionsExt;
    let dom = domain("clean");
    let mut publ = spawn_on(
        "publisher",
        (&dom, "data", "block,reliable"),
        &[("PACE_US", "1000".into())],
    );
    let mut sub = spawn_on(
        "subscriber",
        (&dom, "data", "block,reliable"),
        &[("MAXSIZE", "1024".into())],
    );
    // Both children are up: the subscriber registered and the publisher's ring exists.
    let segments = || ferry::sys::shm_list(&format!("ferry.{dom}.")).unwrap();
    assert!(wait_until(Duration::from_secs(30), || {
        subscriber_count(&dom, "data") == 1 && segments().len() == 2
    }));
    let names = segments();
    assert_eq!(names.len(), 2, "a control and a data segment: {names:?}");
    for n in &names {
        let mode = std::fs::metadata(format!("/dev/shm/{n}"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{n} is owner-only");
    }
    kill9(&mut publ);
    kill9(&mut sub);
    let report = ferry::admin::clean(Some(&dom)).unwrap();
    assert!(report.freed_slots >= 1, "{report:?}");
    assert!(
        ferry::sys::shm_list(&format!("ferry.{dom}."))
            .unwrap()
            .is_empty(),
        "{report:?}"
    );
}

#[test]
fn a_dead_participants_slot_is_reclaimed_when_the_topic_is_opened_again() {
    let dom = domain("reclaim");
    let mut sub = spawn_on("subscriber", (&dom, "data", "block"), &[]);
    assert!(wait_until(Duration::from_secs(30), || subscriber_count(
        &dom, "data"
    ) == 1));
    kill9(&mut sub);
    let node = Node::with_domain("n", &dom).unwrap();
    let publ = node.publisher("data", &Qos::default()).unwrap();
    let snap = ferry::admin::topic(&dom, "data").unwrap().unwrap();
    assert!(
        snap.subscribers.is_empty(),
        "opening the topic swept the dead subscriber"
    );
    drop(publ);
    assert!(ferry::sys::shm_list(&format!("ferry.{dom}."))
        .unwrap()
        .is_empty());
}

#[test]
fn pid_reuse_cannot_fool_liveness() {
    let me = ferry::sys::ProcessId::current();
    assert!(me.is_alive());
    let impostor = ferry::sys::ProcessId {
        start_time: me.start_time + 1,
        ..me
    };
    assert!(
        !impostor.is_alive(),
        "same pid, other start time: another process"
    );
}

#[test]
fn a_symbolic_link_in_place_of_a_segment_is_refused_and_its_target_untouched() {
    let dom = domain("symlink");
    let node = Node::with_domain("n", &dom).unwrap();
    let qos = parse_qos("block,reliable,max=1024");

    // A link where the topic's control segment would be.
    let target = std::env::temp_dir().join(format!("ferry-test-{dom}-target"));
    let original = vec![0x5A; 8192];
    std::fs::write(&target, &original).unwrap();
    let control = format!("ferry.{dom}.linked");
    std::os::unix::fs::symlink(&target, format!("/dev/shm/{control}")).unwrap();
    let e = node.publisher("linked", &qos).unwrap_err();
    let left = std::fs::read(&target).unwrap();
    let _ = ferry::sys::shm_unlink(&control);
    let _ = std::fs::remove_file(&target);
    assert!(matches!(e, ferry::Error::NotAFile { .. }), "{e}");
    assert!(e.to_string().contains("symbolic link"), "{e}");
    assert!(left == original, "the link's target is untouched");

    // A publisher's data segment moved aside and replaced by a link to it: a subscriber does not
    // follow the link.
    let publ = node.publisher("data", &qos).unwrap();
    let names = ferry::sys::shm_list(&format!("ferry.{dom}.data@")).unwrap();
    assert_eq!(names.len(), 1, "{names:?}");
    let data = format!("/dev/shm/{}", names[0]);
    let moved = format!("{data}.moved");
    std::fs::rename(&data, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &data).unwrap();
    let mut sub = node.subscriber("data", &qos).unwrap();
    let attached = sub.publisher_count();
    let refused = sub.refused_publishers();
    drop(sub);
    drop(publ);
    let _ = std::fs::remove_file(&data);
    let _ = std::fs::remove_file(&moved);
    assert_eq!(attached, 0, "the linked ring is not read");
    assert!(
        refused.len() == 1 && refused[0].contains("symbolic link"),
        "{refused:?}"
    );
}

#[test]
fn a_ring_above_the_subscribers_limit_is_refused_before_it_is_mapped() {
    let dom = domain("bigring");
    let node = Node::with_domain("n", &dom).unwrap();
    let big = parse_qos("block,reliable,max=1024,ring=4194304");
    let publ = node.publisher("data", &big).unwrap();
    let small = parse_qos("block,reliable").max_ring_capacity(1 << 20);
    let mut sub = node.subscriber("data", &small).unwrap();
    let attached = sub.publisher_count();
    let refused = sub.refused_publishers();
    assert_eq!(
        attached, 0,
        "a 4 MiB ring is not mapped under a 1 MiB limit"
    );
    assert!(
        refused.len() == 1 && refused[0].contains("max_ring_capacity"),
        "{refused:?}"
    );
    // The same ring under the default limit is read.
    let mut sub = node
        .subscriber("data", &parse_qos("block,reliable"))
        .unwrap();
    assert_eq!(sub.publisher_count(), 1);
    drop(publ);
}

#[test]
#[ignore = "needs root"]
fn segments_of_another_user_are_refused() {
    let dom = domain("owner");
    let node = Node::with_domain("n", &dom).unwrap();
    let qos = parse_qos("block,reliable,max=1024");
    const NOBODY: u32 = 65534;

    // A live topic whose control segment now belongs to another user.
    let keep = node.subscriber("control", &qos).unwrap();
    let control = format!("/dev/shm/ferry.{dom}.control");
    std::os::unix::fs::chown(&control, Some(NOBODY), None).unwrap();
    let e = node.publisher("control", &qos).unwrap_err();
    assert!(
        matches!(e, ferry::Error::NotOwner { owner: NOBODY, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("user id 65534"), "{e}");
    drop(keep);

    // A publisher whose data segment now belongs to another user: subscribers refuse its ring.
    let publ = node.publisher("data", &qos).unwrap();
    let names = ferry::sys::shm_list(&format!("ferry.{dom}.data@")).unwrap();
    assert_eq!(names.len(), 1, "{names:?}");
    std::os::unix::fs::chown(format!("/dev/shm/{}", names[0]), Some(NOBODY), None).unwrap();
    let mut sub = node.subscriber("data", &qos).unwrap();
    let attached = sub.publisher_count();
    let refused = sub.refused_publishers();
    drop(sub);
    drop(publ);
    let _ = ferry::sys::shm_unlink(&format!("ferry.{dom}.control"));
    assert_eq!(attached, 0, "the ring of another user is not read");
    assert!(
        refused.len() == 1 && refused[0].contains("user id 65534"),
        "{refused:?}"
    );
}

/// The child of `a_full_dev_shm_is_an_error_when_the_publisher_is_made`: it runs in a mount
/// namespace of its own over a 1 MiB /dev/shm and asks for a 4 MiB ring.
#[test]
#[ignore = "entry point of the child process of a root test"]
fn small_dev_shm_child() {
    if std::env::var("FERRY_TEST_SMALL_DEV_SHM").is_err() {
        return;
    }
    let node = Node::with_domain("n", &domain("small")).unwrap();
    match node.publisher("data", &parse_qos("block,reliable,max=1024,ring=4194304")) {
        Err(ferry::Error::NoSpace { bytes, .. }) => println!("NOSPACE {bytes}"),
        Err(e) => println!("ERROR {e}"),
        Ok(_) => println!("CREATED"),
    }
}

#[test]
#[ignore = "needs root"]
fn a_full_dev_shm_is_an_error_when_the_publisher_is_made() {
    use std::ffi::CString;
    use std::os::unix::process::CommandExt;
    let c = |s: &str| CString::new(s).unwrap();
    let (root, shm, tmpfs, size) = (c("/"), c("/dev/shm"), c("tmpfs"), c("size=1m,mode=1777"));
    let mut cmd = test_binary(&[], "small_dev_shm_child");
    cmd.env("FERRY_TEST_SMALL_DEV_SHM", "1")
        .stdout(std::process::Stdio::piped());
    let in_small_dev_shm = move || {
        // SAFETY: unshare and mount take plain flags and C strings that outlive the calls; in
        // the forked child they change only the child's own mount namespace.
        let failed = unsafe {
            libc::unshare(libc::CLONE_NEWNS) != 0
                || libc::mount(
                    std::ptr::null(),
                    root.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) != 0
                || libc::mount(
                    tmpfs.as_ptr(),
                    shm.as_ptr(),
                    tmpfs.as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    size.as_ptr().cast(),
                ) != 0
        };
        if failed {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    };
    // SAFETY: the closure makes only async-signal-safe system calls (unshare, mount) on memory
    // allocated before the fork.
    unsafe { cmd.pre_exec(in_small_dev_shm) };
    let child = cmd
        .spawn()
        .expect("a child in a mount namespace (needs root)");
    let (ok, out) = finish(child, Duration::from_secs(60));
    assert!(ok, "{out:?}");
    // The harness may print the test's name on the line the child's report starts.
    let report = out.iter().find_map(|l| {
        ["NOSPACE ", "ERROR ", "CREATED"]
            .iter()
            .find_map(|w| l.find(w).map(|at| &l[at..]))
    });
    assert!(
        report.is_some_and(|r| r.starts_with("NOSPACE ")),
        "a 4 MiB ring on a 1 MiB /dev/shm: {report:?} in {out:?}"
    );
}

/// This test binary's child in `role`, as pid 1 of a PID namespace of its own with its own
/// /proc (util-linux `unshare`; killed with the unshare process).
fn child_in_own_pid_namespace(role: &str, vars: &[(&str, String)]) -> std::process::Command {
    let unshare = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"];
    child_command(&unshare, role, vars)
}

#[test]
#[ignore = "needs root (and util-linux unshare)"]
fn a_subscriber_in_another_pid_namespace_is_not_swept_as_dead() {
    let dom = domain("pidns");
    // The subscriber runs as pid 1 of a PID namespace of its own, with its own /proc: in ours,
    // pid 1 is another process, with another start time.
    let mut cmd = child_in_own_pid_namespace(
        "subscriber",
        &topic_vars((&dom, "data", "block,reliable"), &[("COUNT", "5".into())]),
    );
    /// Kills the child if the test fails before it finishes.
    struct Guard(Option<std::process::Child>);
    impl Drop for Guard {
        fn drop(&mut self) {
            if let Some(c) = self.0.as_mut() {
                kill9(c);
            }
        }
    }
    let mut child = Guard(Some(cmd.spawn().expect("util-linux unshare")));
    // Joined, and its slot names its PID namespace (a slot being claimed says so a moment
    // after its token).
    assert!(
        wait_until(Duration::from_secs(30), || {
            ferry::admin::topic(&dom, "data")
                .ok()
                .flatten()
                .is_some_and(|t| t.subscribers.len() == 1 && t.subscribers[0].other_pid_namespace)
        }),
        "the subscriber joined"
    );
    // Making a publisher opens the topic, which sweeps dead slots.
    let node = Node::with_domain("n", &dom).unwrap();
    let mut publ = node
        .publisher("data", &parse_qos("block,reliable,max=1024"))
        .unwrap();
    let snap = ferry::admin::topic(&dom, "data").unwrap().unwrap();
    assert_eq!(snap.subscribers.len(), 1, "the subscriber's slot is kept");
    assert!(snap.subscribers[0].alive && snap.subscribers[0].other_pid_namespace);
    assert!(wait_until(Duration::from_secs(30), || publ
        .subscriber_count()
        == 1));
    for seq in 0..5 {
        let len = size_of_msg(seq, 1024);
        let mut loan = publ.loan(len).unwrap();
        fill(seq, loan.as_mut_slice());
        loan.send().unwrap();
    }
    let (ok, out) = finish(child.0.take().unwrap(), Duration::from_secs(60));
    assert!(ok, "{out:?}");
    assert_eq!(result_of(&out), (5, 0, 4));
}

/// This domain's entries in /dev/shm.
fn shm_entries(dom: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(dom))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[ignore = "needs root (and util-linux unshare)"]
fn a_crashed_publisher_of_another_pid_namespace_is_swept_with_its_segment() {
    // Docker's `--ipc=host` (or a shared /dev/shm volume) without `--pid=host`: the publisher's
    // pid means nothing here. Killed with SIGKILL, it could not free its slot; its lock in the
    // control segment went with it, which is how this namespace knows it ended.
    let dom = domain("pidnsgone");
    let mut cmd = child_in_own_pid_namespace(
        "publisher",
        &topic_vars(
            (&dom, "data", "block,reliable,max=1024"),
            &[("PACE_US", "100000".into())],
        ),
    );
    cmd.stdout(std::process::Stdio::null());
    let mut child = cmd.spawn().expect("util-linux unshare");
    let publishers = |alive: bool| {
        ferry::admin::topic(&dom, "data")
            .ok()
            .flatten()
            .map_or(0, |t| {
                t.publishers
                    .iter()
                    .filter(|p| p.alive == alive && p.other_pid_namespace)
                    .count()
            })
    };
    let joined = wait_until(Duration::from_secs(30), || publishers(true) == 1);
    if !joined {
        kill9(&mut child);
        panic!("the publisher of the other PID namespace did not appear");
    }
    // Alive, it is never swept: opening the topic (a subscriber here) sweeps, and keeps it.
    let node = Node::with_domain("n", &dom).unwrap();
    let sub = node
        .subscriber("data", &parse_qos("block,reliable,max=1024"))
        .unwrap();
    assert_eq!(ferry::admin::clean(Some(&dom)).unwrap().freed_slots, 0);
    assert_eq!(
        publishers(true),
        1,
        "a live publisher of another namespace is kept"
    );
    let before = shm_entries(&dom);
    assert!(
        before.len() >= 2,
        "its control and data segments: {before:?}"
    );
    kill9(&mut child);
    assert!(
        wait_until(Duration::from_secs(10), || publishers(false) == 1),
        "once its process is gone, its slot shows it dead"
    );
    drop(sub);
    let report = ferry::admin::clean(Some(&dom)).unwrap();
    assert_eq!(report.freed_slots, 1, "{report:?}");
    assert_eq!(
        shm_entries(&dom),
        Vec::<String>::new(),
        "its data segment and the then unused control segment are gone"
    );
}

#[test]
fn try_loan_never_waits_and_lends_again_once_the_subscriber_makes_room() {
    let dom = domain("tryloan");
    let node = Node::with_domain("both", &dom).unwrap();
    // A 64 KiB ring, 8 KiB messages; the reliable subscriber reads nothing until told.
    let qos =
        parse_qos("spin,reliable,max=8192,ring=65536").send_timeout(Duration::from_millis(20));
    let mut sub = node.subscriber("data", &qos).unwrap();
    let mut publisher = node.publisher("data", &qos).unwrap();
    assert!(wait_until(Duration::from_secs(5), || sub.publisher_count() == 1));
    let mut sent = 0u64;
    while let Some(mut loan) = publisher.try_loan(8192).unwrap() {
        fill(sent, loan.as_mut_slice());
        loan.send().unwrap();
        sent += 1;
        assert!(
            sent < 100,
            "a 64 KiB ring cannot hold {sent} messages of 8 KiB"
        );
    }
    assert!(sent >= 6, "the ring held only {sent} messages");
    // The full ring: a waiting loan times out; a trying one still says None.
    assert!(matches!(
        publisher.loan(8192),
        Err(ferry::SendError::Timeout(_))
    ));
    assert!(publisher.try_loan(8192).unwrap().is_none());
    // Reading one message makes room for one more.
    let first = sub.recv_timeout(Duration::from_secs(5)).unwrap().unwrap();
    assert!(check(0, &first));
    drop(first);
    let mut loan = publisher
        .try_loan(8192)
        .unwrap()
        .expect("room after a read");
    fill(sent, loan.as_mut_slice());
    loan.send().unwrap();
    for seq in 1..=sent {
        let s = sub.recv_timeout(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!(s.seq(), seq);
        assert!(check(seq, &s));
    }
    // Too large is an error either way.
    assert!(matches!(
        publisher.try_loan(8193),
        Err(ferry::SendError::TooLarge { .. })
    ));
}

/// A reliable subscriber that was there first gets a publisher's first message, however soon
/// after starting the publisher sends it and exits (the publisher's ring counts it as a reader
/// before any message is written).
#[test]
fn a_subscriber_there_first_gets_a_new_publishers_first_message() {
    let dom = domain("firstmsg");
    let node = Node::with_domain("reader", &dom).unwrap();
    let qos = "block,reliable,max=1024";
    let mut sub = node.subscriber("t", &parse_qos(qos)).unwrap();
    for round in 0..10u64 {
        let publ = spawn_on("publisher", (&dom, "t", qos), &[("COUNT", "1".into())]);
        // The subscriber waits, as `ferry echo` does, and attaches the new ring only when it
        // notices the publisher: by then the message may be written and its writer gone.
        let s = sub
            .recv_timeout(Duration::from_secs(10))
            .unwrap()
            .unwrap_or_else(|| panic!("round {round}: the first message did not arrive"));
        assert_eq!(s.seq(), 0);
        assert!(check(0, &s));
        drop(s);
        let (ok, _) = finish(publ, Duration::from_secs(20));
        assert!(ok, "publisher {round} failed");
    }
}
