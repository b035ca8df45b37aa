//! The Rust twin of examples/c/pingpong.c: the same shared-memory ping-pong (two threads pinned
//! to CPUs 0 and 1, reliable, spinning, every byte written through a loan (memset) and checked in
//! place (memcmp))
//! through ferry's Rust API, so that the C API's overhead is the difference.
//!
//! `cargo run --release -p ferry-c --example pingpong -- SIZE SAMPLES [WARMUP]` prints one line:
//! `size=… samples=… p50_ns=… p90_ns=… p99_ns=…`.

use std::time::{Duration, Instant};

use ferry::{Delivery, Node, Publisher, Qos, Subscriber, Transport, WaitStrategy};

struct End {
    out: Publisher,
    inp: Subscriber,
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET and sched_setaffinity get valid
    // pointers to it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0,
            "cannot pin to CPU {cpu}"
        );
    }
}

fn pattern(seq: u64, pong: bool) -> u8 {
    ((seq + if pong { 128 } else { 0 }) % 255) as u8 + 1
}

fn open_end(node: &Node, size: usize, out: &str, inp: &str) -> End {
    let qos = Qos::default()
        .transport(Transport::Shm)
        .delivery(Delivery::Reliable)
        .wait(WaitStrategy::Spin)
        .max_message_size(size);
    let inp = node.subscriber(inp, &qos).expect("subscriber");
    let out = node.publisher(out, &qos).expect("publisher");
    End { out, inp }
}

fn await_peer(e: &mut End) {
    while e.inp.publisher_count() == 0 || e.out.subscriber_count() == 0 {
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn send(e: &mut End, size: usize, byte: u8) {
    let mut loan = e.out.loan(size).expect("loan");
    loan.as_mut_slice().fill(byte);
    loan.send().expect("send");
}

fn recv(e: &mut End, size: usize, byte: u8) {
    let sample = e.inp.recv().expect("recv");
    let len = sample.len();
    // Every byte is `byte`: the first is, and each equals the next (libc's memcmp, as in
    // pingpong.c, so that both do the same payload work).
    let intact = len == size
        && (len == 0 || {
            let p = sample.as_ptr();
            // SAFETY: both ranges lie within the sample's `len` bytes, which it keeps alive.
            sample[0] == byte && unsafe { libc::memcmp(p.cast(), p.add(1).cast(), len - 1) } == 0
        });
    assert!(intact, "a damaged message ({len} bytes)");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).and_then(|a| a.parse::<u64>().ok());
    let (Some(size), Some(samples)) = (arg(1), arg(2)) else {
        eprintln!("usage: pingpong SIZE SAMPLES [WARMUP]");
        std::process::exit(2);
    };
    let size = size as usize;
    let warmup = arg(3).unwrap_or(samples / 10);
    let total = warmup + samples;
    let ping = format!("ping-{}", std::process::id());
    let pong = format!("pong-{}", std::process::id());
    let node = Node::new("pingpong-rust").expect("node");

    pin(0);
    let mut e = open_end(&node, size, &ping, &pong);
    let peer = {
        let (node, ping, pong) = (node.clone(), ping.clone(), pong.clone());
        std::thread::spawn(move || {
            pin(1);
            let mut e = open_end(&node, size, &pong, &ping);
            await_peer(&mut e);
            for seq in 0..total {
                recv(&mut e, size, pattern(seq, false));
                send(&mut e, size, pattern(seq, true));
            }
            // Stay until the ping side has left, so that its last reply is read.
            while e.inp.publisher_count() > 0 {
                let _ = e.inp.recv_timeout(Duration::from_millis(1));
            }
        })
    };
    await_peer(&mut e);

    let mut one_way = Vec::with_capacity(samples as usize);
    for seq in 0..total {
        let t0 = Instant::now();
        send(&mut e, size, pattern(seq, false));
        recv(&mut e, size, pattern(seq, true));
        let rt = t0.elapsed().as_nanos() as u64;
        if seq >= warmup {
            one_way.push(rt / 2);
        }
    }
    drop(e);
    peer.join().expect("the pong thread");

    one_way.sort_unstable();
    let n = one_way.len();
    println!(
        "size={size} samples={n} p50_ns={} p90_ns={} p99_ns={}",
        one_way[n / 2],
        one_way[n * 9 / 10],
        one_way[n * 99 / 100]
    );
}
