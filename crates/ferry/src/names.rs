//! What names ferry takes for topics and domains: checked wherever a name comes in (the API,
//! the command line, shared memory, discovery datagrams), in one place below all of them.

use crate::error::Error;

/// The longest topic name (bytes).
pub const MAX_TOPIC: usize = 100;
/// The longest domain name (bytes).
pub const MAX_DOMAIN: usize = 32;

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

#[cfg(test)]
mod tests {
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
