//! The minimal subscriber: receives the publisher's messages and counts them.

use std::time::{Duration, Instant};

use ferry_min::Options;

fn main() {
    let o = Options::from_args();
    let run = || -> Result<u64, Box<dyn std::error::Error>> {
        let node = o.node("min-sub")?;
        let mut subscriber = node.subscriber(&o.topic, &o.qos())?;
        let start = Instant::now();
        let mut received: u64 = 0;
        loop {
            if o.seconds
                .is_some_and(|s| start.elapsed().as_secs_f64() >= s)
            {
                return Ok(received);
            }
            if subscriber
                .recv_timeout(Duration::from_millis(100))?
                .is_some()
            {
                received += 1;
            }
        }
    };
    match run() {
        Ok(n) => println!("received {n}"),
        Err(e) => {
            eprintln!("min-sub: {e}");
            std::process::exit(1);
        }
    }
}
