//! Looking at and tidying live topics: what `ferry topics`, `ferry stats` and `ferry clean` use.

pub use crate::shm::topic::{
    clean, clean_forced, list_topics, validate_domain, validate_topic, CleanReport, CongestionInfo,
    PublisherInfo, SubscriberInfo, TopicEntry, TopicSnapshot,
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

/// A UDP endpoint announced by another host.
#[derive(Debug, Clone)]
pub struct RemoteEndpoint {
    pub publisher: bool,
    pub topic: String,
    pub addr: std::net::SocketAddr,
    pub reliable: bool,
}

/// Listens to discovery in the domain of `config`, with its key and discovery settings, for
/// `listen` and returns what other hosts announced. Needs discovery switched on
/// (`FERRY_DISCOVERY=multicast` or `FERRY_PEERS`, or the same in `config`); otherwise returns
/// the reason it is off.
pub fn remote_endpoints(
    config: &crate::NodeConfig,
    listen: std::time::Duration,
) -> Result<Vec<RemoteEndpoint>, String> {
    let config = config.clone().validated().map_err(|e| e.to_string())?;
    let agent = crate::udp::discovery::agent(config.domain(), config.key(), config.discovery());
    if let (Some(why), false) = (&agent.multicast_error, !agent.config().peers.is_empty()) {
        return Err(format!("remote topics are not listed: discovery is {why}"));
    }
    std::thread::sleep(listen);
    Ok(agent
        .remotes()
        .into_iter()
        .map(|r| RemoteEndpoint {
            publisher: r.role == crate::udp::discovery::Role::Publisher,
            topic: r.topic,
            addr: r.addr,
            reliable: r.reliable,
        })
        .collect())
}
