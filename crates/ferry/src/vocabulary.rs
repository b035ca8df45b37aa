//! The words that name transports, deliveries, wait strategies and IP versions: one vocabulary
//! for the command line, configurations, results and the bindings.
//!
//! Each of [`Transport`], [`Delivery`], [`WaitStrategy`] and [`IpVersion`] has `ALL` (every
//! value), `name()` (its word), `Display` (the word) and `FromStr` (the word back, exactly: no
//! other case, no white space; anything else is a [`ParseNameError`] that lists the words), and,
//! with the `serde` feature, `Serialize` and `Deserialize` as the same words.
//!
//! | type | words |
//! |---|---|
//! | [`Transport`] | `shm`, `udp`, `auto` |
//! | [`Delivery`] | `reliable`, `latest` |
//! | [`WaitStrategy`] | `spin`, `block`, `adaptive` |
//! | [`IpVersion`] | `v4`, `v6` |

use std::fmt;
use std::str::FromStr;

use crate::{Delivery, IpVersion, Transport, WaitStrategy};

/// A word that names no value of its kind (a transport, a delivery, a wait strategy, an IP
/// version). The message names the word and lists the valid ones: `unknown wait strategy
/// "sleep"; valid wait strategies: spin, block, adaptive`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {word:?}; valid {whats}: {list}", list = .valid.join(", "))]
pub struct ParseNameError {
    what: &'static str,
    whats: &'static str,
    word: String,
    valid: &'static [&'static str],
}

impl ParseNameError {
    /// What was to be named: `"transport"`, `"delivery"`, `"wait strategy"`, `"IP version"`.
    pub fn what(&self) -> &'static str {
        self.what
    }

    /// The word that was given.
    pub fn word(&self) -> &str {
        &self.word
    }

    /// The valid words, in their type's order.
    pub fn valid(&self) -> &'static [&'static str] {
        self.valid
    }
}

/// The vocabulary of one type: `ALL`, `name()`, `Display`, `FromStr` and (with the `serde`
/// feature) serde, all from one list of variants and their words.
macro_rules! vocabulary {
    ($ty:ident, $what:literal / $whats:literal { $($variant:ident = $word:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in the order of its words.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The words of `ALL`, in the same order.
            const NAMES: &'static [&'static str] = &[$($word),+];

            /// Its word: on the command line, in configurations and in results.
            pub const fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $word,)+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(self.name())
            }
        }

        impl FromStr for $ty {
            type Err = ParseNameError;

            fn from_str(word: &str) -> Result<$ty, ParseNameError> {
                match word {
                    $($word => Ok($ty::$variant),)+
                    _ => Err(ParseNameError {
                        what: $what,
                        whats: $whats,
                        word: word.to_owned(),
                        valid: $ty::NAMES,
                    }),
                }
            }
        }

        #[cfg(feature = "serde")]
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.name())
            }
        }

        #[cfg(feature = "serde")]
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<$ty, D::Error> {
                struct Word;

                impl serde::de::Visitor<'_> for Word {
                    type Value = $ty;

                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        write!(f, "a {}: {}", $what, $ty::NAMES.join(", "))
                    }

                    fn visit_str<E: serde::de::Error>(self, word: &str) -> Result<$ty, E> {
                        // The message of serde's derived enums: the word and the valid ones.
                        word.parse().map_err(|_| E::unknown_variant(word, $ty::NAMES))
                    }
                }

                deserializer.deserialize_str(Word)
            }
        }
    };
}

vocabulary!(Transport, "transport" / "transports" {
    Shm = "shm",
    Udp = "udp",
    Auto = "auto",
});

vocabulary!(Delivery, "delivery" / "deliveries" {
    Reliable = "reliable",
    Latest = "latest",
});

vocabulary!(WaitStrategy, "wait strategy" / "wait strategies" {
    Spin = "spin",
    Block = "block",
    Adaptive = "adaptive",
});

vocabulary!(IpVersion, "IP version" / "IP versions" {
    V4 = "v4",
    V6 = "v6",
});

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value of `T` round-trips through its word (and through serde's JSON when the
    /// feature is on), the words are distinct and lowercase, and `ALL` is `NAMES` in order.
    fn round_trips<T>(all: &[T], names: &[&str], name: fn(T) -> &'static str)
    where
        T: Copy + PartialEq + fmt::Debug + fmt::Display + FromStr<Err = ParseNameError>,
    {
        assert_eq!(all.len(), names.len());
        let mut seen = std::collections::HashSet::new();
        for (&value, &word) in all.iter().zip(names) {
            assert_eq!(name(value), word);
            assert_eq!(value.to_string(), word);
            assert_eq!(word.parse::<T>(), Ok(value), "{word}");
            assert_eq!(word, word.to_lowercase());
            assert!(seen.insert(word), "{word} twice");
        }
    }

    #[test]
    fn every_value_round_trips_through_its_word() {
        round_trips(Transport::ALL, &["shm", "udp", "auto"], Transport::name);
        round_trips(Delivery::ALL, &["reliable", "latest"], Delivery::name);
        round_trips(
            WaitStrategy::ALL,
            &["spin", "block", "adaptive"],
            WaitStrategy::name,
        );
        round_trips(IpVersion::ALL, &["v4", "v6"], IpVersion::name);
    }

    #[test]
    fn every_variant_is_listed() {
        // A variant added to an enum but not to its vocabulary fails to compile in `name`; this
        // checks that `ALL` has each one too.
        for t in [Transport::Shm, Transport::Udp, Transport::Auto] {
            assert!(Transport::ALL.contains(&t));
        }
        for d in [Delivery::Reliable, Delivery::Latest] {
            assert!(Delivery::ALL.contains(&d));
        }
        for w in [
            WaitStrategy::Spin,
            WaitStrategy::Block,
            WaitStrategy::Adaptive,
        ] {
            assert!(WaitStrategy::ALL.contains(&w));
        }
        for v in [IpVersion::V4, IpVersion::V6] {
            assert!(IpVersion::ALL.contains(&v));
        }
    }

    #[test]
    fn an_unknown_word_is_refused_naming_the_valid_ones() {
        let e = "sleep".parse::<WaitStrategy>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown wait strategy \"sleep\"; valid wait strategies: spin, block, adaptive"
        );
        assert_eq!(
            (e.what(), e.word(), e.valid()),
            ("wait strategy", "sleep", &["spin", "block", "adaptive"][..])
        );
        assert_eq!(
            "tcp".parse::<Transport>().unwrap_err().to_string(),
            "unknown transport \"tcp\"; valid transports: shm, udp, auto"
        );
        assert_eq!(
            "maybe".parse::<Delivery>().unwrap_err().to_string(),
            "unknown delivery \"maybe\"; valid deliveries: reliable, latest"
        );
        assert_eq!(
            "4".parse::<IpVersion>().unwrap_err().to_string(),
            "unknown IP version \"4\"; valid IP versions: v4, v6"
        );
        // Exactly the words: no other case, no white space, not empty.
        for word in ["Shm", "SHM", " shm", "shm ", "", "udp4"] {
            assert!(word.parse::<Transport>().is_err(), "{word:?}");
        }
    }

    #[test]
    fn display_pads_like_a_string() {
        assert_eq!(format!("{:<6}|", Transport::Shm), "shm   |");
        assert_eq!(format!("{:>8}", Delivery::Latest), "  latest");
    }

    #[cfg(feature = "serde")]
    #[test]
    fn serde_writes_and_reads_the_words() {
        fn check<T>(all: &[T])
        where
            T: Copy + PartialEq + fmt::Debug + fmt::Display,
            T: serde::Serialize + serde::de::DeserializeOwned,
        {
            for &value in all {
                let json = serde_json::to_value(value).unwrap();
                assert_eq!(json, serde_json::Value::String(value.to_string()));
                assert_eq!(serde_json::from_value::<T>(json).unwrap(), value);
            }
        }
        check(Transport::ALL);
        check(Delivery::ALL);
        check(WaitStrategy::ALL);
        check(IpVersion::ALL);
        let q: Vec<WaitStrategy> = serde_json::from_str(r#"["spin", "adaptive"]"#).unwrap();
        assert_eq!(q, [WaitStrategy::Spin, WaitStrategy::Adaptive]);
        // An unknown word: serde's own message for an enum, listing the valid words.
        let e = serde_json::from_str::<Delivery>(r#""maybe""#).unwrap_err();
        assert!(
            e.to_string()
                .contains("unknown variant `maybe`, expected `reliable` or `latest`"),
            "{e}"
        );
        let e = serde_json::from_str::<Transport>("3").unwrap_err();
        assert!(e.to_string().contains("a transport: shm, udp, auto"), "{e}");
    }
}
