//! Finding UDP endpoints on other hosts.
//!
//! Each process runs one agent per domain (a thread, started with the first UDP endpoint). Every
//! half second, and at once when an endpoint comes or goes, it announces the process's UDP
//! publishers and subscribers on port `FERRY_DISCOVERY_PORT` (7650): by unicast to every host of
//! `FERRY_PEERS` (`ip[:port],...`), and, when `FERRY_DISCOVERY=multicast`, by multicast to
//! `FERRY_DISCOVERY_GROUP` (239.255.70.70) on the interface whose IPv4 address is
//! `FERRY_DISCOVERY_IFACE` (default: the kernel's choice). Multicast is opt-in so that ferry never
//! sends to a network nobody asked it to use. It learns the others' announcements; an
//! endpoint's address is the announcement's source address with the announced port. Entries not
//! heard for two seconds expire. Endpoints of this host find each other through the topic's
//! shared-memory directory instead; announcements from this host are ignored. The settings are
//! the node's ([`DiscoveryConfig`] in its `NodeConfig`, from those variables unless the program
//! sets them); nodes of a domain with the same key and settings share one agent.
//!
//! Unicast (`FERRY_PEERS` without multicast) reaches one socket per host and port, so one agent
//! per host (network namespace) is its **relay**: the first to bind the discovery port, which it
//! binds alone. Every other agent binds a port of its own, sends its announcements from it,
//! registers there with the relay every period (a REGISTER to 127.0.0.1), and gets every
//! announcement the relay receives forwarded (RELAY, with the original source). When the relay's
//! process ends, the next agent to find the port free takes over.
//!
//! Every datagram may be hostile (an off-path sender can put any source address on UDP), so
//! what is heard is restricted ([`DiscoveryConfig::allows_source`]): with `FERRY_PEERS` set, its
//! addresses are the only sources of announcements heard, whether they come straight or through
//! the relay, and whether multicast is on or not (ferry does not read a datagram's destination,
//! so it cannot tell multicast from unicast; with both set, multicast reaches the listed hosts
//! only). A relay message is taken only from this host's relay (loopback, the discovery port), a
//! registration only from loopback and only by a relay. Multicast without `FERRY_PEERS` hears
//! any source that reaches the group: nothing authenticates an announcement yet (that is the
//! opt-in domain key's job, a later feature). What is refused is counted ([`Agent::refusals`]).
//!
//! Every table is bounded ([`DiscoveryLimits`]): a source address at its bound makes room by
//! dropping its entry seen longest ago; with the whole table full, the source holding the most
//! entries gives one up, so a flood from a few addresses cannot keep other hosts out; the relay
//! refuses new registrations while it serves as many agents as it may. Nothing waits; what goes
//! over a bound is counted.
//!
//! ```text
//! 0 u16 magic 0x4446 ("FD")  2 u8 version  3 u8 kind (1 announce, 2 register, 3 relay)
//! announce: 4 u32 entries  8 u64 host id  16 u16 domain length, domain
//!   entry: u8 role (1 publisher, 2 subscriber)  u8 flags (1 reliable)  u16 port  u64 id
//!          u32 largest message a subscriber takes (0: a publisher, or no limit said)
//!          u16 topic length, topic
//! register: nothing more
//! relay: 4 u8[16] source IPv6 (IPv4-mapped)  20 u16 source port  22 the announcement
//! ```
//!
//! Every datagram is decoded by [`decode_message`], a pure function that checks every length
//! and value: names are valid ferry topic and domain names (at most [`MAX_NAME`] bytes), ports
//! are not 0, an announcement holds at most [`MAX_ENTRIES`] entries and at most
//! [`MAX_ANNOUNCE`] bytes, and its entry count matches the entries present, with nothing after
//! them. Flag bits other than "reliable" are ignored (reserved).

mod agent;
mod codec;
mod config;
mod remotes;

pub use self::agent::{agent, Agent, DiscoveryRefusals};
pub use self::codec::{Entry, Role};
pub(crate) use self::config::{check_peer, config_from_vars};
pub use self::config::{DiscoveryConfig, DiscoveryLimits};
// What ferry's own tests and fuzz targets reach (the `internals` feature).
#[cfg(any(test, feature = "internals"))]
pub use self::{
    codec::{
        decode_message, Announcement, DiscoveryError, Message, Refusal, MAX_ANNOUNCE, MAX_ENTRIES,
        MAX_NAME,
    },
    config::{DEFAULT_GROUP, DEFAULT_PORT},
    remotes::Remote,
};

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    use std::time::{Duration, Instant};

    use crate::sys::host_id;

    use super::agent::*;
    use super::codec::*;
    use super::config::*;
    use super::remotes::*;
    use proptest::prelude::*;

    /// A configuration from `vars` alone (the environment is not read; `crate::config` tests
    /// the parsing).
    fn config(vars: &[(&str, &str)]) -> DiscoveryConfig {
        let mut problems = Vec::new();
        let c = config_from_vars(
            &|name| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
            },
            &mut problems,
        );
        assert!(problems.is_empty(), "{problems:?}");
        c
    }

    fn entry(role: Role, topic: &str, port: u16, id: u64) -> Entry {
        Entry {
            role,
            topic: topic.into(),
            port,
            id,
            reliable: role == Role::Subscriber,
            max_message: if role == Role::Subscriber { 1 << 20 } else { 0 },
            type_hash: if role == Role::Subscriber {
                0
            } else {
                0x1234_5678_9abc_def0
            },
        }
    }

    /// An announcement's bytes with every field as given, valid or not.
    fn raw_announcement(count: u32, domain: &[u8], entries: &[(u8, u16, &[u8])]) -> Vec<u8> {
        let mut b = vec![0x46, 0x44, VERSION, KIND_ANNOUNCE];
        b.extend_from_slice(&count.to_le_bytes());
        b.extend_from_slice(&7u64.to_le_bytes());
        b.extend_from_slice(&(domain.len() as u16).to_le_bytes());
        b.extend_from_slice(domain);
        for (role, port, topic) in entries {
            b.extend_from_slice(&[*role, 1]);
            b.extend_from_slice(&port.to_le_bytes());
            b.extend_from_slice(&9u64.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
            b.extend_from_slice(&0u64.to_le_bytes());
            b.extend_from_slice(&(topic.len() as u16).to_le_bytes());
            b.extend_from_slice(topic);
        }
        b
    }

    /// What every decoded message must respect.
    fn assert_within_bounds(m: &Message) {
        let a = match m {
            Message::Register => return,
            Message::Announce(a) => a,
            Message::Relay {
                source,
                announcement,
            } => {
                assert_ne!(source.port(), 0);
                assert!(!source.ip().is_unspecified() && !source.ip().is_multicast());
                assert_ne!(source.ip(), IpAddr::V4(Ipv4Addr::BROADCAST));
                announcement
            }
        };
        assert!(crate::names::validate_domain(&a.domain).is_ok());
        assert!(a.entries.len() <= MAX_ENTRIES);
        for e in &a.entries {
            assert_ne!(e.port, 0);
            assert!(!e.topic.is_empty() && e.topic.len() <= MAX_NAME);
            assert!(crate::names::validate_topic(&e.topic).is_ok());
        }
    }

    fn arb_entry() -> impl Strategy<Value = Entry> {
        (
            any::<bool>(),
            "[A-Za-z0-9_.-]{1,12}(/[A-Za-z0-9_.-]{1,12}){0,2}",
            1u16..,
            any::<u64>(),
            any::<bool>(),
            any::<u32>(),
            any::<u64>(),
        )
            .prop_map(
                |(publisher, topic, port, id, reliable, max_message, type_hash)| Entry {
                    role: if publisher {
                        Role::Publisher
                    } else {
                        Role::Subscriber
                    },
                    topic,
                    port,
                    id,
                    reliable,
                    max_message,
                    type_hash,
                },
            )
    }

    /// A valid message: an announcement (of at most 20 entries of at most 54 bytes, so within
    /// every bound), a relay of one, or a registration.
    fn arb_message() -> impl Strategy<Value = Message> {
        let announcement = || {
            (
                any::<u64>(),
                "[A-Za-z0-9_-]{1,32}",
                proptest::collection::vec(arb_entry(), 0..20),
            )
                .prop_map(|(host, domain, entries)| Announcement {
                    host,
                    domain,
                    entries,
                })
        };
        prop_oneof![
            announcement().prop_map(Message::Announce),
            (any::<[u8; 4]>(), 1u16.., announcement()).prop_map(|(ip, port, announcement)| {
                let ip = Ipv4Addr::from(ip);
                let ip = if ip.is_unspecified() || ip.is_multicast() || ip.is_broadcast() {
                    Ipv4Addr::new(10, 0, 0, 2)
                } else {
                    ip
                };
                Message::Relay {
                    source: SocketAddr::new(ip.into(), port),
                    announcement,
                }
            }),
            Just(Message::Register),
        ]
    }

    /// Changes `b` by `op`: overwrite a byte, a u16 or a u32 anywhere; cut; insert a byte; or
    /// overwrite the entry count or the domain length (relative to the announcement's start).
    fn mutate(b: &mut Vec<u8>, (op, at, value): (u8, usize, u32), base: usize) {
        let len = b.len().max(1);
        let put = |b: &mut Vec<u8>, at: usize, bytes: &[u8]| {
            for (i, x) in bytes.iter().enumerate() {
                if let Some(slot) = b.get_mut(at + i) {
                    *slot = *x;
                }
            }
        };
        match op % 7 {
            0 => put(b, at % len, &[value as u8]),
            1 => put(b, at % len, &(value as u16).to_le_bytes()),
            2 => put(b, at % len, &value.to_le_bytes()),
            3 => b.truncate(at % (b.len() + 1)),
            4 => b.insert(at % (b.len() + 1), value as u8),
            5 => put(b, base + 4, &value.to_le_bytes()),
            _ => put(b, base + 16, &(value as u16).to_le_bytes()),
        }
    }

    /// Arbitrary bytes (0..600), bytes after a valid header, and valid messages mutated.
    fn arb_datagram() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..600),
            (0u8..5, proptest::collection::vec(any::<u8>(), 0..600)).prop_map(|(kind, tail)| {
                let mut b = vec![0x46, 0x44, VERSION, kind];
                b.extend_from_slice(&tail);
                b
            }),
            (
                arb_message(),
                proptest::collection::vec((any::<u8>(), any::<usize>(), any::<u32>()), 1..6)
            )
                .prop_map(|(m, ops)| {
                    let base = if matches!(m, Message::Relay { .. }) {
                        RELAY_HEADER
                    } else {
                        0
                    };
                    let mut b = m.encode();
                    for op in ops {
                        mutate(&mut b, op, base);
                    }
                    b
                }),
        ]
    }

    proptest! {
        /// Any datagram at all: decoding returns a message or an error, never panics (tests run
        /// with overflow checks), and whatever it returns respects every bound.
        #[test]
        fn decode_never_panics(bytes in arb_datagram()) {
            if let Ok(m) = decode_message(&bytes) {
                assert_within_bounds(&m);
                prop_assert_eq!(decode_message(&m.encode()), Ok(m));
            }
        }

        /// Every valid message decodes to itself.
        #[test]
        fn valid_messages_round_trip(m in arb_message()) {
            prop_assert_eq!(decode_message(&m.encode()), Ok(m));
        }
    }

    #[test]
    fn the_fuzzers_seeds_are_valid_messages() {
        // Fuzzing starts from these: they must speak today's version, or it explores refusals.
        let seeds: [&[u8]; 5] = [
            include_bytes!("../../../../../fuzz/corpus/discovery/seed-announce"),
            include_bytes!("../../../../../fuzz/corpus/discovery/seed-announce-empty"),
            include_bytes!("../../../../../fuzz/corpus/discovery/seed-register"),
            include_bytes!("../../../../../fuzz/corpus/discovery/seed-relay-v4"),
            include_bytes!("../../../../../fuzz/corpus/discovery/seed-relay-v6"),
        ];
        for (i, seed) in seeds.iter().enumerate() {
            assert!(
                decode_message(seed).is_ok(),
                "seed {i}: {:?}",
                decode_message(seed)
            );
        }
    }

    #[test]
    fn announcements_round_trip_and_garbage_is_refused() {
        let a = Agent::with("dtest", DiscoveryConfig::default());
        let entries = vec![
            entry(Role::Publisher, "a/b", 9, 1),
            entry(Role::Subscriber, "c", 10, 2),
        ];
        let b = a.encode(&entries);
        let want = Announcement {
            host: a.host,
            domain: "dtest".into(),
            entries,
        };
        assert_eq!(decode_message(&b), Ok(Message::Announce(want.clone())));
        for cut in 0..b.len() {
            assert!(decode_message(&b[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = b.clone();
        long.push(0);
        assert_eq!(decode_message(&long), Err(DiscoveryError::Trailing(1)));
        let count = |n: u32| {
            let mut evil = b.clone();
            evil[4..8].copy_from_slice(&n.to_le_bytes());
            decode_message(&evil)
        };
        assert_eq!(
            count(u32::MAX),
            Err(DiscoveryError::TooManyEntries(u32::MAX))
        );
        assert_eq!(
            count(MAX_ENTRIES as u32 + 1).unwrap_err().refusal(),
            Refusal::OverLimit
        );
        assert_eq!(
            count(3),
            Err(DiscoveryError::Truncated("entries")),
            "a count the bytes cannot hold is refused before any entry is read"
        );
        assert_eq!(count(1), Err(DiscoveryError::Trailing(ENTRY_FIXED + 1)));
        let mut lying = b.clone();
        lying[4..8].copy_from_slice(&3u32.to_le_bytes());
        let second = b.len() - ENTRY_FIXED - 1;
        lying[second] = 9;
        assert_eq!(
            decode_message(&lying),
            Err(DiscoveryError::Truncated("entries")),
            "the count is checked before the first entry is read"
        );
        let relay = relay_datagram("10.0.0.2:7650".parse().unwrap(), &b);
        assert_eq!(
            decode_message(&relay),
            Ok(Message::Relay {
                source: "10.0.0.2:7650".parse().unwrap(),
                announcement: want,
            })
        );
        assert_eq!(decode_message(&register_datagram()), Ok(Message::Register));
        assert_eq!(
            decode_message(&[0x46, 0x44, VERSION, KIND_REGISTER, 0]),
            Err(DiscoveryError::Trailing(1))
        );
        assert_eq!(decode_message(b"FERRY"), Err(DiscoveryError::NotDiscovery));
        assert_eq!(
            decode_message(&[0x46, 0x44, 1, 1]),
            Err(DiscoveryError::Version(1)),
            "the version before subscribers said their limit"
        );
        assert_eq!(
            decode_message(&[0x46, 0x44, 2, 1]),
            Err(DiscoveryError::Version(2)),
            "the version before entries carried their type"
        );
        assert_eq!(
            decode_message(&[0x46, 0x44, 4, 1]),
            Err(DiscoveryError::Version(4))
        );
        assert_eq!(
            decode_message(&[0x46, 0x44, VERSION, 9]),
            Err(DiscoveryError::Kind(9))
        );
    }

    #[test]
    fn names_ports_roles_and_sizes_are_checked() {
        let ok = raw_announcement(1, b"d", &[(2, 4000, b"t")]);
        assert!(decode_message(&ok).is_ok());
        let cases: Vec<(Vec<u8>, DiscoveryError)> = vec![
            (
                raw_announcement(1, b"d", &[(2, 4000, b"\xff\xfe")]),
                DiscoveryError::BadName("topic"),
            ),
            (
                raw_announcement(1, b"d", &[(2, 4000, b"\x1b[2J")]),
                DiscoveryError::BadName("topic"),
            ),
            (
                raw_announcement(1, b"d", &[(2, 4000, b"")]),
                DiscoveryError::Truncated("entries"),
            ),
            (
                raw_announcement(1, b"d", &[(2, 4000, &[b'a'; MAX_NAME + 1])]),
                DiscoveryError::NameTooLong {
                    what: "topic",
                    len: MAX_NAME + 1,
                },
            ),
            (
                raw_announcement(0, &[b'd'; MAX_NAME + 1], &[]),
                DiscoveryError::NameTooLong {
                    what: "domain",
                    len: MAX_NAME + 1,
                },
            ),
            (
                raw_announcement(0, b"a.b", &[]),
                DiscoveryError::BadName("domain"),
            ),
            (
                raw_announcement(1, b"d", &[(2, 0, b"t")]),
                DiscoveryError::ZeroPort,
            ),
            (
                raw_announcement(1, b"d", &[(3, 4000, b"t")]),
                DiscoveryError::Role(3),
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(decode_message(&bytes), Err(want.clone()));
            assert_eq!(want.refusal(), Refusal::Malformed);
        }
        // A topic of length 0 among longer ones: refused as a name.
        let zero = raw_announcement(2, b"d", &[(2, 4000, b""), (2, 4001, b"long-topic")]);
        assert_eq!(decode_message(&zero), Err(DiscoveryError::BadName("topic")));
        // Longer than the relay can forward whole: refused as over the limit.
        let topic = [b'a'; 100];
        let many: Vec<(u8, u16, &[u8])> = (0..18).map(|_| (2u8, 4000u16, &topic[..])).collect();
        let big = raw_announcement(18, b"d", &many);
        assert!(big.len() > MAX_ANNOUNCE);
        assert_eq!(
            decode_message(&big),
            Err(DiscoveryError::TooLong(big.len()))
        );
        assert_eq!(DiscoveryError::TooLong(0).refusal(), Refusal::OverLimit);
        // A relayed source no host sends from.
        for src in [
            "0.0.0.0:1",
            "10.0.0.2:0",
            "255.255.255.255:1",
            "239.1.1.1:1",
        ] {
            let src: SocketAddr = src.parse().unwrap();
            assert_eq!(
                decode_message(&relay_datagram(src, &ok)),
                Err(DiscoveryError::BadSource(src))
            );
        }
    }

    #[test]
    fn the_sender_splits_announcements_within_the_bounds() {
        let a = Agent::with("dsplit", DiscoveryConfig::default());
        // Many of the smallest entries: the entry cap splits them; many of the largest: the size.
        for topic in ["t".to_owned(), "t".repeat(100)] {
            let entries: Vec<Entry> = (0..500)
                .map(|i| entry(Role::Subscriber, &topic, 1000, i))
                .collect();
            let mut decoded = 0;
            for chunk in a.chunks(&entries) {
                let b = a.encode(chunk);
                assert!(b.len() <= MAX_ANNOUNCE, "{} bytes", b.len());
                let Ok(Message::Announce(got)) = decode_message(&b) else {
                    panic!("a datagram of ours does not decode");
                };
                decoded += got.entries.len();
            }
            assert_eq!(decoded, entries.len());
        }
    }

    /// An agent without sockets, fed datagrams by hand.
    fn detached(domain: &str, config: DiscoveryConfig, unicast: bool) -> Agent {
        Agent::from_parts(domain, config, None, None, unicast, None)
    }

    /// An announcement of `entries` by another host.
    fn from_elsewhere(domain: &str, entries: &[Entry]) -> Vec<u8> {
        encode_announcement(host_id() ^ 1, domain, entries)
    }

    fn addr(a: &str) -> SocketAddr {
        a.parse().unwrap()
    }

    fn refusals(malformed: u64, not_allowed: u64, over_limit: u64) -> DiscoveryRefusals {
        DiscoveryRefusals {
            malformed,
            not_allowed,
            over_limit,
            unauthenticated: 0,
        }
    }

    #[test]
    fn with_peers_only_their_addresses_are_heard() {
        let a = detached("dallow", config(&[("FERRY_PEERS", "10.0.0.2")]), true);
        let b = from_elsewhere("dallow", &[entry(Role::Subscriber, "t", 4000, 1)]);
        assert_eq!(a.port_in(addr("10.0.0.3:7650"), &b), None, "not relayed");
        assert!(
            a.remotes().is_empty(),
            "an announcement from outside FERRY_PEERS is not learned"
        );
        assert_eq!(a.refusals(), refusals(0, 1, 0));
        // A peer's, from any port of its address (IPv4-mapped too), is learned and relayed.
        let relayed = a.port_in(addr("10.0.0.2:41000"), &b).expect("relayed");
        let Ok(Message::Relay { source, .. }) = decode_message(&relayed) else {
            panic!("not a relay message");
        };
        assert_eq!(source, addr("10.0.0.2:41000"));
        assert_eq!(a.remote_subscribers("t")[0].addr, addr("10.0.0.2:4000"));
        assert!(a.port_in(addr("[::ffff:10.0.0.2]:41000"), &b).is_some());
        assert_eq!(a.refusals().total(), 1);
    }

    #[test]
    #[cfg(feature = "domain-key")]
    fn with_a_domain_key_only_sealed_announcements_are_heard_and_relayed_sealed() {
        use crate::udp::crypto::{DomainKey, Sealer};
        let key = DomainKey::from_bytes([7; 32]);
        let c = config(&[("FERRY_PEERS", "10.0.0.2")]);
        let mut a = detached("dkey", c.clone(), true);
        a.set_key(&key);
        let plain = from_elsewhere("dkey", &[entry(Role::Subscriber, "t", 4000, 1)]);
        let seal = |k: &DomainKey, b: &[u8]| {
            let mut out = Vec::new();
            Sealer::new(k).unwrap().seal_into(b, &mut out);
            out
        };
        // In the clear, or sealed with another key: refused, nothing learned.
        assert_eq!(a.port_in(addr("10.0.0.2:41000"), &plain), None);
        let other = seal(&DomainKey::from_bytes([8; 32]), &plain);
        assert_eq!(a.port_in(addr("10.0.0.2:41000"), &other), None);
        assert!(a.remotes().is_empty());
        assert_eq!(a.refusals().unauthenticated, 2);
        // Sealed with the domain key: learned, and relayed as it came.
        let sealed = seal(&key, &plain);
        let relayed = a.port_in(addr("10.0.0.2:41000"), &sealed).expect("relayed");
        assert_eq!(a.remote_subscribers("t")[0].addr, addr("10.0.0.2:4000"));
        assert_eq!(&relayed[RELAY_HEADER..], &sealed[..]);
        // A replay of it is refused.
        assert_eq!(a.port_in(addr("10.0.0.2:41000"), &sealed), None);
        assert_eq!(a.refusals().unauthenticated, 3);
        // Another agent of the host opens the relayed copy itself.
        let mut b = detached("dkey", c.clone(), true);
        b.set_key(&key);
        b.private_in(SocketAddr::new(addr("127.0.0.1:1").ip(), c.port), &relayed);
        assert_eq!(b.remote_subscribers("t").len(), 1);
        // A relayed announcement in the clear is refused.
        let clear = relay_datagram(addr("10.0.0.2:41000"), &plain);
        let mut d = detached("dkey", c.clone(), true);
        d.set_key(&key);
        d.private_in(SocketAddr::new(addr("127.0.0.1:1").ip(), c.port), &clear);
        assert!(d.remotes().is_empty());
        assert_eq!(d.refusals().unauthenticated, 1);
    }

    #[test]
    fn relay_messages_are_taken_only_from_this_hosts_relay() {
        let c = config(&[("FERRY_PEERS", "10.0.0.2")]);
        let a = detached("drel", c.clone(), true);
        let ann = from_elsewhere("drel", &[entry(Role::Subscriber, "t", 4000, 1)]);
        let good = relay_datagram(addr("10.0.0.2:41000"), &ann);
        // Not from the relay: another port of loopback, or a peer at the discovery port.
        a.private_in(addr("127.0.0.1:7651"), &good);
        a.private_in(SocketAddr::new(addr("10.0.0.2:1").ip(), c.port), &good);
        // From the relay, but relaying a source outside FERRY_PEERS.
        let forged = relay_datagram(addr("10.0.0.3:41000"), &ann);
        a.private_in(addr("127.0.0.1:7650"), &forged);
        // An announcement straight to an agent's own port (peers announce to the relay).
        a.private_in(addr("10.0.0.2:7650"), &ann);
        assert!(a.remotes().is_empty());
        assert_eq!(a.refusals(), refusals(0, 4, 0));
        a.private_in(addr("127.0.0.1:7650"), &good);
        assert_eq!(a.remote_subscribers("t")[0].addr, addr("10.0.0.2:4000"));
        assert_eq!(a.refusals(), refusals(0, 4, 0));
    }

    #[test]
    fn registrations_are_taken_only_from_this_host_and_only_by_a_relay() {
        let a = detached("dreg", config(&[("FERRY_PEERS", "10.0.0.2")]), true);
        let registered = |a: &Agent| {
            let regs = a.registered.lock().unwrap();
            regs.keys().copied().collect::<Vec<_>>()
        };
        assert_eq!(a.port_in(addr("10.0.0.2:5000"), &register_datagram()), None);
        assert!(registered(&a).is_empty(), "another host cannot register");
        a.port_in(addr("127.0.0.1:5000"), &register_datagram());
        assert_eq!(registered(&a), [addr("127.0.0.1:5000")]);
        // Relay messages come from the relay: one sent to the discovery port is refused.
        let ann = from_elsewhere("dreg", &[entry(Role::Subscriber, "t", 4000, 1)]);
        a.port_in(
            addr("127.0.0.1:7650"),
            &relay_datagram(addr("10.0.0.2:1"), &ann),
        );
        assert!(a.remotes().is_empty());
        assert_eq!(a.refusals(), refusals(0, 2, 0));
        // Under multicast nobody relays, so nobody registers.
        let m = detached("dreg", config(&[("FERRY_DISCOVERY", "multicast")]), false);
        m.port_in(addr("127.0.0.1:5000"), &register_datagram());
        assert!(registered(&m).is_empty());
        assert_eq!(m.refusals(), refusals(0, 1, 0));
    }

    #[test]
    fn multicast_alone_hears_any_source_and_with_peers_keeps_their_allowlist() {
        let b = from_elsewhere("dmc", &[entry(Role::Subscriber, "t", 4000, 1)]);
        let open = detached("dmc", config(&[("FERRY_DISCOVERY", "multicast")]), false);
        assert_eq!(
            open.port_in(addr("192.0.2.7:7650"), &b),
            None,
            "multicast relays nothing"
        );
        assert_eq!(open.remote_subscribers("t")[0].addr, addr("192.0.2.7:4000"));
        let both = detached(
            "dmc",
            config(&[
                ("FERRY_DISCOVERY", "multicast"),
                ("FERRY_PEERS", "10.0.0.2"),
            ]),
            false,
        );
        both.port_in(addr("192.0.2.7:7650"), &b);
        assert!(both.remotes().is_empty());
        assert_eq!(both.refusals(), refusals(0, 1, 0));
        both.port_in(addr("10.0.0.2:7650"), &b);
        assert_eq!(both.remote_subscribers("t")[0].addr, addr("10.0.0.2:4000"));
    }

    #[test]
    fn refusals_are_counted_by_reason() {
        let a = detached("dcount", config(&[("FERRY_PEERS", "10.0.0.2")]), true);
        let peer = addr("10.0.0.2:7650");
        let b = from_elsewhere("dcount", &[entry(Role::Subscriber, "t", 4000, 1)]);
        assert_eq!(a.refusals(), DiscoveryRefusals::default());
        a.port_in(peer, b"junk");
        a.port_in(peer, &b[..b.len() - 1]);
        a.private_in(addr("127.0.0.1:7650"), b"junk");
        let mut over = b.clone();
        over[4..8].copy_from_slice(&(MAX_ENTRIES as u32 + 1).to_le_bytes());
        assert_eq!(
            a.port_in(peer, &over),
            None,
            "what is refused is not relayed"
        );
        a.port_in(addr("10.0.0.3:7650"), &b);
        assert!(a.remotes().is_empty());
        let r = a.refusals();
        assert_eq!(r, refusals(3, 1, 1));
        assert_eq!(r.total(), 5);
    }

    fn announce_from(a: &Agent, src: &str, host: u64, ids: std::ops::Range<u64>) {
        let entries: Vec<Entry> = ids
            .map(|id| entry(Role::Subscriber, "t", 4000, id))
            .collect();
        for chunk in a.chunks(&entries) {
            a.port_in(addr(src), &encode_announcement(host, &a.domain, chunk));
        }
    }

    fn held_by(a: &Agent, ip: &str) -> usize {
        let ip: IpAddr = ip.parse().unwrap();
        a.remotes().iter().filter(|r| r.addr.ip() == ip).count()
    }

    #[test]
    fn one_source_cannot_crowd_out_the_others() {
        let a = detached(
            "dcrowd",
            config(&[("FERRY_PEERS", "10.0.0.2,10.0.0.3")]),
            true,
        );
        let limits = DiscoveryLimits::default();
        announce_from(&a, "10.0.0.2:7650", 1, 0..10);
        // A forger with a peer's address: 2000 endpoints under many host ids.
        for round in 0..20 {
            announce_from(&a, "10.0.0.3:7650", 100 + round, 0..100);
        }
        assert_eq!(
            held_by(&a, "10.0.0.2"),
            10,
            "the genuine peer keeps its entries"
        );
        assert_eq!(held_by(&a, "10.0.0.3"), limits.max_per_source);
        assert!(
            a.remotes().iter().any(|r| r.host == 119),
            "the newest entries are kept, the oldest made room"
        );
        assert!(a.refusals().over_limit > 0);
        assert_eq!(a.refusals().not_allowed + a.refusals().malformed, 0);
    }

    #[test]
    fn a_full_table_still_takes_a_new_host() {
        // Multicast hears anyone: a forger from 8 addresses fills the whole table.
        let a = detached("dfull", config(&[("FERRY_DISCOVERY", "multicast")]), false);
        let limits = DiscoveryLimits::default();
        let flood = |a: &Agent, base: u64| {
            for i in 0..8u64 {
                announce_from(a, &format!("192.0.2.{}:7650", 10 + i), base + i, 0..200);
            }
        };
        flood(&a, 100);
        assert_eq!(a.remotes().len(), limits.max_remotes);
        announce_from(&a, "10.0.0.2:7650", 1, 0..10);
        assert_eq!(held_by(&a, "10.0.0.2"), 10, "a newcomer gets in");
        flood(&a, 200);
        assert_eq!(
            held_by(&a, "10.0.0.2"),
            10,
            "and stays while the flood goes on"
        );
        assert_eq!(a.remotes().len(), limits.max_remotes);
        assert!(a.refusals().over_limit > 0);
    }

    #[test]
    fn registered_agents_are_bounded() {
        let c = config(&[
            ("FERRY_PEERS", "10.0.0.2"),
            ("FERRY_DISCOVERY_MAX_AGENTS", "2"),
        ]);
        let a = detached("dagents", c, true);
        let count = |a: &Agent| a.registered.lock().unwrap().len();
        for port in [5000, 5001, 5002] {
            a.port_in(
                SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port),
                &register_datagram(),
            );
        }
        assert_eq!(count(&a), 2);
        assert_eq!(a.refusals(), refusals(0, 0, 1));
        // Those registered renew; once one is gone, a newcomer gets its place.
        a.port_in(addr("127.0.0.1:5000"), &register_datagram());
        assert_eq!(a.refusals(), refusals(0, 0, 1));
        *a.registered
            .lock()
            .unwrap()
            .get_mut(&addr("127.0.0.1:5001"))
            .unwrap() = 0;
        a.port_in(addr("127.0.0.1:5002"), &register_datagram());
        let regs = a.registered.lock().unwrap();
        assert!(regs.contains_key(&addr("127.0.0.1:5002")) && regs.len() == 2);
    }

    proptest! {
        /// Whatever is announced from wherever: the table stays within its bounds, and its
        /// per-source counts match its entries.
        #[test]
        fn the_remote_table_keeps_its_bounds(
            max_remotes in 1usize..40,
            max_per_source in 1usize..20,
            takes in proptest::collection::vec(
                (0u8..6, 0u64..4, any::<bool>(), 0u64..300, any::<bool>(), 1u16..4),
                0..300,
            ),
        ) {
            let limits = DiscoveryLimits { max_remotes, max_per_source, max_agents: 1 };
            let mut t = Remotes::default();
            for (now, (src, host, publisher, id, long, port)) in takes.into_iter().enumerate() {
                let r = Remote {
                    role: if publisher { Role::Publisher } else { Role::Subscriber },
                    topic: if long { "a/b".into() } else { "t".into() },
                    addr: SocketAddr::new(Ipv4Addr::new(10, 0, 0, src).into(), port),
                    id,
                    reliable: false,
                    max_message: 0,
                    type_hash: 0,
                    host,
                    heard_bytes: 1,
                    seen_ns: now as u64,
                };
                t.take(r, &limits);
                prop_assert!(t.map.len() <= max_remotes);
                let mut counts: HashMap<IpAddr, usize> = HashMap::new();
                for r in t.map.values() {
                    *counts.entry(r.addr.ip()).or_insert(0) += 1;
                }
                prop_assert_eq!(&counts, &t.per_source);
                prop_assert!(counts.values().all(|n| *n <= max_per_source));
            }
            t.expire(u64::MAX);
            prop_assert!(t.map.is_empty() && t.per_source.is_empty());
        }
    }

    #[test]
    fn every_agent_of_a_host_hears_a_unicast_peer_through_the_relay() {
        // Three agents on one free port (as three processes of one host would be); the third
        // plays another host (its host id differs) and announces a subscriber to the port.
        let port = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let peers = vec![SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port)];
        let config = DiscoveryConfig {
            port,
            peers,
            ..DiscoveryConfig::default()
        };
        let mk = || Agent::with("drelay", config.clone());
        let a = start(mk());
        let b = start(mk());
        let mut remote = mk();
        remote.host ^= 1;
        let remote = start(remote);
        assert!(a.port_socket().is_some(), "the first agent is the relay");
        assert!(b.port_socket().is_none() && remote.port_socket().is_none());
        remote.announce(entry(Role::Subscriber, "t", 4000, 7));
        let deadline = Instant::now() + Duration::from_secs(10);
        let heard = |x: &Agent| x.remote_subscribers("t").len() == 1;
        while !(heard(&a) && heard(&b)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(heard(&a), "the relay heard the peer");
        assert!(
            heard(&b),
            "the other agent of the host heard it through the relay"
        );
        let r = &b.remote_subscribers("t")[0];
        assert_eq!(r.addr, SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 4000));
        // The relay goes away: another agent takes the port over and the peer is still heard.
        drop(a);
        let deadline = Instant::now() + Duration::from_secs(10);
        while b.port_socket().is_none()
            && remote.port_socket().is_none()
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            b.port_socket().is_some() || remote.port_socket().is_some(),
            "nobody took the discovery port over"
        );
    }

    #[test]
    fn another_hosts_subscribers_are_learned_and_expire() {
        let a = Agent::with("dtest2", DiscoveryConfig::default());
        let mut other = Agent::with("dtest2", DiscoveryConfig::default());
        other.host = a.host ^ 1;
        let b = other.encode(&[entry(Role::Subscriber, "t", 4000, 7)]);
        let g = a.generation();
        a.port_in("10.1.2.3:5555".parse().unwrap(), &b);
        let subs = a.remote_subscribers("t");
        assert_eq!(subs.len(), 1);
        assert_eq!(subs[0].addr, "10.1.2.3:4000".parse().unwrap());
        assert!(a.generation() > g);
        // Our own host's announcements are ignored (same-host peers use shared memory).
        let own = a.encode(&[entry(Role::Subscriber, "u", 1, 8)]);
        a.port_in("10.1.2.3:5555".parse().unwrap(), &own);
        assert!(a.remote_subscribers("u").is_empty());
        a.lock()
            .remotes
            .map
            .values_mut()
            .for_each(|r| r.seen_ns = 0);
        a.expire();
        assert!(a.remote_subscribers("t").is_empty());
    }
}
