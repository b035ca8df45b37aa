//! How ferry topics and Zenoh key expressions map onto each other: topic `T` of domain `D` is
//! the key `ferry/D/T`. Every ferry topic name is a Zenoh key (its levels are never empty, as
//! Zenoh's chunks are not); a key under `ferry/D/` that is not a ferry topic name is refused.

use zenoh::key_expr::KeyExpr;

/// The first chunk of every key the bridge uses.
pub const ROOT: &str = "ferry";

/// Topic `topic` of `domain` as a Zenoh key, if it is one.
pub fn topic_key(domain: &str, topic: &str) -> Option<KeyExpr<'static>> {
    ferry::admin::validate_topic(topic).ok()?;
    // Exact names only: ferry topics never hold Zenoh's wildcards (`*`, `$`, `?`, `#`) nor an
    // empty chunk (`a//b`, which Zenoh would rewrite).
    KeyExpr::try_from(format!("{ROOT}/{domain}/{topic}")).ok()
}

/// The ferry topic a key of `domain` names, if it is one: the key without `ferry/<domain>/`,
/// and a valid ferry topic name.
pub fn key_topic<'k>(domain: &str, key: &'k str) -> Option<&'k str> {
    let rest = key.strip_prefix(ROOT)?.strip_prefix('/')?;
    let topic = rest.strip_prefix(domain)?.strip_prefix('/')?;
    ferry::admin::validate_topic(topic).ok()?;
    Some(topic)
}

/// The first chunk of the liveliness tokens by which bridges announce the topics they publish:
/// `ferry-topics/<zenoh id>/<domain>/<topic>`.
pub const ANNOUNCE_ROOT: &str = "ferry-topics";

/// The liveliness token of a bridge (Zenoh id `zid`) that publishes `topic` of `domain`.
pub fn announce_key(zid: &str, domain: &str, topic: &str) -> Option<KeyExpr<'static>> {
    ferry::admin::validate_topic(topic).ok()?;
    KeyExpr::try_from(format!("{ANNOUNCE_ROOT}/{zid}/{domain}/{topic}")).ok()
}

/// The bridge and the topic a liveliness token names: `(zid, topic)`.
pub fn announced<'k>(domain: &str, key: &'k str) -> Option<(&'k str, &'k str)> {
    let rest = key.strip_prefix(ANNOUNCE_ROOT)?.strip_prefix('/')?;
    let (zid, rest) = rest.split_once('/')?;
    let topic = rest.strip_prefix(domain)?.strip_prefix('/')?;
    ferry::admin::validate_topic(topic).ok()?;
    Some((zid, topic))
}

/// The key expression that selects the topics a pattern names: `ferry/<domain>/<pattern>`,
/// where the pattern is a Zenoh key expression over topic names (`*` one level, `**` any
/// number of levels). Canonised (`a/**/**` is `a/**`).
pub fn selector(domain: &str, pattern: &str) -> Result<KeyExpr<'static>, String> {
    if pattern.is_empty() {
        return Err("an empty topic pattern: use ** for every topic".into());
    }
    KeyExpr::autocanonize(format!("{ROOT}/{domain}/{pattern}")).map_err(|e| {
        format!(
            "invalid topic pattern {pattern:?}: {e} (a pattern is topic names with * for one \
             level and ** for any number of levels, such as sensors/** or */imu)"
        )
    })
}

/// True when topic `topic` of `domain` is one of `selectors`.
pub fn selected(selectors: &[KeyExpr<'static>], domain: &str, topic: &str) -> bool {
    topic_key(domain, topic).is_some_and(|key| selectors.iter().any(|s| s.intersects(&key)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_and_its_key_map_both_ways() {
        let key = topic_key("lab", "sensors/lidar.front").unwrap();
        assert_eq!(key.as_str(), "ferry/lab/sensors/lidar.front");
        assert_eq!(key_topic("lab", key.as_str()), Some("sensors/lidar.front"));
    }

    #[test]
    fn names_that_are_not_keys_are_not_bridged() {
        for topic in ["a//b", "/a", "a/", "", "bad name", "a*b"] {
            assert!(topic_key("d", topic).is_none(), "{topic:?}");
        }
    }

    #[test]
    fn keys_of_other_domains_and_bad_names_are_refused() {
        assert_eq!(key_topic("d", "ferry/e/t"), None);
        assert_eq!(key_topic("d", "ferry/dd/t"), None);
        assert_eq!(key_topic("d", "ferry/d"), None);
        assert_eq!(key_topic("d", "ferry/d/"), None);
        assert_eq!(key_topic("d", "other/d/t"), None);
        assert_eq!(key_topic("d", "ferryd/t"), None);
        assert_eq!(key_topic("d", "ferry/d/with space"), None);
        let long = format!("ferry/d/{}", "x".repeat(101));
        assert_eq!(key_topic("d", &long), None);
        assert_eq!(key_topic("d", "ferry/d/a/b"), Some("a/b"));
    }

    #[test]
    fn announcements_name_their_bridge_and_topic() {
        let key = announce_key("ab12", "lab", "robot/imu").unwrap();
        assert_eq!(key.as_str(), "ferry-topics/ab12/lab/robot/imu");
        assert_eq!(announced("lab", key.as_str()), Some(("ab12", "robot/imu")));
        assert_eq!(announced("lab2", key.as_str()), None);
        assert_eq!(announced("lab", "ferry-topics/ab12/lab/a b"), None);
        assert_eq!(announced("lab", "ferry-topics/ab12"), None);
        assert!(announce_key("ab12", "lab", "a//b").is_none());
    }

    #[test]
    fn patterns_select_topics_as_zenoh_wildcards_do() {
        let all = [selector("d", "**").unwrap()];
        assert!(selected(&all, "d", "a"));
        assert!(selected(&all, "d", "a/b/c"));
        let sensors = [selector("d", "sensors/*").unwrap()];
        assert!(selected(&sensors, "d", "sensors/imu"));
        assert!(!selected(&sensors, "d", "sensors/imu/raw"));
        assert!(!selected(&sensors, "d", "actuators/arm"));
        let two = [
            selector("d", "a/**").unwrap(),
            selector("d", "*/imu").unwrap(),
        ];
        assert!(selected(&two, "d", "a/x/y"));
        assert!(selected(&two, "d", "b/imu"));
        assert!(!selected(&two, "d", "b/gps"));
        assert!(selector("d", "").is_err());
        assert!(selector("d", "a/?/b").is_err());
        assert_eq!(selector("d", "a/**/**").unwrap().as_str(), "ferry/d/a/**");
    }
}
