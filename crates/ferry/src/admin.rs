//! Looking at and tidying live topics: what `ferry topics`, `ferry stats` and `ferry clean` use.

pub use crate::shm::topic::{
    clean, list_topics, CleanReport, PublisherInfo, SubscriberInfo, TopicEntry, TopicSnapshot,
};

/// A snapshot of one topic, if it exists.
pub fn topic(domain: &str, topic: &str) -> Result<Option<TopicSnapshot>, crate::Error> {
    Ok(crate::shm::topic::Topic::open_existing(domain, topic)?.map(|t| t.snapshot()))
}
