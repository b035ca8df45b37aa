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
//! topics, publisher and subscriber ends), `udp` (frames, the protocol cores, discovery, the
//! domain key, endpoints), and this crate's root (nodes, QoS, the user API). `sys`, `shm` and
//! `udp` are private: the API is this root, `admin`, `cycle` and `pod`.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod admin;
mod config;
pub mod cycle;
mod deadline;
mod error;
pub mod event;
mod names;
mod node;
pub mod pod;
mod qos;
mod reactor;
pub(crate) mod refusal;
pub mod service;
mod sync;
mod topic_type;
mod vocabulary;
mod waiting;
mod waitset;

// The OS layer, the shared-memory ring and the UDP protocol's internals are not part of the
// API. The `internals` feature opens them to ferry's own tests and fuzz targets (the ring's
// reader and writer, frame and discovery decoders, the protocol cores, impairment) and to the
// performance lab (its raw baselines use `sys`); nothing else should enable it. Without it, what only those use is compiled out
// (`cfg(any(test, feature = "internals"))`), and the dead-code lint checks the rest.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod shm;
#[cfg(not(feature = "internals"))]
mod shm;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod sys;
#[cfg(not(feature = "internals"))]
mod sys;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod udp;
#[cfg(not(feature = "internals"))]
mod udp;

pub use config::{Impairment, NodeConfig};
pub use cycle::{Cycle, CycleStats, Schedule, Tick};
pub use error::{quoted_name, rename_api_items, Error, PodError, RecvError, SendError};
pub use event::{Event, Gone, PublisherId};
pub use node::{Kept, Loan, LoanSlice, Node, Publisher, PublisherInfo, Sample, Subscriber};
pub use pod::Pod;
pub use qos::{
    Delivery, IpVersion, MulticastGroup, Qos, Transport, WaitStrategy, DEFAULT_LEASE, MAX_HELD,
    MAX_HISTORY, MAX_LEASE, MAX_UDP_HISTORY, MIN_LEASE,
};
pub use service::{CallError, Client, ReplyTo, Request, RequestId, Response, Server};
pub use sys::udp::MulticastInterface;
pub use topic_type::{MessageEncoding, TopicType, MAX_SCHEMA, MAX_TYPE_NAME};
pub use udp::crypto::DomainKey;
pub use udp::discovery::{DiscoveryConfig, DiscoveryLimits};
pub use vocabulary::ParseNameError;
pub use waitset::{Armed, Messages, Timer, WaitSet, Waitable};

/// The longest node name (bytes).
pub const MAX_NODE_NAME: usize = shm::layout::MAX_NODE_NAME;
/// The longest topic name (bytes).
pub const MAX_TOPIC_NAME: usize = shm::topic::MAX_TOPIC;
/// The longest domain name (bytes).
pub const MAX_DOMAIN_NAME: usize = shm::topic::MAX_DOMAIN;

/// Bytes of ferry's header in every UDP data datagram, ahead of the message's bytes (a message
/// that does not fit one datagram of the path MTU is cut into fragments, each behind this
/// header).
pub const UDP_DATA_HEADER: usize = udp::frame::DATA_HEADER;

/// Bytes each message takes in a UDP batch datagram beyond its own (its length), after a header
/// of [`UDP_DATA_HEADER`] bytes: small messages published in a burst share datagrams.
pub const UDP_BATCH_ENTRY: usize = udp::frame::BATCH_ENTRY;

/// Bytes a domain key adds to every UDP datagram: a 20-byte header and a 16-byte tag.
pub const UDP_SEAL_OVERHEAD: usize = udp::crypto::SEAL_OVERHEAD;

/// The README's example, compiled as a doc test so that it stays true.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
