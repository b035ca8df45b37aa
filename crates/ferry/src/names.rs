//! What names ferry takes for topics and domains: checked wherever a name comes in (the API,
//! the command line, shared memory, discovery datagrams), in one place below all of them.

use crate::error::Error;

/// The longest topic name (bytes).
pub const MAX_TOPIC: usize = 100;
/// The longest domain name (bytes).
pub const MAX_DOMAIN: usize = 32;

/// Checks a topic name: 1–100 characters of `A-Z a-z 0-9 _ - . /`, its levels (the parts
/// between `/`) never empty: `a//b`, `/a` and `a/` are refused rather than taken for topics
/// other than `a/b` and `a` (a typo that would never meet its other end; nor could a Zenoh key
/// name it).
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
    if topic.starts_with('/') || topic.ends_with('/') || topic.contains("//") {
        return bad("has an empty level: no '/' at either end and no '//' (write a/b, not /a/b)");
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
    use super::*;

    #[test]
    fn a_topic_name_has_no_empty_level() {
        for good in ["a", "a/b", "a.b/c-d_e", "a/./b", &"t".repeat(MAX_TOPIC)] {
            assert!(validate_topic(good).is_ok(), "{good:?}");
        }
        for bad in ["/a", "a/", "a//b", "/", "//", "a/b/", "/a/b"] {
            let e = validate_topic(bad).unwrap_err().to_string();
            assert!(e.contains("empty level"), "{bad:?}: {e}");
        }
        for bad in ["", "a b", "a+b", &"t".repeat(MAX_TOPIC + 1)] {
            assert!(validate_topic(bad).is_err(), "{bad:?}");
        }
    }
}
