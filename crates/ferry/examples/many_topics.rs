//! Holds many live topics for tools to look at: `cargo run --release -p ferry --example
//! many_topics -- DOMAIN [TOPICS] [SECONDS]` makes TOPICS topics (default 200) in DOMAIN, each
//! with one shared-memory publisher and one subscriber (2 × TOPICS endpoints), publishes one
//! message on each every second, and ends after SECONDS (default 60). What `ferry monitor`'s
//! figure for 200 topics and 400 endpoints is measured against (docs/RESULTS.md).

use std::time::{Duration, Instant};

use ferry::{Delivery, Node, Qos, Transport};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let domain = args
        .next()
        .ok_or("usage: many_topics DOMAIN [TOPICS] [SECONDS]")?;
    let topics: usize = args.next().map_or(Ok(200), |a| a.parse())?;
    let seconds: u64 = args.next().map_or(Ok(60), |a| a.parse())?;
    let node = Node::with_domain("many", &domain)?;
    let qos = Qos::default()
        .transport(Transport::Shm)
        .delivery(Delivery::Latest)
        .max_message_size(64);
    let mut ends = Vec::with_capacity(topics);
    for i in 0..topics {
        let topic = format!("load/t{i:03}");
        let sub = node.subscriber(&topic, &qos)?;
        let publ = node.publisher(&topic, &qos)?;
        ends.push((publ, sub));
    }
    println!(
        "{topics} topics, {} endpoints, in domain {domain}",
        2 * topics
    );
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(seconds) {
        for (publ, sub) in &mut ends {
            publ.send(b"tick")?;
            while sub.try_recv()?.is_some() {}
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    Ok(())
}
