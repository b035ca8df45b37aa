//! `Subscriber::recv_async` in an executor of the test's own (ferry needs no runtime): the
//! future wakes its task when a message comes, over shared memory and UDP; it times out; the
//! task is polled a few times per wait, not in a loop; a future dropped mid-wait leaves the
//! subscriber as it was; and it can move between threads.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use ferry::{Node, Qos, Transport};

mod common;
use common::*;

const WAIT: Duration = Duration::from_secs(10);

/// Wakes a parked thread, and counts the wake-ups.
struct Unpark(std::thread::Thread, AtomicUsize);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.1.fetch_add(1, Ordering::Relaxed);
        self.0.unpark();
    }
}

/// Runs `f` to completion on this thread, parked between polls (at most `limit`); returns
/// its output and how many times its waker woke it.
fn block_on<F: Future>(f: F, limit: Duration) -> (F::Output, usize) {
    let unpark = Arc::new(Unpark(std::thread::current(), AtomicUsize::new(0)));
    let waker = Waker::from(unpark.clone());
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    let end = Instant::now() + limit;
    loop {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return (out, unpark.1.load(Ordering::Relaxed));
        }
        assert!(
            Instant::now() < end,
            "the future did not finish within {limit:?}"
        );
        // Woken by the waker; the bound only keeps a broken waker from hanging the test.
        std::thread::park_timeout(Duration::from_secs(2));
    }
}

/// Threads of this process that are wait sets' helpers.
fn helper_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "ferry-waitset")
        .count()
}

fn qos(t: Transport) -> Qos {
    blocking_qos(t, 1024)
}

#[test]
fn recv_async_wakes_its_task_when_a_message_comes() {
    for t in [Transport::Shm, Transport::Udp] {
        let dom = domain(&format!("async-{t:?}"));
        let node = Node::with_domain("n", &dom).unwrap();
        let mut sub = node.subscriber("a", &qos(t)).unwrap();
        let mut publ = node.publisher("a", &qos(t)).unwrap();
        assert!(meet(&mut sub, &publ, WAIT));
        let mut wakes = Vec::new();
        for i in 0..10u8 {
            let sender = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(40));
                publ.send(&[i; 16]).unwrap();
                publ
            });
            let (got, n) = block_on(
                async {
                    let s = sub.recv_async(Some(WAIT)).await.unwrap();
                    s.map(|s| s.to_vec())
                },
                WAIT,
            );
            assert_eq!(got.as_deref(), Some(&[i; 16][..]), "{t:?}");
            wakes.push(n);
            publ = sender.join().unwrap();
        }
        // Woken by its waker for the messages it waited for (one that came before the first
        // poll, on a loaded machine, needs none; its own timers may wake it now and then too),
        // never in a loop.
        assert!(
            wakes.iter().filter(|&&w| w >= 1).count() >= 5 && wakes.iter().all(|&w| w < 50),
            "{t:?}: woken {wakes:?} times"
        );
        if t == Transport::Shm {
            // The wait sets of finished waits are kept, with their helper threads, for the next
            // waits: one stays after them (not one started and joined per wait).
            assert!(helper_threads() >= 1, "no wait set kept between waits");
        }
    }
}

#[test]
fn recv_async_times_out_is_cancelled_by_a_drop_and_moves_between_threads() {
    let dom = domain("async-to");
    let node = Node::with_domain("n", &dom).unwrap();
    let mut sub = node.subscriber("b", &qos(Transport::Shm)).unwrap();
    let mut publ = node.publisher("b", &qos(Transport::Shm)).unwrap();
    assert!(meet(&mut sub, &publ, WAIT));
    let (got, _) = block_on(
        async {
            sub.recv_async(Some(Duration::from_millis(100)))
                .await
                .unwrap()
                .is_none()
        },
        WAIT,
    );
    assert!(got, "nothing came: None");
    // Polled once (it waits), then dropped: the subscriber receives as before.
    {
        let unpark = Arc::new(Unpark(std::thread::current(), AtomicUsize::new(0)));
        let waker = Waker::from(unpark);
        let mut f = Box::pin(sub.recv_async(None));
        assert!(f
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
    }
    publ.send(b"after").unwrap();
    assert_eq!(&*sub.recv_timeout(WAIT).unwrap().unwrap(), b"after");
    // The future can be sent to another thread (multi-threaded executors move tasks).
    publ.send(b"elsewhere").unwrap();
    let got = std::thread::scope(|s| {
        let f = sub.recv_async(Some(WAIT));
        s.spawn(move || block_on(async { f.await.unwrap().map(|m| m.to_vec()) }, WAIT).0)
            .join()
            .unwrap()
    });
    assert_eq!(got.as_deref(), Some(&b"elsewhere"[..]));
}
