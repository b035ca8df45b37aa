//! Errors, one enum per kind of operation. Each message says what went wrong and what to do.

use std::time::Duration;

/// The most characters of a name that an error quotes.
const QUOTED: usize = 64;

/// A name as ferry's errors quote it: in quotes, escaped, and cut to its first 64 characters
/// (its length in bytes said) when it is longer, so that a long or hostile name cannot flood a
/// message or a log.
pub fn quoted_name(name: &str) -> String {
    match name.char_indices().nth(QUOTED) {
        None => format!("{name:?}"),
        Some((cut, _)) => format!("{:?}… ({} bytes)", &name[..cut], name.len()),
    }
}

/// Rewrites the API items ferry's messages name — a type, `::` and a name, as
/// `Qos::send_timeout` or `Node::server` — through `rename(type, name)`, for a front whose users
/// know them by other names (Python's `Qos(send_timeout=...)`, C's `ferry_qos.send_timeout_ns`);
/// an item it returns `None` for stays as it is.
pub fn rename_api_items(msg: &str, rename: impl Fn(&str, &str) -> Option<String>) -> String {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(at) = rest.find("::") {
        let (before, after) = (&rest[..at], &rest[at + 2..]);
        let ty_start = before.rfind(|c| !ident(c)).map_or(0, |i| i + 1);
        let ty = &before[ty_start..];
        let name_len = after.find(|c| !ident(c)).unwrap_or(after.len());
        let name = &after[..name_len];
        out.push_str(&before[..ty_start]);
        match rename(ty, name).filter(|_| !ty.is_empty() && !name.is_empty()) {
            Some(said) => {
                out.push_str(&said);
                rest = &after[name_len..];
            }
            None => {
                out.push_str(ty);
                out.push_str("::");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Errors from opening nodes, topics, publishers and subscribers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("invalid {what} name {}: {reason}", quoted_name(name))]
    InvalidName {
        what: &'static str,
        name: String,
        reason: &'static str,
    },
    #[error("invalid quality of service: {0}")]
    InvalidQos(String),
    /// A node's configuration (`NodeConfig`, or the `FERRY_*` variables it is read from).
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// A topic type that cannot be declared (`TopicType::new`).
    #[error("invalid topic type: {0}")]
    InvalidType(String),
    /// The topic already has another type than the one this end declares.
    #[error(
        "topic {topic} carries type {found}, but this {role} declares {declared}; declare the \
         same type (or none, to take the bytes as they are), or use another topic"
    )]
    TypeMismatch {
        topic: String,
        role: &'static str,
        found: String,
        declared: String,
    },
    #[error(
        "shared-memory segment {segment} is not a ferry segment (foreign magic {found:#018x}); \
         remove it if nothing else uses it, or pick another domain or topic"
    )]
    Foreign { segment: String, found: u64 },
    #[error(
        "shared-memory segment {segment} is truncated ({size} bytes, needs {expected}); \
         it is damaged: `ferry clean` removes stale segments"
    )]
    Truncated {
        segment: String,
        size: u64,
        expected: u64,
    },
    #[error(
        "shared-memory segment {segment} has layout version {found}, this ferry speaks {expected}; \
         run the same ferry version on both ends, or `ferry clean` when nothing uses it"
    )]
    Version {
        segment: String,
        found: u32,
        expected: u32,
    },
    #[error(
        "shared-memory segment {segment} belongs to user id {owner}, not to this process's user \
         (id {me}); ferry only uses segments of its own user. If it is stale, its owner or root \
         can remove /dev/shm/{segment}; otherwise use another domain or topic"
    )]
    NotOwner {
        segment: String,
        owner: u32,
        me: u32,
    },
    #[error(
        "shared-memory segment {segment} is {what}, not a regular file, and ferry does not \
         follow or use such names; remove /dev/shm/{segment} if you did not make it, or use \
         another domain or topic"
    )]
    NotAFile { segment: String, what: &'static str },
    #[error(
        "no room in /dev/shm for shared-memory segment {segment} of {bytes} bytes; free some \
         (`ferry clean` removes what dead processes left, `df /dev/shm` shows the space) or \
         give the publisher a smaller ring (Qos::ring_capacity, Qos::max_message_size)"
    )]
    NoSpace { segment: String, bytes: u64 },
    #[error(
        "the ring in shared-memory segment {segment} is {capacity} bytes, above this \
         subscriber's limit of {max} (Qos::max_ring_capacity); raise the limit if that \
         publisher is meant to have so large a ring"
    )]
    RingTooLarge {
        segment: String,
        capacity: u64,
        max: u64,
    },
    #[error("shared-memory segment {segment} is inconsistent: {detail}")]
    Layout { segment: String, detail: String },
    #[error("shared-memory segment {segment} is still being set up by process {pid}; try again")]
    Busy { segment: String, pid: u32 },
    #[error("topic {topic} has no free {what} slot ({max} in use); a topic carries at most {max}")]
    TooMany {
        topic: String,
        what: &'static str,
        max: usize,
    },
    #[error(
        "service {service} already has a server on this host: {holder}; a service has one \
         server (stop that one first)"
    )]
    ServiceTaken { service: String, holder: String },
    /// Discovery reaches no other host (neither `FERRY_PEERS` nor multicast discovery).
    #[error(
        "remote topics are not listed: discovery is {0} (set FERRY_PEERS, or \
         FERRY_DISCOVERY=multicast where the network carries multicast)"
    )]
    DiscoveryOff(String),
    #[error("transport {0} is not available in this build of ferry")]
    Unsupported(&'static str),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: impl Into<std::io::Error>) -> Error {
        Error::Io {
            context: context.into(),
            source: source.into(),
        }
    }
}

/// Errors from sending.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    #[error("message of {len} bytes exceeds this publisher's maximum of {max} bytes (raise Qos::max_message_size)")]
    TooLarge { len: usize, max: usize },
    #[error(
        "a reliable subscriber did not make room within {0:?}; it is alive but slow \
         (raise Qos::send_timeout, or use Delivery::Latest)"
    )]
    Timeout(Duration),
    #[error("a {len}-byte message is not a whole number of {size}-byte elements")]
    NotWholeElements { len: usize, size: usize },
    #[error(
        "a {len}-byte message exceeds the limit of {max} bytes of a reliable subscriber \
         ({subscriber}; its Qos::max_message_size), which would refuse it: raise that \
         subscriber's limit, or send smaller messages"
    )]
    SubscriberLimit {
        len: usize,
        max: usize,
        /// Which: its node on this host, or its address on another.
        subscriber: String,
    },
    #[error(
        "{receivers} reliable subscriber(s) had not taken the last {bytes} bytes sent within \
         {after:?}: slow, stalled or refusing them (`ferry stats` shows refusals and why)"
    )]
    Undelivered {
        receivers: usize,
        bytes: u64,
        after: Duration,
    },
    #[error(
        "a loan holds elements of 1 byte or more aligned to at most 8 bytes (a payload's \
         alignment); this element type has {size} bytes aligned to {align}"
    )]
    ElementType { size: usize, align: usize },
}

/// Errors from receiving.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecvError {
    #[error(
        "the ring of a publisher on {topic} holds a malformed record at position {pos}; \
         something other than a ferry publisher wrote to it. That publisher was dropped"
    )]
    Corrupt { topic: String, pos: u64 },
    /// An asynchronous receive could not wait (the system refused a descriptor or a thread).
    #[error("cannot wait for a message: {0}")]
    Wait(String),
}

/// A sample cannot be viewed as a slice of the requested element type.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum PodError {
    #[error("a {len}-byte payload is not a whole number of {size}-byte elements")]
    Length { len: usize, size: usize },
    #[error("payload is not aligned to {align} bytes for this element type")]
    Alignment { align: usize },
}

#[cfg(test)]
mod tests {
    #[test]
    fn api_items_are_renamed_and_the_rest_left_alone() {
        let upper = |ty: &str, name: &str| {
            (ty == "Qos").then(|| format!("qos.{}", name.to_ascii_uppercase()))
        };
        assert_eq!(
            super::rename_api_items("raise Qos::send_timeout, or Node::server", upper),
            "raise qos.SEND_TIMEOUT, or Node::server"
        );
        assert_eq!(
            super::rename_api_items("Qos:: a::b ::c Qos::x", upper),
            "Qos:: a::b ::c qos.X"
        );
    }

    #[test]
    fn a_long_name_is_quoted_cut_and_counted() {
        assert_eq!(super::quoted_name("a/b"), "\"a/b\"");
        let long = "é".repeat(10_000);
        let q = super::quoted_name(&long);
        assert_eq!(q, format!("{:?}… (20000 bytes)", "é".repeat(64)));
        assert_eq!(
            super::quoted_name(&"x".repeat(64)),
            format!("{:?}", "x".repeat(64))
        );
    }
}
