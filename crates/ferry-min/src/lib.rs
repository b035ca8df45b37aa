//! The minimal footprint applications of `ferry lab footprint` (the footprint test of the Vortex
//! Lite performance whitepaper): `min-pub` sends a 64-byte message every 10 ms, `min-sub`
//! receives them.
//! Both use only the `ferry` library and build with the workspace profile `min-size`:
//!
//! ```sh
//! cargo build --profile min-size -p ferry-min
//! ```
//!
//! Arguments (both apps, no argument parser, to stay small): `--udp` selects ferry's UDP
//! transport instead of shared memory; `--domain NAME` the domain (default `FERRY_DOMAIN`, or
//! `default`); `--topic NAME` the topic (default `min`); `--seconds S` how long to run (default:
//! until killed).

use std::time::Duration;

use ferry::{Qos, Transport, WaitStrategy};

/// The payload size of the footprint test.
pub const MESSAGE_SIZE: usize = 64;
/// The publishing period.
pub const PERIOD: Duration = Duration::from_millis(10);

/// What both apps take from the command line.
pub struct Options {
    pub udp: bool,
    pub domain: Option<String>,
    pub topic: String,
    pub seconds: Option<f64>,
}

impl Options {
    /// Reads `std::env::args`; exits with a message on a bad argument.
    pub fn from_args() -> Options {
        let mut o = Options {
            udp: false,
            domain: None,
            topic: "min".to_owned(),
            seconds: None,
        };
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            match a.as_str() {
                "--udp" => o.udp = true,
                "--domain" => o.domain = args.next(),
                "--topic" => o.topic = args.next().unwrap_or_default(),
                "--seconds" => o.seconds = args.next().and_then(|s| s.parse().ok()),
                other => {
                    eprintln!(
                        "unknown argument {other:?}: use --udp, --domain D, --topic T, --seconds S"
                    );
                    std::process::exit(2);
                }
            }
        }
        o
    }

    /// The QoS of both ends: 64-byte messages, blocking waits (no busy loop), small rings.
    pub fn qos(&self) -> Qos {
        Qos::default()
            .transport(if self.udp {
                Transport::Udp
            } else {
                Transport::Shm
            })
            .wait(WaitStrategy::Block)
            .max_message_size(MESSAGE_SIZE)
    }

    pub fn node(&self, name: &str) -> Result<ferry::Node, ferry::Error> {
        match &self.domain {
            Some(d) => ferry::Node::with_domain(name, d),
            None => ferry::Node::new(name),
        }
    }
}
