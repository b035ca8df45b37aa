//! The peer process: the other end of each ping-pong, answering every ping.

use super::options::{LatencySubject, PEER_TIMEOUT};
use crate::error::Result;
use crate::subject::Subject;
use crate::{await_message, Endpoint};
use serde::{Deserialize, Serialize};
use std::net::{Ipv4Addr, SocketAddr};

/// What the main side asks of the peer: answer `counts[i]` pings of `sizes[i]` bytes, in turn,
/// over the transport named, at the place named.
#[derive(Debug, Serialize, Deserialize)]
pub struct PeerRequest {
    pub(super) transport: Subject,
    pub(super) sizes: Vec<usize>,
    pub(super) counts: Vec<usize>,
    pub(super) cpu: Option<usize>,
    pub(super) max_size: usize,
    /// The ferry transports' domain and topics.
    pub(super) ferry: Option<FerryTopics>,
    /// The raw shared-memory channel's name.
    pub(super) shm: Option<String>,
    /// The main process's raw UDP socket.
    pub(super) udp: Option<SocketAddr>,
}

impl PeerRequest {
    /// The peer's node for a ferry transport, in `domain` (sealed if `keyed`, its discovery
    /// reaching `main_host`), and the transport's settings.
    pub(super) fn ferry_node(
        &self,
        domain: &str,
        keyed: bool,
        main_host: Option<Ipv4Addr>,
    ) -> Result<(ferry::Node, ferry::Qos)> {
        let qos = self
            .transport
            .ferry_qos(self.max_size)
            .expect("a ferry transport has a QoS");
        let node = crate::lab_node_reaching(
            "lab-peer",
            domain,
            keyed,
            crate::discovery_reaching(main_host),
        )?;
        Ok((node, qos))
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct FerryTopics {
    pub(super) domain: String,
    pub(super) ping: String,
    pub(super) pong: String,
    /// On two machines: the main process's machine, which the peer's discovery reaches.
    pub(super) main_host: Option<std::net::Ipv4Addr>,
}

/// The peer side: answers every ping with a pong of the same size.
pub(super) fn echo<E: Endpoint>(
    end: &mut E,
    args: &PeerRequest,
    main_alive: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    let mut seq = 0u64;
    for (&size, &count) in args.sizes.iter().zip(&args.counts) {
        for _ in 0..count {
            await_message(end, seq, size, PEER_TIMEOUT, main_alive)?;
            end.send(seq, size)?;
            seq += 1;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
