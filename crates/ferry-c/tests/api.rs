//! The C API called from Rust as C would call it: NULL pointers, enum values that name nothing,
//! loans, samples, requests and responses ended twice or outstanding when their endpoint is used,
//! the messages of failures, messages through shared memory, and services: a round trip, answers
//! given later, no server, a server gone with calls pending, a client gone.

use std::ffi::{c_char, CStr, CString};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ferry_c::*;
use ferry_status::*;

/// A domain of this test process's own (tests run in parallel, and other processes may run
/// ferry on this machine).
fn domain() -> CString {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    // Relaxed: only uniqueness matters.
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    CString::new(format!("fc-api-{}-{n}", std::process::id())).unwrap()
}

fn last_error() -> String {
    // SAFETY: ferry_last_error_message never returns NULL and the text lives until the next
    // ferry call on this thread; it is copied at once.
    unsafe { CStr::from_ptr(ferry_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

fn shm_qos() -> ferry_qos {
    let mut qos = ferry_qos_default();
    qos.transport = ferry_transport::FERRY_TRANSPORT_SHM as i32;
    qos.max_message_size = 4096;
    qos
}

/// Waits until `subscriber` has found the publisher and `publisher` counts `subscribers`
/// subscribers (a subscriber attaches to a publisher when it looks for publishers).
fn await_meeting(
    publisher: *mut ferry_publisher,
    subscriber: *mut ferry_subscriber,
    subscribers: usize,
    timeout: Duration,
) {
    let deadline = Instant::now() + timeout;
    loop {
        let (mut found, mut n) = (0, 0);
        // SAFETY: the caller's live handles, valid out-pointers.
        unsafe {
            assert_eq!(
                ferry_subscriber_publisher_count(subscriber, &mut found),
                FERRY_OK
            );
            assert_eq!(
                ferry_publisher_subscriber_count(publisher, &mut n),
                FERRY_OK
            );
        }
        if found >= 1 && n >= subscribers {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the publisher and the subscriber did not meet within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A node, a publisher and a subscriber on one topic, freed when dropped.
struct Pair {
    domain: CString,
    node: *mut ferry_node,
    publisher: *mut ferry_publisher,
    subscriber: *mut ferry_subscriber,
}

impl Pair {
    fn new(qos: &ferry_qos) -> Pair {
        let domain = domain();
        let mut pair = Pair {
            domain: domain.clone(),
            node: ptr::null_mut(),
            publisher: ptr::null_mut(),
            subscriber: ptr::null_mut(),
        };
        // SAFETY: valid strings and out-pointers; the handles are freed in Drop.
        unsafe {
            assert_eq!(
                ferry_node_new(c"api".as_ptr(), domain.as_ptr(), &mut pair.node),
                FERRY_OK
            );
            assert_eq!(
                ferry_subscriber_new(pair.node, c"t".as_ptr(), qos, &mut pair.subscriber),
                FERRY_OK,
                "{}",
                last_error()
            );
            assert_eq!(
                ferry_publisher_new(pair.node, c"t".as_ptr(), qos, &mut pair.publisher),
                FERRY_OK,
                "{}",
                last_error()
            );
        }
        await_meeting(pair.publisher, pair.subscriber, 1, Duration::from_secs(5));
        pair
    }

    fn recv(&self, timeout_ns: i64) -> (ferry_status, *mut ferry_sample) {
        let mut sample = ptr::null_mut();
        // SAFETY: live subscriber, valid out-pointer.
        let status = unsafe { ferry_subscriber_recv(self.subscriber, timeout_ns, &mut sample) };
        (status, sample)
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        // SAFETY: the handles made in `new`, freed once.
        unsafe {
            ferry_publisher_free(self.publisher);
            ferry_subscriber_free(self.subscriber);
            ferry_node_free(self.node);
        }
    }
}

#[test]
fn a_subscriber_that_starts_late_gets_the_history_the_c_qos_asks_for() {
    let domain = domain();
    let mut qos = shm_qos();
    qos.history = 3;
    let (mut node, mut publisher, mut subscriber) =
        (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid strings, out-pointers and buffers; every handle is freed below.
    unsafe {
        assert_eq!(
            ferry_node_new(c"api".as_ptr(), domain.as_ptr(), &mut node),
            FERRY_OK
        );
        assert_eq!(
            ferry_publisher_new(node, c"h".as_ptr(), &qos, &mut publisher),
            FERRY_OK,
            "{}",
            last_error()
        );
        for i in 0u64..10 {
            let bytes = i.to_le_bytes();
            assert_eq!(
                ferry_publisher_send(publisher, bytes.as_ptr().cast(), bytes.len()),
                FERRY_OK
            );
        }
        qos.history = 2;
        assert_eq!(
            ferry_subscriber_new(node, c"h".as_ptr(), &qos, &mut subscriber),
            FERRY_OK,
            "{}",
            last_error()
        );
        for want in [8u64, 9] {
            let mut sample = ptr::null_mut();
            assert_eq!(
                ferry_subscriber_recv(subscriber, 5_000_000_000, &mut sample),
                FERRY_OK
            );
            let data =
                std::slice::from_raw_parts(ferry_sample_data(sample), ferry_sample_len(sample));
            assert_eq!(data, want.to_le_bytes(), "the last two kept, oldest first");
            assert_eq!(ferry_sample_seq(sample), want);
            assert_eq!(ferry_sample_release(sample), FERRY_OK);
        }
        // Over UDP, a subscriber asking more than a UDP subscriber takes is refused, with a
        // message that says so.
        qos.transport = ferry_transport::FERRY_TRANSPORT_UDP as i32;
        qos.history = 10_000;
        let mut refused = ptr::null_mut();
        assert_ne!(
            ferry_subscriber_new(node, c"h2".as_ptr(), &qos, &mut refused),
            FERRY_OK
        );
        assert!(
            last_error().contains("history 10000 over UDP"),
            "{}",
            last_error()
        );
        ferry_subscriber_free(subscriber);
        ferry_publisher_free(publisher);
        ferry_node_free(node);
    }
}

#[test]
fn null_pointers_are_invalid_arguments_with_a_message() {
    let mut node = ptr::null_mut();
    // SAFETY: every pointer is NULL or valid; NULL is what is tested.
    unsafe {
        assert_eq!(
            ferry_node_new(ptr::null(), ptr::null(), &mut node),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_node_new: name is NULL");
        assert!(node.is_null());
        assert_eq!(
            ferry_node_new(c"n".as_ptr(), ptr::null(), ptr::null_mut()),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_node_new: out is NULL");

        let mut publisher = ptr::null_mut();
        assert_eq!(
            ferry_publisher_new(ptr::null(), c"t".as_ptr(), ptr::null(), &mut publisher),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_publisher_new: node is NULL");
        let mut subscriber = ptr::null_mut();
        assert_eq!(
            ferry_subscriber_new(ptr::null(), c"t".as_ptr(), ptr::null(), &mut subscriber),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(
            ferry_publisher_send(ptr::null_mut(), ptr::null(), 0),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_publisher_send: publisher is NULL");
        let mut loan = ptr::null_mut();
        assert_eq!(
            ferry_publisher_loan(ptr::null_mut(), 8, &mut loan),
            FERRY_INVALID_ARGUMENT
        );
        let mut count = 0;
        assert_eq!(
            ferry_publisher_subscriber_count(ptr::null_mut(), &mut count),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(
            ferry_subscriber_publisher_count(ptr::null_mut(), &mut count),
            FERRY_INVALID_ARGUMENT
        );
        let mut sample = ptr::null_mut();
        assert_eq!(
            ferry_subscriber_recv(ptr::null_mut(), 0, &mut sample),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(ferry_loan_send(ptr::null_mut()), FERRY_INVALID_ARGUMENT);
        assert_eq!(last_error(), "ferry_loan_send: loan is NULL");
        assert_eq!(ferry_loan_discard(ptr::null_mut()), FERRY_INVALID_ARGUMENT);
        assert_eq!(
            ferry_sample_release(ptr::null_mut()),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_sample_release: sample is NULL");

        // The accessors answer NULL or 0, and say why.
        assert!(ferry_loan_data(ptr::null_mut()).is_null());
        assert_eq!(last_error(), "ferry_loan_data: loan is NULL");
        assert_eq!(ferry_loan_len(ptr::null()), 0);
        assert!(ferry_sample_data(ptr::null()).is_null());
        assert_eq!(ferry_sample_len(ptr::null()), 0);
        assert_eq!(ferry_sample_seq(ptr::null()), 0);
        assert_eq!(ferry_sample_skipped(ptr::null()), 0);
        assert_eq!(last_error(), "ferry_sample_skipped: sample is NULL");

        // Freeing NULL does nothing, as free(NULL) does.
        assert_eq!(ferry_node_free(ptr::null_mut()), FERRY_OK);
        assert_eq!(ferry_publisher_free(ptr::null_mut()), FERRY_OK);
        assert_eq!(ferry_subscriber_free(ptr::null_mut()), FERRY_OK);
    }
}

#[test]
fn bad_enums_names_and_strings_are_refused() {
    let domain = domain();
    let mut node = ptr::null_mut();
    // SAFETY: valid strings and out-pointers; the node is freed at the end.
    unsafe {
        assert_eq!(
            ferry_node_new(c"n".as_ptr(), domain.as_ptr(), &mut node),
            FERRY_OK
        );
        for (set, field) in [
            (
                (|q: &mut ferry_qos| q.transport = 3) as fn(&mut ferry_qos),
                "transport is 3",
            ),
            (|q| q.delivery = -1, "delivery is -1"),
            (|q| q.wait = 42, "wait is 42"),
            (|q| q.ip_version = 2, "ip_version is 2"),
        ] {
            let mut qos = shm_qos();
            set(&mut qos);
            let mut publisher = ptr::null_mut::<ferry_publisher>().wrapping_add(1);
            assert_eq!(
                ferry_publisher_new(node, c"t".as_ptr(), &qos, &mut publisher),
                FERRY_INVALID_ARGUMENT
            );
            assert!(publisher.is_null(), "out is NULL after a failure");
            let e = last_error();
            assert!(e.starts_with("ferry_publisher_new: ferry_qos."), "{e}");
            assert!(e.contains(field), "{e}");
            let mut subscriber = ptr::null_mut();
            assert_eq!(
                ferry_subscriber_new(node, c"t".as_ptr(), &qos, &mut subscriber),
                FERRY_INVALID_ARGUMENT
            );
        }
        // A rate cap below what ferry paces: refused when the UDP publisher is made.
        let mut qos = shm_qos();
        qos.transport = ferry_transport::FERRY_TRANSPORT_UDP as i32;
        qos.max_rate_bps = 1_000;
        let mut publisher = ptr::null_mut();
        assert_eq!(
            ferry_publisher_new(node, c"t".as_ptr(), &qos, &mut publisher),
            FERRY_INVALID_ARGUMENT
        );
        assert!(publisher.is_null());
        assert!(last_error().contains("max_rate"), "{}", last_error());
        // A QoS ferry refuses, in ferry's words.
        let mut qos = shm_qos();
        qos.max_message_size = 0;
        let mut publisher = ptr::null_mut();
        assert_eq!(
            ferry_publisher_new(node, c"t".as_ptr(), &qos, &mut publisher),
            FERRY_INVALID_ARGUMENT
        );
        assert!(
            last_error().contains("max_message_size"),
            "{}",
            last_error()
        );

        // Names: empty, too long, not UTF-8.
        let mut other = ptr::null_mut();
        assert_eq!(
            ferry_node_new(c"".as_ptr(), domain.as_ptr(), &mut other),
            FERRY_INVALID_ARGUMENT
        );
        assert!(
            last_error().contains("invalid node name"),
            "{}",
            last_error()
        );
        // A string is read no further than one byte past the longest name: a buffer without
        // its NUL is not read to its end.
        let long = CString::new("n".repeat(33)).unwrap();
        assert_eq!(
            ferry_node_new(long.as_ptr(), domain.as_ptr(), &mut other),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(
            last_error(),
            "ferry_node_new: name is longer than 32 bytes (or lacks its terminating NUL)"
        );
        let topic = CString::new("t".repeat(101)).unwrap();
        assert_eq!(
            ferry_publisher_new(node, topic.as_ptr(), &shm_qos(), &mut publisher),
            FERRY_INVALID_ARGUMENT
        );
        assert!(
            last_error().contains("topic is longer than 100 bytes"),
            "{}",
            last_error()
        );
        let topic = CString::new("t".repeat(100)).unwrap();
        assert_eq!(
            ferry_publisher_new(node, topic.as_ptr(), &shm_qos(), &mut publisher),
            FERRY_OK,
            "{}",
            last_error()
        );
        assert_eq!(ferry_publisher_free(publisher), FERRY_OK);
        let latin1: &[u8] = b"caf\xe9\0";
        assert_eq!(
            ferry_node_new(
                latin1.as_ptr().cast::<c_char>(),
                domain.as_ptr(),
                &mut other
            ),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_node_new: name is not valid UTF-8");
        assert_eq!(
            ferry_publisher_new(
                node,
                c"a topic with spaces".as_ptr(),
                &shm_qos(),
                &mut publisher
            ),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(ferry_node_free(node), FERRY_OK);
    }
}

#[test]
fn status_names_cover_every_status() {
    let all = [
        FERRY_OK,
        FERRY_TIMEOUT,
        FERRY_WOULD_BLOCK,
        FERRY_INVALID_ARGUMENT,
        FERRY_TOO_LARGE,
        FERRY_ERROR,
        FERRY_PANIC,
        FERRY_NO_SERVER,
        FERRY_SERVER_GONE,
        FERRY_MANY_SERVERS,
        FERRY_SERVICE_TAKEN,
        FERRY_CLIENT_GONE,
    ];
    for (number, status) in all.into_iter().enumerate() {
        assert_eq!(status as usize, number, "{status:?} keeps its number");
        // SAFETY: a static string.
        let name = unsafe { CStr::from_ptr(ferry_status_name(status as i32)) };
        assert_eq!(name.to_str().unwrap(), format!("{status:?}"));
    }
    for other in [-1, 12, i32::MAX] {
        // SAFETY: a static string.
        let name = unsafe { CStr::from_ptr(ferry_status_name(other)) };
        assert_eq!(name.to_str().unwrap(), "FERRY_UNKNOWN_STATUS");
    }
}

#[test]
fn a_sample_is_borrowed_in_place_and_released_once() {
    let pair = Pair::new(&shm_qos());
    // SAFETY: live handles from `pair`; every pointer read is valid while its sample is held.
    unsafe {
        let (status, sample) = pair.recv(0);
        assert_eq!(status, FERRY_WOULD_BLOCK);
        assert!(sample.is_null());
        assert_eq!(pair.recv(1_000_000).0, FERRY_TIMEOUT);
        assert_eq!(pair.recv(-2).0, FERRY_INVALID_ARGUMENT);
        assert!(
            last_error().contains("timeout_ns is -2"),
            "{}",
            last_error()
        );

        let message = b"hello from C";
        assert_eq!(
            ferry_publisher_send(pair.publisher, message.as_ptr().cast(), message.len()),
            FERRY_OK
        );
        assert_eq!(
            ferry_publisher_send(pair.publisher, ptr::null(), 0),
            FERRY_OK
        );
        assert_eq!(
            ferry_publisher_send(pair.publisher, ptr::null(), 3),
            FERRY_INVALID_ARGUMENT
        );

        let (status, sample) = pair.recv(1_000_000_000);
        assert_eq!(status, FERRY_OK);
        let bytes = std::slice::from_raw_parts(ferry_sample_data(sample), ferry_sample_len(sample));
        assert_eq!(bytes, message);
        assert_eq!(ferry_sample_seq(sample), 0);
        assert_eq!(ferry_sample_skipped(sample), 0);

        // While the sample is held, its subscriber refuses everything else; a receive into the
        // variable that holds the sample leaves it as it was.
        let mut same = sample;
        assert_eq!(
            ferry_subscriber_recv(pair.subscriber, 0, &mut same),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(same, sample);
        assert!(
            last_error()
                .contains("release it (ferry_sample_release) before calling ferry_subscriber_recv"),
            "{}",
            last_error()
        );
        let mut count = 0;
        assert_eq!(
            ferry_subscriber_publisher_count(pair.subscriber, &mut count),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(
            ferry_subscriber_free(pair.subscriber),
            FERRY_INVALID_ARGUMENT
        );
        assert!(last_error().contains("was not freed"), "{}", last_error());

        assert_eq!(ferry_sample_release(sample), FERRY_OK);
        // Released twice: refused, and the accessors say so.
        assert_eq!(ferry_sample_release(sample), FERRY_INVALID_ARGUMENT);
        assert_eq!(
            last_error(),
            "ferry_sample_release: this sample was already released"
        );
        assert!(ferry_sample_data(sample).is_null());
        assert_eq!(ferry_sample_len(sample), 0);

        // The empty message.
        let (status, sample) = pair.recv(-1);
        assert_eq!(status, FERRY_OK);
        assert_eq!(ferry_sample_len(sample), 0);
        assert!(!ferry_sample_data(sample).is_null());
        assert_eq!(ferry_sample_seq(sample), 1);
        assert_eq!(ferry_sample_release(sample), FERRY_OK);
        assert_eq!(
            ferry_subscriber_publisher_count(pair.subscriber, &mut count),
            FERRY_OK
        );
        assert_eq!(count, 1);
    }
}

#[test]
fn a_kept_message_stays_readable_while_the_next_ones_are_received() {
    let pair = Pair::new(&shm_qos());
    let send = |body: &[u8]| {
        // SAFETY: live publisher; the bytes are valid for the call.
        let status =
            unsafe { ferry_publisher_send(pair.publisher, body.as_ptr().cast(), body.len()) };
        assert_eq!(status, FERRY_OK, "{}", last_error());
    };
    // SAFETY: live handles from `pair`; every pointer read is valid while its message is held.
    unsafe {
        let mut kept = ptr::null_mut();
        assert_eq!(
            ferry_subscriber_keep(pair.subscriber, &mut kept),
            FERRY_INVALID_ARGUMENT
        );
        assert!(
            last_error().contains("no sample is held"),
            "{}",
            last_error()
        );
        send(b"first");
        send(b"second");
        send(b"third");
        let (status, sample) = pair.recv(1_000_000_000);
        assert_eq!(status, FERRY_OK);
        assert_eq!(ferry_subscriber_keep(pair.subscriber, &mut kept), FERRY_OK);
        assert!(
            ferry_sample_data(sample).is_null(),
            "the sample handle is empty once kept"
        );
        let read = |k: *const ferry_kept| {
            std::slice::from_raw_parts(ferry_kept_data(k), ferry_kept_len(k)).to_vec()
        };
        assert_eq!((read(kept), ferry_kept_seq(kept)), (b"first".to_vec(), 0));
        // The next one is received while the first is kept; a second keep is past max_held 2.
        let (status, sample) = pair.recv(1_000_000_000);
        assert_eq!(status, FERRY_OK);
        let mut more = ptr::null_mut();
        assert_eq!(
            ferry_subscriber_keep(pair.subscriber, &mut more),
            FERRY_INVALID_ARGUMENT
        );
        assert!(last_error().contains("max_held"), "{}", last_error());
        assert_eq!(
            std::slice::from_raw_parts(ferry_sample_data(sample), ferry_sample_len(sample)),
            b"second"
        );
        assert_eq!(read(kept), b"first");
        // Given back while a sample is held: let go at the next receive.
        assert_eq!(ferry_subscriber_let_go(pair.subscriber, kept), FERRY_OK);
        assert_eq!(ferry_sample_release(sample), FERRY_OK);
        let (status, sample) = pair.recv(1_000_000_000);
        assert_eq!(status, FERRY_OK);
        assert_eq!(ferry_sample_seq(sample), 2);
        // Now it can keep again (the first was let go).
        assert_eq!(ferry_subscriber_keep(pair.subscriber, &mut kept), FERRY_OK);
        assert_eq!(read(kept), b"third");
        assert_eq!(ferry_subscriber_let_go(pair.subscriber, kept), FERRY_OK);
        assert_eq!(
            ferry_subscriber_let_go(pair.subscriber, ptr::null_mut()),
            FERRY_OK
        );
    }
    // max_held outside 1..=1024 is refused.
    let mut qos = shm_qos();
    qos.max_held = 0;
    let domain = domain();
    // SAFETY: valid strings and out-pointers; freed below.
    unsafe {
        let mut node = ptr::null_mut();
        assert_eq!(
            ferry_node_new(c"api".as_ptr(), domain.as_ptr(), &mut node),
            FERRY_OK
        );
        let mut sub = ptr::null_mut();
        assert_ne!(
            ferry_subscriber_new(node, c"t".as_ptr(), &qos, &mut sub),
            FERRY_OK
        );
        assert!(last_error().contains("max_held"), "{}", last_error());
        ferry_node_free(node);
    }
}

#[test]
fn a_wait_set_says_which_subscriber_has_a_message_and_refuses_bad_items() {
    let a = Pair::new(&shm_qos());
    let mut udp = shm_qos();
    udp.transport = ferry_transport::FERRY_TRANSPORT_UDP as i32;
    let b = Pair::new(&udp);
    // SAFETY: live handles from the pairs; the wait set is freed at the end; every array
    // passed lives across its call.
    unsafe {
        let mut set = ptr::null_mut();
        assert_eq!(ferry_waitset_new(&mut set), FERRY_OK);
        let items = [
            ferry_wait_item {
                kind: ferry_wait_kind::FERRY_WAIT_SUBSCRIBER as i32,
                handle: a.subscriber.cast(),
            },
            ferry_wait_item {
                kind: ferry_wait_kind::FERRY_WAIT_SUBSCRIBER as i32,
                handle: b.subscriber.cast(),
            },
        ];
        let mut ready = [usize::MAX; 2];
        let mut n = usize::MAX;
        let wait = |timeout_ns: i64, ready: &mut [usize; 2], n: &mut usize| {
            ferry_waitset_wait(set, items.as_ptr(), 2, timeout_ns, ready.as_mut_ptr(), 2, n)
        };
        // Publisher events (each pair's publisher appeared) do not make a subscriber ready
        // here (it did not ask for them); nothing sent: the time runs out.
        assert_eq!(wait(20_000_000, &mut ready, &mut n), FERRY_TIMEOUT);
        assert_eq!(n, 0);
        for (who, pair) in [(1usize, &b), (0, &a)] {
            let msg = b"wake";
            assert_eq!(
                ferry_publisher_send(pair.publisher, msg.as_ptr().cast(), msg.len()),
                FERRY_OK
            );
            assert_eq!(
                wait(5_000_000_000, &mut ready, &mut n),
                FERRY_OK,
                "{}",
                last_error()
            );
            assert_eq!((n, ready[0]), (1, who));
            let (status, sample) = pair.recv(0);
            assert_eq!(status, FERRY_OK);
            // Holding a sample, the subscriber cannot be waited on.
            assert_eq!(wait(0, &mut ready, &mut n), FERRY_INVALID_ARGUMENT);
            assert!(
                last_error().contains("sample of this subscriber is held"),
                "{}",
                last_error()
            );
            assert_eq!(ferry_sample_release(sample), FERRY_OK);
        }
        // Bad items: listed twice, NULL, an unknown kind, none at all.
        let twice = [items[0], items[0]];
        assert_eq!(
            ferry_waitset_wait(set, twice.as_ptr(), 2, 0, ready.as_mut_ptr(), 2, &mut n),
            FERRY_INVALID_ARGUMENT
        );
        assert!(last_error().contains("listed twice"), "{}", last_error());
        let null = [ferry_wait_item {
            kind: 0,
            handle: ptr::null_mut(),
        }];
        assert_eq!(
            ferry_waitset_wait(set, null.as_ptr(), 1, 0, ready.as_mut_ptr(), 2, &mut n),
            FERRY_INVALID_ARGUMENT
        );
        let odd = [ferry_wait_item {
            kind: 7,
            handle: a.subscriber.cast(),
        }];
        assert_eq!(
            ferry_waitset_wait(set, odd.as_ptr(), 1, 0, ready.as_mut_ptr(), 2, &mut n),
            FERRY_INVALID_ARGUMENT
        );
        assert!(last_error().contains("kind is 7"), "{}", last_error());
        assert_eq!(
            ferry_waitset_wait(set, items.as_ptr(), 0, 0, ready.as_mut_ptr(), 2, &mut n),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(ferry_waitset_free(set), FERRY_OK);
        assert_eq!(ferry_waitset_free(ptr::null_mut()), FERRY_OK);
    }
}

#[test]
fn a_loan_is_written_in_place_and_sent_once() {
    let pair = Pair::new(&shm_qos());
    // SAFETY: live handles from `pair`; the loan's bytes are written only while it is held.
    unsafe {
        let mut loan = ptr::null_mut();
        assert_eq!(
            ferry_publisher_loan(pair.publisher, 100, &mut loan),
            FERRY_OK
        );
        assert_eq!(ferry_loan_len(loan), 100);
        let data = ferry_loan_data(loan);
        assert!(!data.is_null());
        for i in 0..100 {
            *data.add(i) = i as u8;
        }

        // While the loan is out, its publisher refuses everything but its size. A second loan
        // into the same variable leaves it as it was: it holds the loan still out.
        let mut again = loan;
        assert_eq!(
            ferry_publisher_loan(pair.publisher, 8, &mut again),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(again, loan);
        assert!(
            last_error().contains("send it (ferry_loan_send) or discard it"),
            "{}",
            last_error()
        );
        assert_eq!(
            ferry_publisher_send(pair.publisher, ptr::null(), 0),
            FERRY_INVALID_ARGUMENT
        );
        // Any other failure clears it.
        let mut cleared = loan;
        assert_eq!(
            ferry_publisher_loan(ptr::null_mut(), 8, &mut cleared),
            FERRY_INVALID_ARGUMENT
        );
        assert!(cleared.is_null());
        let mut n = 0;
        assert_eq!(
            ferry_publisher_subscriber_count(pair.publisher, &mut n),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(ferry_publisher_free(pair.publisher), FERRY_INVALID_ARGUMENT);
        assert_eq!(
            ferry_publisher_max_message_size(pair.publisher, &mut n),
            FERRY_OK
        );
        assert_eq!(n, 4096);

        assert_eq!(ferry_loan_send(loan), FERRY_OK);
        assert_eq!(ferry_loan_send(loan), FERRY_INVALID_ARGUMENT);
        assert_eq!(
            last_error(),
            "ferry_loan_send: this loan was already sent or discarded"
        );
        assert_eq!(ferry_loan_discard(loan), FERRY_INVALID_ARGUMENT);
        assert!(ferry_loan_data(loan).is_null());
        assert_eq!(ferry_loan_len(loan), 0);

        // A discarded loan sends nothing; the next message is the next one sent.
        assert_eq!(ferry_publisher_loan(pair.publisher, 5, &mut loan), FERRY_OK);
        assert_eq!(ferry_loan_discard(loan), FERRY_OK);
        assert_eq!(ferry_loan_send(loan), FERRY_INVALID_ARGUMENT);

        let (status, sample) = pair.recv(1_000_000_000);
        assert_eq!(status, FERRY_OK);
        let bytes = std::slice::from_raw_parts(ferry_sample_data(sample), ferry_sample_len(sample));
        assert_eq!(bytes, (0..100).map(|i| i as u8).collect::<Vec<_>>());
        assert_eq!(ferry_sample_release(sample), FERRY_OK);
        assert_eq!(pair.recv(0).0, FERRY_WOULD_BLOCK);

        // Larger than max_message_size: its own status, whether copied or lent.
        let big = vec![0u8; 4097];
        assert_eq!(
            ferry_publisher_send(pair.publisher, big.as_ptr().cast(), big.len()),
            FERRY_TOO_LARGE
        );
        assert!(
            last_error().contains("ferry_qos.max_message_size"),
            "{}",
            last_error()
        );
        assert_eq!(
            ferry_publisher_loan(pair.publisher, 4097, &mut loan),
            FERRY_TOO_LARGE
        );
        assert!(loan.is_null());
        // A length no buffer can have is refused before the bytes are looked at.
        assert_eq!(
            ferry_publisher_send(
                pair.publisher,
                ptr::NonNull::<u8>::dangling().as_ptr().cast(),
                usize::MAX
            ),
            FERRY_TOO_LARGE
        );
    }
}

#[test]
fn a_reliable_publisher_held_back_by_a_sample_times_out() {
    let mut qos = shm_qos();
    qos.ring_capacity = 1 << 16;
    qos.send_timeout_ns = 20_000_000;
    let pair = Pair::new(&qos);
    let chunk = vec![7u8; 4000];
    // SAFETY: live handles from `pair`.
    unsafe {
        let mut sent = 0;
        let status = loop {
            let s = ferry_publisher_send(pair.publisher, chunk.as_ptr().cast(), chunk.len());
            if s != FERRY_OK || sent > 100 {
                break s;
            }
            sent += 1;
        };
        assert_eq!(status, FERRY_TIMEOUT, "after {sent} messages");
        assert!(
            last_error().contains("did not make room"),
            "{}",
            last_error()
        );
        let (status, sample) = pair.recv(0);
        assert_eq!(status, FERRY_OK);
        assert_eq!(ferry_sample_release(sample), FERRY_OK);
    }
}

#[test]
fn the_last_error_is_per_thread() {
    // SAFETY: NULL is what is tested.
    let status = unsafe { ferry_loan_send(ptr::null_mut()) };
    assert_eq!(status, FERRY_INVALID_ARGUMENT);
    std::thread::spawn(|| {
        assert_eq!(last_error(), "", "a fresh thread has no last error");
        // SAFETY: NULL is what is tested.
        let status = unsafe { ferry_sample_release(ptr::null_mut()) };
        assert_eq!(status, FERRY_INVALID_ARGUMENT);
        assert_eq!(last_error(), "ferry_sample_release: sample is NULL");
    })
    .join()
    .unwrap();
    assert_eq!(last_error(), "ferry_loan_send: loan is NULL");
    // Success leaves it as it is.
    // SAFETY: freeing NULL.
    let status = unsafe { ferry_node_free(ptr::null_mut()) };
    assert_eq!(status, FERRY_OK);
    assert_eq!(last_error(), "ferry_loan_send: loan is NULL");
}

/// A call that fails while its thread is torn down, after the thread's last-error message is
/// gone (from a thread-local's destructor, as a C++ `thread_local` object or an `atexit` handler
/// would make it): it returns its status, and no panic crosses into C (that would abort this
/// test binary).
#[test]
fn a_call_that_fails_during_thread_teardown_returns_its_status() {
    struct AtExit(std::sync::mpsc::Sender<(String, ferry_status)>);
    impl Drop for AtExit {
        fn drop(&mut self) {
            // The thread's message is gone by now: its destructor ran before this one.
            let message = last_error();
            // SAFETY: NULL is what is tested.
            let status = unsafe { ferry_loan_send(ptr::null_mut()) };
            let _ = self.0.send((message, status));
        }
    }
    thread_local! {
        static AT_EXIT: std::cell::RefCell<Option<AtExit>> = const { std::cell::RefCell::new(None) };
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Made before ferry's message, so destroyed after it (the last made goes first).
        AT_EXIT.with(|a| *a.borrow_mut() = Some(AtExit(tx)));
        // SAFETY: NULL is what is tested.
        let status = unsafe { ferry_loan_send(ptr::null_mut()) };
        assert_eq!(status, FERRY_INVALID_ARGUMENT);
        assert_eq!(last_error(), "ferry_loan_send: loan is NULL");
    })
    .join()
    .unwrap();
    let (message, status) = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the destructor ran");
    assert_eq!(
        message, "",
        "the thread's message was gone when the destructor ran"
    );
    assert_eq!(status, FERRY_INVALID_ARGUMENT);
}

/// `max_rate_bps` reaches the UDP publisher: 16 messages of 64 KiB at 40 Mbit/s cannot be handed
/// out in less than about 0.21 s, however fast the machine (a lower bound the pacer sets, not a
/// speed); every message arrives intact, and the publisher's counters show the pacer at work.
#[test]
fn a_rate_cap_in_the_c_qos_paces_a_udp_publisher() {
    let mut qos = ferry_qos_default();
    qos.transport = ferry_transport::FERRY_TRANSPORT_UDP as i32;
    qos.max_message_size = 64 << 10;
    qos.send_timeout_ns = 30_000_000_000;
    qos.max_rate_bps = 40_000_000;
    let pair = Pair::new(&qos);
    let (count, size) = (16u64, 64usize << 10);
    let start = Instant::now();
    for i in 0..count {
        let message = vec![i as u8; size];
        // SAFETY: a live publisher; `message` is readable for its length.
        let status =
            unsafe { ferry_publisher_send(pair.publisher, message.as_ptr().cast(), message.len()) };
        assert_eq!(status, FERRY_OK, "{}", last_error());
    }
    let elapsed = start.elapsed();
    // Frames on the wire are at least the payload; the first quantum (1 ms) may leave at once.
    let floor = (count * size as u64 * 8) as f64 / qos.max_rate_bps as f64 - 0.002;
    assert!(
        elapsed.as_secs_f64() >= 0.95 * floor,
        "{count} x {size} B handed out in {elapsed:?} under a 40 Mbit/s cap (at least {floor:.3} s)"
    );
    for i in 0..count {
        let (status, sample) = pair.recv(30_000_000_000);
        assert_eq!(status, FERRY_OK, "message {i}: {}", last_error());
        // SAFETY: a sample just received, read before it is released once.
        unsafe {
            let bytes =
                std::slice::from_raw_parts(ferry_sample_data(sample), ferry_sample_len(sample));
            assert_eq!(bytes.len(), size);
            assert!(bytes.iter().all(|&b| b == i as u8), "message {i} intact");
            assert_eq!(ferry_sample_release(sample), FERRY_OK);
        }
    }
    // The counters are published by the endpoint's next pass, shortly after.
    let domain = pair.domain.to_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let info = loop {
        let info = ferry::admin::topic(domain, "t")
            .unwrap()
            .expect("the topic");
        if info.publishers[0].sent == count || Instant::now() > deadline {
            break info;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(info.publishers[0].sent, count);
    let c = &info.publishers[0].congestion;
    assert!(c.paced_waits > 0, "{c:?}");
    assert!(
        c.pacing_rate > 0 && c.pacing_rate <= 40_000_000 / 8,
        "{c:?}"
    );
}

/// `multicast` reaches the UDP endpoints: two subscribers of a group on the loopback interface
/// both receive on the group's port (unicast subscribers each have a port of their own) and get
/// every message intact.
#[test]
fn a_multicast_group_in_the_c_qos_reaches_every_subscriber() {
    let port = 20_000 + (std::process::id() % 20_000) as u16;
    let group = CString::new(format!("239.255.79.1:{port}")).unwrap();
    let mut qos = ferry_qos_default();
    qos.transport = ferry_transport::FERRY_TRANSPORT_UDP as i32;
    qos.max_message_size = 1000;
    qos.multicast = group.as_ptr();
    qos.multicast_interface = c"127.0.0.1".as_ptr();
    let pair = Pair::new(&qos);
    let mut second = ptr::null_mut();
    // SAFETY: a live node, valid strings and out-pointer; freed at the end.
    let status = unsafe { ferry_subscriber_new(pair.node, c"t".as_ptr(), &qos, &mut second) };
    assert_eq!(status, FERRY_OK, "{}", last_error());
    await_meeting(pair.publisher, second, 2, Duration::from_secs(10));
    let domain = pair.domain.to_str().unwrap();
    for i in 0..20u8 {
        let message = [i; 1000];
        // SAFETY: a live publisher; `message` is readable for its length.
        let status = unsafe { ferry_publisher_send(pair.publisher, message.as_ptr().cast(), 1000) };
        assert_eq!(status, FERRY_OK, "{}", last_error());
        for sub in [pair.subscriber, second] {
            let mut sample = ptr::null_mut();
            // SAFETY: a live subscriber; the sample is read, then released once.
            unsafe {
                assert_eq!(
                    ferry_subscriber_recv(sub, 10_000_000_000, &mut sample),
                    FERRY_OK,
                    "{}",
                    last_error()
                );
                let bytes =
                    std::slice::from_raw_parts(ferry_sample_data(sample), ferry_sample_len(sample));
                assert!(bytes == message, "message {i} intact");
                assert_eq!(ferry_sample_release(sample), FERRY_OK);
            }
        }
    }
    let subs = ferry::admin::topic(domain, "t")
        .unwrap()
        .unwrap()
        .subscribers;
    let ports: Vec<_> = subs.iter().map(|s| s.udp.map(|a| a.port())).collect();
    assert_eq!(ports, [Some(port), Some(port)]);
    // SAFETY: the subscriber made above, freed once.
    unsafe { ferry_subscriber_free(second) };
}

// Services.

/// How long a test waits for what must happen (a request, a response, a thread).
const LONG_NS: i64 = 20_000_000_000;
const LONG: Duration = Duration::from_nanos(LONG_NS as u64);

/// A handle handed to a thread of the test (one thread uses it at a time, as the C API asks).
struct Moved<T>(*mut T);
// SAFETY: the C API lets a server or client move between threads; the test uses each from one
// thread at a time.
unsafe impl<T> Send for Moved<T> {}

/// A node in a domain of its own.
fn service_node() -> *mut ferry_node {
    let domain = domain();
    let mut node = ptr::null_mut();
    // SAFETY: valid strings and out-pointer; the caller frees the node.
    let status = unsafe { ferry_node_new(c"svc".as_ptr(), domain.as_ptr(), &mut node) };
    assert_eq!(status, FERRY_OK, "{}", last_error());
    node
}

fn new_server(node: *mut ferry_node, service: &CStr) -> *mut ferry_server {
    let mut server = ptr::null_mut();
    // SAFETY: a live node, valid strings and out-pointer; the caller frees the server.
    let status = unsafe { ferry_server_new(node, service.as_ptr(), &shm_qos(), &mut server) };
    assert_eq!(status, FERRY_OK, "{}", last_error());
    server
}

fn new_client(node: *mut ferry_node, service: &CStr) -> *mut ferry_client {
    let mut client = ptr::null_mut();
    // SAFETY: a live node, valid strings and out-pointer; the caller frees the client.
    let status = unsafe { ferry_client_new(node, service.as_ptr(), &shm_qos(), &mut client) };
    assert_eq!(status, FERRY_OK, "{}", last_error());
    client
}

/// Receives a request, waiting at most LONG.
fn recv_request(server: *mut ferry_server) -> *mut ferry_request {
    let mut request = ptr::null_mut();
    // SAFETY: a live server, a valid out-pointer.
    let status = unsafe { ferry_server_recv(server, LONG_NS, &mut request) };
    assert_eq!(status, FERRY_OK, "{}", last_error());
    request
}

/// A held request's body.
fn request_body(request: *const ferry_request) -> Vec<u8> {
    // SAFETY: a held request; its bytes are valid until it ends, and copied at once.
    unsafe { std::slice::from_raw_parts(ferry_request_data(request), ferry_request_len(request)) }
        .to_vec()
}

/// A held response's body.
fn response_body(response: *const ferry_response) -> Vec<u8> {
    // SAFETY: a held response; its bytes are valid until it ends, and copied at once.
    unsafe {
        std::slice::from_raw_parts(ferry_response_data(response), ferry_response_len(response))
    }
    .to_vec()
}

fn call(
    client: *mut ferry_client,
    body: &[u8],
    timeout_ns: i64,
) -> (ferry_status, *mut ferry_response) {
    let mut response = ptr::null_mut();
    // SAFETY: a live client; `body` is readable for its length; a valid out-pointer.
    let status = unsafe {
        ferry_client_call(
            client,
            body.as_ptr().cast(),
            body.len(),
            timeout_ns,
            &mut response,
        )
    };
    (status, response)
}

fn failed_request(client: *mut ferry_client) -> Option<u64> {
    let mut id = u64::MAX;
    // SAFETY: a live client, a valid out-pointer.
    let status = unsafe { ferry_client_failed_request(client, &mut id) };
    (status == FERRY_OK).then_some(id)
}

#[test]
fn service_calls_refuse_null_pointers_and_bad_names() {
    let node = service_node();
    // SAFETY: every pointer is NULL, valid or a live handle; NULL is what is tested.
    unsafe {
        let mut server = ptr::null_mut::<ferry_server>().wrapping_add(1);
        assert_eq!(
            ferry_server_new(ptr::null(), c"s".as_ptr(), ptr::null(), &mut server),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_server_new: node is NULL");
        assert!(server.is_null(), "out is NULL after a failure");
        assert_eq!(
            ferry_server_new(node, ptr::null(), ptr::null(), &mut server),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_server_new: service is NULL");
        assert_eq!(
            ferry_server_new(node, c"s".as_ptr(), ptr::null(), ptr::null_mut()),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_server_new: out is NULL");
        let mut client = ptr::null_mut::<ferry_client>().wrapping_add(1);
        assert_eq!(
            ferry_client_new(ptr::null(), c"s".as_ptr(), ptr::null(), &mut client),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_client_new: node is NULL");
        assert!(client.is_null());
        assert_eq!(
            ferry_client_new(node, ptr::null(), ptr::null(), &mut client),
            FERRY_INVALID_ARGUMENT
        );

        // Service names: ferry's own prefix, too long, not UTF-8, not a name; a bad QoS.
        let long = CString::new("s".repeat(65)).unwrap();
        for (name, says) in [
            (c".hidden".as_ptr(), "not beginning with '.'"),
            (long.as_ptr(), "service is longer than 64 bytes"),
            (c"caf\xe9".as_ptr(), "service is not valid UTF-8"),
            (c"with space".as_ptr(), "invalid service name"),
        ] {
            assert_eq!(
                ferry_server_new(node, name, ptr::null(), &mut server),
                FERRY_INVALID_ARGUMENT
            );
            assert!(last_error().contains(says), "{}", last_error());
            assert_eq!(
                ferry_client_new(node, name, ptr::null(), &mut client),
                FERRY_INVALID_ARGUMENT
            );
            assert!(last_error().contains(says), "{}", last_error());
        }
        let mut qos = shm_qos();
        qos.delivery = 9;
        assert_eq!(
            ferry_client_new(node, c"s".as_ptr(), &qos, &mut client),
            FERRY_INVALID_ARGUMENT
        );
        assert!(last_error().contains("delivery is 9"), "{}", last_error());

        // Every call on a NULL server, request, client or response.
        let mut request = ptr::null_mut();
        assert_eq!(
            ferry_server_recv(ptr::null_mut(), 0, &mut request),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_server_recv: server is NULL");
        assert_eq!(
            ferry_server_respond(ptr::null_mut(), 1, 2, ptr::null(), 0),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_server_respond: server is NULL");
        assert_eq!(
            ferry_request_respond(ptr::null_mut(), ptr::null(), 0),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_request_respond: request is NULL");
        assert_eq!(
            ferry_request_release(ptr::null_mut()),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_request_release: request is NULL");
        let (mut id, mut n, mut has) = (0u64, 0usize, false);
        assert_eq!(
            ferry_client_send(ptr::null_mut(), ptr::null(), 0, &mut id),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_client_send: client is NULL");
        let mut response = ptr::null_mut();
        assert_eq!(
            ferry_client_recv(ptr::null_mut(), 0, &mut response),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_client_recv: client is NULL");
        assert_eq!(
            ferry_client_call(ptr::null_mut(), ptr::null(), 0, 0, &mut response),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_client_call: client is NULL");
        assert_eq!(
            ferry_client_wait_for_server(ptr::null_mut(), 0),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(
            ferry_client_has_server(ptr::null_mut(), &mut has),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(
            ferry_client_pending(ptr::null_mut(), &mut n),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(
            ferry_client_failed_request(ptr::null(), &mut id),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(
            ferry_response_release(ptr::null_mut()),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_response_release: response is NULL");

        // The accessors answer NULL or 0, and say why.
        assert!(ferry_request_data(ptr::null()).is_null());
        assert_eq!(last_error(), "ferry_request_data: request is NULL");
        assert_eq!(ferry_request_len(ptr::null()), 0);
        assert_eq!(ferry_request_client(ptr::null()), 0);
        assert_eq!(ferry_request_id(ptr::null()), 0);
        assert!(ferry_response_data(ptr::null()).is_null());
        assert_eq!(ferry_response_len(ptr::null()), 0);
        assert_eq!(ferry_response_request_id(ptr::null()), 0);
        assert_eq!(last_error(), "ferry_response_request_id: response is NULL");

        // NULL out-pointers and data of a live client and server.
        let server = new_server(node, c"nulls");
        let client = new_client(node, c"nulls");
        assert_eq!(
            ferry_server_recv(server, 0, ptr::null_mut()),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_server_recv: out is NULL");
        assert_eq!(
            ferry_client_recv(client, 0, ptr::null_mut()),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_client_recv: out is NULL");
        assert_eq!(
            ferry_client_call(client, ptr::null(), 0, 0, ptr::null_mut()),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(
            ferry_client_send(client, ptr::null(), 0, ptr::null_mut()),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_client_send: out is NULL");
        assert_eq!(
            ferry_client_send(client, ptr::null(), 3, &mut id),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "ferry_client_send: data is NULL and len is 3");
        assert_eq!(
            ferry_client_call(client, ptr::null(), 3, 0, &mut response),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(
            ferry_server_respond(server, 1, 2, ptr::null(), 3),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(
            ferry_client_has_server(client, ptr::null_mut()),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(
            ferry_client_pending(client, ptr::null_mut()),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(
            ferry_client_failed_request(client, ptr::null_mut()),
            FERRY_INVALID_ARGUMENT
        );
        // Timeouts below -1.
        assert_eq!(
            ferry_server_recv(server, -2, &mut request),
            FERRY_INVALID_ARGUMENT
        );
        assert!(
            last_error().contains("timeout_ns is -2"),
            "{}",
            last_error()
        );
        assert_eq!(
            ferry_client_recv(client, -5, &mut response),
            FERRY_INVALID_ARGUMENT
        );
        assert!(
            last_error().contains("timeout_ns is -5"),
            "{}",
            last_error()
        );
        assert_eq!(
            ferry_client_wait_for_server(client, i64::MIN),
            FERRY_INVALID_ARGUMENT
        );
        // Lengths past the largest message are refused before the bytes are looked at.
        let dangling = ptr::NonNull::<u8>::dangling().as_ptr().cast();
        assert_eq!(
            ferry_client_send(client, dangling, usize::MAX, &mut id),
            FERRY_TOO_LARGE
        );
        assert_eq!(
            ferry_server_respond(server, 1, 2, dangling, usize::MAX),
            FERRY_TOO_LARGE
        );

        // Freeing NULL does nothing.
        assert_eq!(ferry_server_free(ptr::null_mut()), FERRY_OK);
        assert_eq!(ferry_client_free(ptr::null_mut()), FERRY_OK);
        assert_eq!(ferry_client_free(client), FERRY_OK);
        assert_eq!(ferry_server_free(server), FERRY_OK);
        assert_eq!(ferry_node_free(node), FERRY_OK);
    }
}

#[test]
fn a_client_without_a_server_gets_no_server() {
    let node = service_node();
    let client = new_client(node, c"nobody");
    let body = b"anyone?";
    // SAFETY: live handles; `body` readable for its length; valid out-pointers.
    unsafe {
        let mut id = u64::MAX;
        let started = Instant::now();
        assert_eq!(
            ferry_client_send(client, body.as_ptr().cast(), body.len(), &mut id),
            FERRY_NO_SERVER
        );
        assert_eq!(id, u64::MAX, "no id for a request not sent");
        assert!(
            last_error().starts_with("ferry_client_send: no server for service nobody"),
            "{}",
            last_error()
        );
        let (status, response) = call(client, body, LONG_NS);
        assert_eq!(status, FERRY_NO_SERVER);
        assert!(response.is_null());
        assert!(started.elapsed() < LONG, "refused without waiting");
        assert_eq!(failed_request(client), None, "no request was sent");
        // Told to wait for a server, a send waits that long, then gives up the same way.
        assert_eq!(ferry_client_wait_for_server(client, 50_000_000), FERRY_OK);
        let started = Instant::now();
        assert_eq!(call(client, body, LONG_NS).0, FERRY_NO_SERVER);
        assert!(started.elapsed() >= Duration::from_millis(50));
        let mut has = true;
        assert_eq!(ferry_client_has_server(client, &mut has), FERRY_OK);
        assert!(!has);
        let mut pending = usize::MAX;
        assert_eq!(ferry_client_pending(client, &mut pending), FERRY_OK);
        assert_eq!(pending, 0);
        // Nothing pending: a receive finds nothing (and says so without a failure).
        let mut response = ptr::null_mut::<ferry_response>().wrapping_add(1);
        assert_eq!(
            ferry_client_recv(client, 0, &mut response),
            FERRY_WOULD_BLOCK
        );
        assert!(response.is_null());
        assert_eq!(
            ferry_client_recv(client, 1_000_000, &mut response),
            FERRY_TIMEOUT
        );
        assert_eq!(ferry_client_free(client), FERRY_OK);
        assert_eq!(ferry_node_free(node), FERRY_OK);
    }
}

#[test]
fn a_second_server_of_a_service_is_refused_as_taken() {
    let node = service_node();
    let first = new_server(node, c"one");
    let mut second = ptr::null_mut::<ferry_server>().wrapping_add(1);
    // SAFETY: live handles and valid out-pointers; each server freed once.
    unsafe {
        assert_eq!(
            ferry_server_new(node, c"one".as_ptr(), &shm_qos(), &mut second),
            FERRY_SERVICE_TAKEN
        );
        assert!(second.is_null());
        assert!(
            last_error().contains("svc"),
            "names the holder: {}",
            last_error()
        );
        assert_eq!(ferry_server_free(first), FERRY_OK);
        // Free again once the first has gone.
        assert_eq!(
            ferry_server_new(node, c"one".as_ptr(), &shm_qos(), &mut second),
            FERRY_OK,
            "{}",
            last_error()
        );
        assert_eq!(ferry_server_free(second), FERRY_OK);
        assert_eq!(ferry_node_free(node), FERRY_OK);
    }
}

/// A round trip, a request held while its server is used, an answer given later by client and
/// request id, an answer too large then answered smaller, a call that times out and its late
/// answer: the server on a thread, the client here, each step's handles checked.
#[test]
fn requests_and_responses_round_trip_and_are_released_once() {
    let node = service_node();
    let server = Moved(new_server(node, c"echo"));
    let client = new_client(node, c"echo");
    let (timed_out, told) = std::sync::mpsc::channel::<()>();
    let serving = std::thread::spawn(move || {
        let server = server;
        let s = server.0;
        // SAFETY: the server handle, used by this thread alone; each request read while held.
        unsafe {
            // 1. Answered at once with its own bytes (an echo).
            let request = recv_request(s);
            assert_eq!(request_body(request), b"ping");
            assert_eq!(ferry_request_id(request), 0);
            let asker = ferry_request_client(request);
            assert_ne!(asker, 0);
            // While the request is held, its server refuses everything else; a receive into the
            // variable that holds the request leaves it as it was.
            let mut same = request;
            assert_eq!(ferry_server_recv(s, 0, &mut same), FERRY_INVALID_ARGUMENT);
            assert_eq!(same, request);
            assert!(
                last_error().contains("release it (ferry_request_release) before calling"),
                "{}",
                last_error()
            );
            assert_eq!(ferry_server_free(s), FERRY_INVALID_ARGUMENT);
            assert!(last_error().contains("was not freed"), "{}", last_error());
            assert_eq!(
                ferry_server_respond(s, asker, 0, ptr::null(), 0),
                FERRY_INVALID_ARGUMENT
            );
            let (data, len) = (ferry_request_data(request), ferry_request_len(request));
            assert_eq!(
                ferry_request_respond(request, data.cast(), len),
                FERRY_OK,
                "{}",
                last_error()
            );
            // Ended: answering or releasing again is refused, and the accessors say so.
            assert_eq!(
                ferry_request_respond(request, ptr::null(), 0),
                FERRY_INVALID_ARGUMENT
            );
            assert_eq!(
                last_error(),
                "ferry_request_respond: this request was already answered or released"
            );
            assert_eq!(ferry_request_release(request), FERRY_INVALID_ARGUMENT);
            assert!(ferry_request_data(request).is_null());
            assert_eq!(ferry_request_len(request), 0);
            assert_eq!(ferry_request_client(request), 0);
            // An answer to a request this server never received is refused.
            assert_eq!(
                ferry_server_respond(s, asker, 0, ptr::null(), 0),
                FERRY_INVALID_ARGUMENT
            );
            assert!(
                last_error().contains("has no request 0 that this server received"),
                "{}",
                last_error()
            );

            // 2. Released, then answered later by client and id.
            let request = recv_request(s);
            assert_eq!(request_body(request), b"second");
            let (asker, id) = (ferry_request_client(request), ferry_request_id(request));
            assert_eq!(id, 1);
            assert_eq!(ferry_request_release(request), FERRY_OK);
            assert_eq!(ferry_request_release(request), FERRY_INVALID_ARGUMENT);
            assert_eq!(
                last_error(),
                "ferry_request_release: this request was already answered or released"
            );
            let later = b"later";
            assert_eq!(
                ferry_server_respond(s, asker, id, later.as_ptr().cast(), later.len()),
                FERRY_OK,
                "{}",
                last_error()
            );
            assert_eq!(
                ferry_server_respond(s, asker, id, later.as_ptr().cast(), later.len()),
                FERRY_INVALID_ARGUMENT,
                "answered once"
            );

            // 3. An answer larger than the server's limit: refused, the request kept for a
            // smaller answer.
            let request = recv_request(s);
            let (asker, id) = (ferry_request_client(request), ferry_request_id(request));
            let big = vec![1u8; 4097];
            assert_eq!(
                ferry_request_respond(request, big.as_ptr().cast(), big.len()),
                FERRY_TOO_LARGE
            );
            assert!(ferry_request_data(request).is_null(), "the request ended");
            let smaller = b"smaller";
            assert_eq!(
                ferry_server_respond(s, asker, id, smaller.as_ptr().cast(), smaller.len()),
                FERRY_OK,
                "{}",
                last_error()
            );

            // 4. Left unanswered until the client's call timed out, then answered late.
            let request = recv_request(s);
            assert_eq!(request_body(request), b"slow");
            let (asker, id) = (ferry_request_client(request), ferry_request_id(request));
            assert_eq!(ferry_request_release(request), FERRY_OK);
            told.recv_timeout(LONG)
                .expect("the client's call timed out");
            assert_eq!(
                ferry_server_respond(s, asker, id, b"late".as_ptr().cast(), 4),
                FERRY_OK
            );

            // 5. The next call is answered on time, with nothing of the late answer.
            let request = recv_request(s);
            assert_eq!(request_body(request), b"after");
            assert_eq!(
                ferry_request_respond(request, b"on time".as_ptr().cast(), 7),
                FERRY_OK
            );
        }
        server
    });

    // SAFETY: the client handle, used by this thread alone; each response read while held.
    unsafe {
        assert_eq!(ferry_client_wait_for_server(client, LONG_NS), FERRY_OK);
        let (status, response) = call(client, b"ping", LONG_NS);
        assert_eq!(status, FERRY_OK, "{}", last_error());
        assert_eq!(response_body(response), b"ping");
        assert_eq!(ferry_response_request_id(response), 0);
        // While the response is held, its client refuses everything else but the last failure.
        let mut same = response;
        assert_eq!(
            ferry_client_recv(client, 0, &mut same),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(same, response);
        assert!(
            last_error().contains("release it (ferry_response_release) before calling"),
            "{}",
            last_error()
        );
        let (status, again) = call(client, b"x", 0);
        assert_eq!(status, FERRY_INVALID_ARGUMENT);
        assert!(again.is_null(), "a fresh variable is cleared");
        let mut same = response;
        assert_eq!(
            ferry_client_call(client, ptr::null(), 0, 0, &mut same),
            FERRY_INVALID_ARGUMENT
        );
        assert_eq!(same, response, "the variable holding the response is kept");
        let mut n = 0;
        assert_eq!(ferry_client_pending(client, &mut n), FERRY_INVALID_ARGUMENT);
        assert_eq!(ferry_client_free(client), FERRY_INVALID_ARGUMENT);
        assert!(last_error().contains("was not freed"), "{}", last_error());
        assert_eq!(failed_request(client), None);
        assert_eq!(ferry_response_release(response), FERRY_OK);
        assert_eq!(ferry_response_release(response), FERRY_INVALID_ARGUMENT);
        assert_eq!(
            last_error(),
            "ferry_response_release: this response was already released"
        );
        assert!(ferry_response_data(response).is_null());
        assert_eq!(ferry_response_len(response), 0);
        assert_eq!(ferry_response_request_id(response), 0);

        // A request sent, its answer received apart.
        let mut id = u64::MAX;
        assert_eq!(
            ferry_client_send(client, b"second".as_ptr().cast(), 6, &mut id),
            FERRY_OK
        );
        assert_eq!(id, 1);
        assert_eq!(ferry_client_pending(client, &mut n), FERRY_OK);
        assert_eq!(n, 1);
        let mut response = ptr::null_mut();
        assert_eq!(
            ferry_client_recv(client, LONG_NS, &mut response),
            FERRY_OK,
            "{}",
            last_error()
        );
        assert_eq!(response_body(response), b"later");
        assert_eq!(ferry_response_request_id(response), 1);
        assert_eq!(ferry_response_release(response), FERRY_OK);

        let (status, response) = call(client, b"third", LONG_NS);
        assert_eq!(status, FERRY_OK, "{}", last_error());
        assert_eq!(response_body(response), b"smaller");
        assert_eq!(ferry_response_request_id(response), 2);
        assert_eq!(ferry_response_release(response), FERRY_OK);

        let (status, response) = call(client, b"slow", 50_000_000);
        assert_eq!(status, FERRY_TIMEOUT);
        assert!(response.is_null());
        assert!(
            last_error().contains("request 3 of service echo got no response"),
            "{}",
            last_error()
        );
        assert_eq!(failed_request(client), Some(3));
        timed_out.send(()).unwrap();
        let (status, response) = call(client, b"after", LONG_NS);
        assert_eq!(status, FERRY_OK, "{}", last_error());
        assert_eq!(response_body(response), b"on time");
        assert_eq!(ferry_response_request_id(response), 4);
        assert_eq!(ferry_response_release(response), FERRY_OK);

        // Larger than the client's limit: refused before it is sent.
        let big = vec![0u8; 4097];
        assert_eq!(call(client, &big, LONG_NS).0, FERRY_TOO_LARGE);
        assert_eq!(failed_request(client), Some(3), "no request was sent");
        assert_eq!(ferry_client_pending(client, &mut n), FERRY_OK);
        assert_eq!(n, 0);
        let mut has = false;
        assert_eq!(ferry_client_has_server(client, &mut has), FERRY_OK);
        assert!(has);
    }
    let server = serving.join().expect("the server's thread");
    // SAFETY: the handles made above, freed once, the node last.
    unsafe {
        assert_eq!(ferry_client_free(client), FERRY_OK);
        assert_eq!(ferry_server_free(server.0), FERRY_OK);
        assert_eq!(ferry_node_free(node), FERRY_OK);
    }
}

/// A server freed with requests pending: the pending call ends with FERRY_SERVER_GONE, and so
/// does each request sent ahead, one per receive, each named by ferry_client_failed_request.
#[test]
fn a_server_freed_with_requests_pending_ends_them_with_server_gone() {
    let node = service_node();
    let client = new_client(node, c"leaving");
    /// A server that takes `count` requests, releases them unanswered and is freed.
    fn serve_and_leave(node: *mut ferry_node, count: usize) -> std::thread::JoinHandle<()> {
        let server = Moved(new_server(node, c"leaving"));
        std::thread::spawn(move || {
            let server = server;
            for _ in 0..count {
                let request = recv_request(server.0);
                // SAFETY: a held request, released once; then the server, freed once.
                assert_eq!(unsafe { ferry_request_release(request) }, FERRY_OK);
            }
            // SAFETY: the server made above, holding no request, freed once.
            assert_eq!(unsafe { ferry_server_free(server.0) }, FERRY_OK);
        })
    }
    // SAFETY: the client handle, used by this thread alone.
    unsafe {
        assert_eq!(ferry_client_wait_for_server(client, LONG_NS), FERRY_OK);
        let leaving = serve_and_leave(node, 1);
        let started = Instant::now();
        let (status, response) = call(client, b"are you there", LONG_NS);
        assert_eq!(status, FERRY_SERVER_GONE, "{}", last_error());
        assert!(
            started.elapsed() < LONG,
            "ended without waiting for the timeout"
        );
        assert!(response.is_null());
        assert!(
            last_error().contains("went away") && last_error().contains("request 0"),
            "{}",
            last_error()
        );
        assert_eq!(failed_request(client), Some(0));
        leaving.join().expect("the first server's thread");

        // Requests sent ahead end one per receive.
        let leaving = serve_and_leave(node, 2);
        let mut ids = [u64::MAX; 2];
        for (body, id) in [b"one", b"two"].iter().zip(&mut ids) {
            assert_eq!(
                ferry_client_send(client, body.as_ptr().cast(), 3, id),
                FERRY_OK,
                "{}",
                last_error()
            );
        }
        assert_eq!(ids, [1, 2]);
        leaving.join().expect("the second server's thread");
        let mut ended = Vec::new();
        for _ in 0..2 {
            let mut response = ptr::null_mut();
            assert_eq!(
                ferry_client_recv(client, LONG_NS, &mut response),
                FERRY_SERVER_GONE,
                "{}",
                last_error()
            );
            assert!(response.is_null());
            ended.extend(failed_request(client));
        }
        ended.sort_unstable();
        assert_eq!(ended, ids, "each pending request ended once");
        let mut n = usize::MAX;
        assert_eq!(ferry_client_pending(client, &mut n), FERRY_OK);
        assert_eq!(n, 0);
        // With nothing pending and no server, the next send is refused.
        assert_eq!(ferry_client_wait_for_server(client, 0), FERRY_OK);
        assert_eq!(call(client, b"again", LONG_NS).0, FERRY_NO_SERVER);
        assert_eq!(ferry_client_free(client), FERRY_OK);
        assert_eq!(ferry_node_free(node), FERRY_OK);
    }
}

/// An answer to a client that has gone is dropped and said so (FERRY_CLIENT_GONE), which is not
/// a failure: the last error message stays as it was.
#[test]
fn an_answer_to_a_client_that_has_gone_is_client_gone() {
    let node = service_node();
    let server = Moved(new_server(node, c"left"));
    let client = Moved(new_client(node, c"left"));
    let (sent, told) = std::sync::mpsc::channel::<()>();
    let (gone, told_gone) = std::sync::mpsc::channel::<()>();
    let calling = std::thread::spawn(move || {
        let client = client;
        // SAFETY: the client handle, used by this thread alone, freed once.
        unsafe {
            assert_eq!(ferry_client_wait_for_server(client.0, LONG_NS), FERRY_OK);
            // Answered once, so that the server knows this client.
            let (status, response) = call(client.0, b"hi", LONG_NS);
            assert_eq!(status, FERRY_OK, "{}", last_error());
            assert_eq!(ferry_response_release(response), FERRY_OK);
            let mut id = 0;
            assert_eq!(
                ferry_client_send(client.0, b"bye".as_ptr().cast(), 3, &mut id),
                FERRY_OK
            );
            sent.send(()).unwrap();
            told_gone.recv_timeout(LONG).expect("the request received");
            assert_eq!(ferry_client_free(client.0), FERRY_OK);
        }
    });
    let s = server.0;
    // SAFETY: the server handle, used by this thread alone; each request read while held.
    unsafe {
        let request = recv_request(s);
        assert_eq!(ferry_request_respond(request, ptr::null(), 0), FERRY_OK);
        told.recv_timeout(LONG).expect("the second request sent");
        let request = recv_request(s);
        let (asker, id) = (ferry_request_client(request), ferry_request_id(request));
        assert_eq!(ferry_request_release(request), FERRY_OK);
        gone.send(()).unwrap();
        calling.join().expect("the client's thread");
        // The server notices within its look at its clients (every 100 ms) while it waits.
        let mut none = ptr::null_mut();
        assert_eq!(ferry_server_recv(s, 300_000_000, &mut none), FERRY_TIMEOUT);
        assert_eq!(
            ferry_request_release(ptr::null_mut()),
            FERRY_INVALID_ARGUMENT
        );
        let before = last_error();
        assert_eq!(
            ferry_server_respond(s, asker, id, b"too late".as_ptr().cast(), 8),
            FERRY_CLIENT_GONE
        );
        assert_eq!(last_error(), before, "not a failure");
        assert_eq!(ferry_server_free(s), FERRY_OK);
        assert_eq!(ferry_node_free(node), FERRY_OK);
    }
}
