//! The minimal publisher: a 64-byte message every 10 ms.

use std::time::Instant;

use ferry_min::{Options, MESSAGE_SIZE, PERIOD};

fn main() {
    let o = Options::from_args();
    let run = || -> Result<(), Box<dyn std::error::Error>> {
        let node = o.node("min-pub")?;
        let mut publisher = node.publisher(&o.topic, &o.qos())?;
        let start = Instant::now();
        let mut next = start;
        let mut n: u64 = 0;
        loop {
            if o.seconds
                .is_some_and(|s| start.elapsed().as_secs_f64() >= s)
            {
                return Ok(());
            }
            let mut msg = [0u8; MESSAGE_SIZE];
            msg[..8].copy_from_slice(&n.to_le_bytes());
            // With no subscriber yet, or one that went away, sending still works (reliable
            // delivery waits only for live subscribers).
            publisher.send(&msg)?;
            n += 1;
            next += PERIOD;
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else {
                next = now;
            }
        }
    };
    if let Err(e) = run() {
        eprintln!("min-pub: {e}");
        std::process::exit(1);
    }
}
