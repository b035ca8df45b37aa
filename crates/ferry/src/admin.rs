//! Looking at and tidying live topics: what `ferry topics`, `ferry stats` and `ferry clean` use.

pub use crate::shm::topic::{
    clean, clean_forced, list_topics, validate_domain, validate_topic, CleanReport, CongestionInfo,
    PublisherStats, SubscriberStats, TopicEntry, TopicSnapshot,
};
pub use crate::udp::discovery::DiscoveryRefusals;
pub use crate::udp::refusal::{Refusal, Refusals, REASONS};

/// A snapshot of one topic, if it exists. Names ferry would refuse are refused here too
/// (`InvalidName`), rather than looked for.
pub fn topic(domain: &str, topic: &str) -> Result<Option<TopicSnapshot>, crate::Error> {
    validate_domain(domain)?;
    validate_topic(topic)?;
    Ok(crate::shm::topic::Topic::open_existing(domain, topic)?.map(|t| t.snapshot()))
}

/// A topic's type, if an end of this host declared one (`Qos::topic_type`); `None` also when
/// the topic does not exist. A damaged type record is an error.
pub fn topic_type(domain: &str, topic: &str) -> Result<Option<crate::TopicType>, crate::Error> {
    validate_domain(domain)?;
    validate_topic(topic)?;
    match crate::shm::topic::Topic::open_existing(domain, topic)? {
        Some(t) => t.topic_type(),
        None => Ok(None),
    }
}

pub use crate::shm::data::LastMessage;

/// The node name of the Zenoh bridge (`ferry-zenoh`): its publishers and subscribers carry a
/// topic to and from Zenoh, and tools show them as such.
pub const ZENOH_BRIDGE_NODE: &str = "ferry-zenoh";

/// The newest message of each shared-memory publisher of a topic on this host, the first
/// `limit` bytes of each (`LastMessage::len` says how long it is), read without subscribing:
/// neither the publishers nor their subscribers see the look (no reader joins the ring, nothing
/// is written to it, no one waits for it). Publishers with nothing readable now are left out,
/// and so are UDP-only publishers (they keep no ring); a publisher's segment that fails its
/// checks is an error in its place. Rings larger than `max_ring` bytes are not looked at.
#[allow(clippy::type_complexity)]
pub fn last_messages(
    domain: &str,
    topic: &str,
    limit: usize,
    max_ring: u64,
) -> Result<Vec<Result<LastMessage, crate::Error>>, crate::Error> {
    validate_domain(domain)?;
    validate_topic(topic)?;
    Ok(
        match crate::shm::topic::Topic::open_existing(domain, topic)? {
            Some(t) => t.last_messages(limit, max_ring),
            None => Vec::new(),
        },
    )
}

/// A UDP endpoint announced by another host.
#[derive(Debug, Clone)]
pub struct RemoteEndpoint {
    pub publisher: bool,
    pub topic: String,
    pub addr: std::net::SocketAddr,
    pub reliable: bool,
}

/// Listens to discovery in the domain of `config`, with its key and discovery settings, for
/// what other hosts announce: [`RemoteListener::endpoints`] lists what arrived so far (hosts
/// announce every second or so; the caller decides how long to wait). Needs discovery switched
/// on (`FERRY_DISCOVERY=multicast` or `FERRY_PEERS`, or the same in `config`); otherwise
/// [`Error::DiscoveryOff`](crate::Error::DiscoveryOff) says why it is off.
pub fn listen_remote(config: &crate::NodeConfig) -> Result<RemoteListener, crate::Error> {
    let config = config.clone().validated()?;
    let agent = crate::udp::discovery::agent(config.domain(), config.key(), config.discovery());
    if let (Some(why), true) = (&agent.multicast_error, agent.config().peers.is_empty()) {
        return Err(crate::Error::DiscoveryOff(why.clone()));
    }
    Ok(RemoteListener { agent })
}

/// Discovery listening in one domain (see [`listen_remote`]); it stops when dropped (unless
/// this process's nodes use the same discovery).
pub struct RemoteListener {
    agent: std::sync::Arc<crate::udp::discovery::Agent>,
}

impl RemoteListener {
    /// The endpoints other hosts announced so far (and not withdrawn or expired).
    pub fn endpoints(&self) -> Vec<RemoteEndpoint> {
        self.agent
            .remotes()
            .into_iter()
            .map(|r| RemoteEndpoint {
                publisher: r.role == crate::udp::discovery::Role::Publisher,
                topic: r.topic,
                addr: r.addr,
                reliable: r.reliable,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    /// Looking at, listing or cleaning by a name ferry would never make is refused, rather than
    /// matched against other names (a domain `x.y` once found domain `x`'s topic `y.t`).
    #[test]
    fn the_admin_calls_refuse_names_ferry_refuses() {
        for (d, t) in [
            ("", "t"),
            ("x.y", "t"),
            ("a/b", "t"),
            ("x", ""),
            ("x", "a b"),
        ] {
            let e = topic(d, t).unwrap_err();
            assert!(matches!(e, Error::InvalidName { .. }), "{d:?} {t:?}: {e}");
        }
        let long = "d".repeat(300);
        for d in ["", "x.y", long.as_str()] {
            assert!(
                matches!(list_topics(Some(d)), Err(Error::InvalidName { .. })),
                "{d:?}"
            );
            assert!(
                matches!(clean(Some(d)), Err(Error::InvalidName { .. })),
                "{d:?}"
            );
        }
        assert!(topic(&format!("u{}-admin", std::process::id()), "t")
            .unwrap()
            .is_none());
    }
}
