//! ferry moves data between applications: over shared memory when they share a host.
//!
//! ```no_run
//! use ferry::{Node, Qos};
//! let node = Node::new("writer")?;
//! let mut publisher = node.publisher("sensors/lidar", &Qos::default())?;
//! publisher.send_slice(&[1u32, 2, 3])?;
//!
//! let reader = Node::new("reader")?;
//! let mut subscriber = reader.subscriber("sensors/lidar", &Qos::default())?;
//! let sample = subscriber.recv()?;
//! let values: &[u32] = sample.as_slice()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Layers, bottom up: `sys` (the only code that calls the OS), `sync` (atomics, swapped for loom
//! under `--cfg loom`), `shm::ring` (the lock-free ring protocol, no I/O), `shm` (segments,
//! topics, publisher and subscriber ends), and this crate's root (nodes, QoS, the user API).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod admin;
mod config;
pub mod cycle;
mod error;
mod node;
pub mod pod;
mod qos;
pub(crate) mod shm;
mod sync;
pub mod sys;
pub mod udp;

pub use config::{Impairment, NodeConfig};
pub use cycle::{Cycle, CycleStats, Schedule, Tick};
pub use error::{Error, PodError, RecvError, SendError};
pub use node::{Loan, LoanSlice, Node, Publisher, Sample, Subscriber};
pub use pod::Pod;
pub use qos::{Delivery, IpVersion, MulticastGroup, Qos, Transport, WaitStrategy};
pub use udp::crypto::DomainKey;
pub use udp::discovery::{DiscoveryConfig, DiscoveryLimits};

/// The README's example, compiled as a doc test so that it stays true.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
