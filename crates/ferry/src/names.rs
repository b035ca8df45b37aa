//! What names ferry takes for topics and domains: checked wherever a name comes in (the API,
//! the command line, shared memory, discovery datagrams), in one place below all of them.

use crate::error::Error;

/// The longest topic name (bytes).
pub const MAX_TOPIC: usize = 100;
/// The longest domain name (bytes).
pub const MAX_DOMAIN: usize = 32;

/// Checks a topic name: 1–100 characters of `A-Z a-z 0-9 _ - . /`.
pub fn validate_topic(topic: &str) -> Result<(), Error> {
    let bad = |reason| {
        Err(Error::InvalidName {
            what: "topic",
            name: topic.to_owned(),
            reason,
        })
    };
    if topic.is_empty() || topic.len() > MAX_TOPIC {
        return bad("must be 1 to 100 characters");
    }
    if !topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"_-./".contains(&b))
    {
        return bad("may hold only letters, digits and _ - . /");
    }
    Ok(())
}

/// Checks a domain name: 1–32 characters of `A-Z a-z 0-9 _ -`.
pub fn validate_domain(domain: &str) -> Result<(), Error> {
    if domain.is_empty()
        || domain.len() > MAX_DOMAIN
        || !domain
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(Error::InvalidName {
            what: "domain",
            name: domain.to_owned(),
            reason: "must be 1 to 32 characters of letters, digits, _ and -",
        });
    }
    Ok(())
}
