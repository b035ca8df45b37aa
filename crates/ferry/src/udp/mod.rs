//! The UDP transport: ferry's own framing and fragmentation (never IP fragmentation), NAK-based
//! repair, heartbeats and receiver-driven flow control, over batched sockets.
//!
//! `proto` is the protocol core: no I/O, time passed in, tested deterministically. `impair`
//! injects loss, duplication, reordering and delay (this kernel has no netem). The sockets live in
//! `crate::sys::udp`.

pub mod congestion;
pub mod crypto;
pub mod frame;
mod ids;
pub mod impair;
pub mod receiver;
pub(crate) use crate::refusal;
pub mod sender;

pub mod discovery;

#[cfg(test)]
mod attack_tests;
mod endpoint;
#[cfg(test)]
mod link_tests;
pub(crate) use endpoint::{UdpPublisher, UdpSubscriber};
