//! Named values of the lab's configurations and results: every experiment's transports, modes,
//! placements, ... are declared once with [`choice!`](crate::choice), which gives each its
//! name (the same string on the command line, in a configuration and in the results), its
//! aliases, its list of values and its parser, [`parse_choice`]. The values ferry's QoS takes
//! (`ferry::Delivery`, `ferry::WaitStrategy`) are the library's own types, with the library's
//! words (`Display`, `FromStr`, serde through its `serde` feature); they are choices here too,
//! and [`DeliverySchema`] and [`WaitSchema`] give their JSON schemas.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};

/// A value named by a string, of an enum declared with [`choice!`](crate::choice).
pub trait Choice: Copy + Eq + 'static {
    /// What a value is, for messages: `"transport"`.
    const WHAT: &'static str;
    /// The same, plural: `"transports"`.
    const WHATS: &'static str;
    /// Every value, in the order of the declaration.
    const ALL: &'static [Self];
    /// The name: on the command line, in a configuration, in the results.
    fn name(self) -> &'static str;
    /// Other names it is read by (never written).
    fn aliases(self) -> &'static [&'static str] {
        &[]
    }
}

/// The value named `text` (its name or an alias, white space around it ignored); the error
/// lists every valid name.
pub fn parse_choice<T: Choice>(text: &str) -> Result<T, String> {
    let name = text.trim();
    T::ALL
        .iter()
        .copied()
        .find(|c| c.name() == name || c.aliases().contains(&name))
        .ok_or_else(|| {
            let valid: Vec<&str> = T::ALL.iter().map(|c| c.name()).collect();
            format!(
                "unknown {} {name:?}; valid {}: {}",
                T::WHAT,
                T::WHATS,
                valid.join(", ")
            )
        })
}

/// Declares an enum of named values from one list: each variant's name, then its aliases.
///
/// ```
/// ferry_lab::choice! {
///     /// How a run ends.
///     pub enum Ending: "ending" {
///         /// After a number of messages.
///         Count = "count",
///         Time = "time" | "seconds",
///     }
/// }
/// assert_eq!(Ending::ALL, [Ending::Count, Ending::Time]);
/// assert_eq!("seconds".parse(), Ok(Ending::Time));
/// assert_eq!(Ending::Time.name(), "time");
/// assert_eq!(serde_json::to_value(Ending::Time).unwrap(), "time");
/// ```
///
/// The plural of `"ending"` in messages is `"endings"`; another is given after a slash:
/// `pub enum Delivery: "delivery" / "deliveries"`. The enum derives `Debug`, `Clone`, `Copy`,
/// `PartialEq`, `Eq`, `Hash`, serde's `Serialize` and `Deserialize` (as the names, reading the
/// aliases too) and schemars' `JsonSchema` (the crate that uses it depends on serde and
/// schemars); it implements [`Choice`](crate::args::Choice) and `FromStr` (with
/// [`parse_choice`](crate::args::parse_choice)), and has `ALL` and `name()` of its own. Doc
/// comments and attributes of the enum and of its variants pass through.
#[macro_export]
macro_rules! choice {
    (
        $(#[$meta:meta])*
        $vis:vis enum $enum:ident : $what:literal $(/ $whats:literal)? {
            $(
                $(#[$variant_meta:meta])*
                $variant:ident = $name:literal $(| $alias:literal)*
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Debug,
            Clone,
            Copy,
            PartialEq,
            Eq,
            Hash,
            serde::Serialize,
            serde::Deserialize,
            schemars::JsonSchema,
        )]
        $vis enum $enum {
            $(
                $(#[$variant_meta])*
                #[serde(rename = $name $(, alias = $alias)*)]
                $variant,
            )+
        }

        impl $crate::args::Choice for $enum {
            const WHAT: &'static str = $what;
            const WHATS: &'static str = $crate::choice!(@plural $what $(/ $whats)?);
            const ALL: &'static [Self] = &[$($enum::$variant),+];

            fn name(self) -> &'static str {
                match self {
                    $($enum::$variant => $name,)+
                }
            }

            fn aliases(self) -> &'static [&'static str] {
                match self {
                    $($enum::$variant => &[$($alias),*],)+
                }
            }
        }

        impl $enum {
            /// Every value, in the order of the declaration.
            pub const ALL: &'static [Self] = <Self as $crate::args::Choice>::ALL;

            /// The name: on the command line, in a configuration, in the results.
            pub fn name(self) -> &'static str {
                <Self as $crate::args::Choice>::name(self)
            }
        }

        impl ::std::str::FromStr for $enum {
            type Err = String;

            fn from_str(text: &str) -> Result<Self, String> {
                $crate::args::parse_choice(text)
            }
        }
    };
    (@plural $what:literal) => {
        concat!($what, "s")
    };
    (@plural $what:literal / $whats:literal) => {
        $whats
    };
}

/// ferry's own vocabularies as choices: their values and names are the library's.
macro_rules! library_choice {
    ($($ty:ty: $what:literal / $whats:literal),+ $(,)?) => {
        $(impl Choice for $ty {
            const WHAT: &'static str = $what;
            const WHATS: &'static str = $whats;
            const ALL: &'static [Self] = <$ty>::ALL;

            fn name(self) -> &'static str {
                <$ty>::name(self)
            }
        })+
    };
}

library_choice! {
    ferry::Delivery: "delivery" / "deliveries",
    ferry::WaitStrategy: "wait strategy" / "wait strategies",
}

/// The JSON schema of a choice whose type is not the lab's (ferry's vocabularies), as `choice!`
/// derives it for the lab's own: a string, one of the names, each described.
fn choice_schema<T: Choice>(description: &str, describe: fn(T) -> &'static str) -> Schema {
    let one_of: Vec<serde_json::Value> = T::ALL
        .iter()
        .map(|&c| {
            serde_json::json!({
                "type": "string",
                "const": c.name(),
                "description": describe(c),
            })
        })
        .collect();
    json_schema!({
        "description": description,
        "oneOf": one_of,
    })
}

/// Declares the JSON schema of a library choice for the lab's configurations and results (a
/// field holding one takes `#[schemars(with = "crate::args::NAME")]`): its name in the schema,
/// its description, and each value's.
macro_rules! library_choice_schema {
    ($(
        $(#[$doc:meta])*
        $name:ident for $ty:ty: $schema_name:literal, $description:literal, $describe:expr;
    )+) => {$(
        $(#[$doc])*
        pub struct $name;

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                $schema_name.into()
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                choice_schema::<$ty>($description, $describe)
            }
        }
    )+};
}

library_choice_schema! {
    /// The JSON schema of `ferry::Delivery` in the lab's configurations and results.
    DeliverySchema for ferry::Delivery: "Delivery",
        "ferry's delivery, as the lab's configurations and results name it.",
        |d| match d {
            ferry::Delivery::Reliable => {
                "Nothing is lost: a publisher waits for slow reliable subscribers."
            }
            ferry::Delivery::Latest => {
                "The publisher never waits; slow subscribers skip ahead and count what they \
                 skipped."
            }
        };

    /// The JSON schema of `ferry::WaitStrategy` in the lab's configurations and results.
    WaitSchema for ferry::WaitStrategy: "Wait",
        "ferry's wait strategy, as the lab's configurations and results name it.",
        |w| match w {
            ferry::WaitStrategy::Spin => {
                "Busy loop: lowest latency, one CPU kept busy while waiting."
            }
            ferry::WaitStrategy::Block => "Sleep on a futex: no busy loop.",
            ferry::WaitStrategy::Adaptive => "Spin for a short while, then sleep.",
        };
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::HashSet;
    use std::fmt::Debug;

    use serde::de::DeserializeOwned;
    use serde::Serialize;

    use super::*;

    crate::choice! {
        /// A test's colours.
        enum Colour: "colour" {
            Red = "red",
            /// With a doc comment and an alias.
            Green = "green" | "lime",
            Blue = "blue" | "navy" | "cyan",
        }
    }

    #[test]
    fn names_and_aliases_parse() {
        for &c in Colour::ALL {
            assert_eq!(parse_choice::<Colour>(c.name()), Ok(c));
        }
        assert_eq!(parse_choice::<Colour>("lime"), Ok(Colour::Green));
        assert_eq!(parse_choice::<Colour>("cyan"), Ok(Colour::Blue));
        assert_eq!("navy".parse::<Colour>(), Ok(Colour::Blue));
        assert_eq!(Colour::Blue.aliases(), ["navy", "cyan"]);
        assert!(Colour::Red.aliases().is_empty());
        assert_eq!(Colour::ALL, [Colour::Red, Colour::Green, Colour::Blue]);
    }

    #[test]
    fn white_space_around_a_name_is_ignored() {
        assert_eq!(parse_choice::<Colour>("  red\t"), Ok(Colour::Red));
        assert_eq!(parse_choice::<Colour>(" lime\n"), Ok(Colour::Green));
        assert!(parse_choice::<Colour>("r ed").is_err());
        assert!(
            parse_choice::<Colour>("Red").is_err(),
            "names are case-sensitive"
        );
    }

    #[test]
    fn the_error_names_the_value_and_lists_every_valid_name() {
        assert_eq!(
            parse_choice::<Colour>(" purple "),
            Err("unknown colour \"purple\"; valid colours: red, green, blue".to_owned())
        );
        assert_eq!(
            parse_choice::<ferry::Delivery>("maybe").unwrap_err(),
            "unknown delivery \"maybe\"; valid deliveries: reliable, latest"
        );
        assert_eq!(
            parse_choice::<ferry::WaitStrategy>(" sleep").unwrap_err(),
            "unknown wait strategy \"sleep\"; valid wait strategies: spin, block, adaptive"
        );
        assert!(parse_choice::<Colour>("").unwrap_err().contains("\"\""));
    }

    #[test]
    fn aliases_are_read_from_json_but_never_written() {
        let c: Colour = serde_json::from_str("\"lime\"").unwrap();
        assert_eq!(c, Colour::Green);
        assert_eq!(serde_json::to_value(c).unwrap(), "green");
        assert!(serde_json::from_str::<Colour>("\"purple\"").is_err());
    }

    /// Every name and alias of `T` is distinct, and every value is written to JSON as its name
    /// and read back from its name and from each alias.
    pub(crate) fn check<T: Choice + Debug + Serialize + DeserializeOwned>() {
        assert!(!T::ALL.is_empty(), "{}", T::WHAT);
        let mut seen = HashSet::new();
        for &c in T::ALL {
            for name in std::iter::once(c.name()).chain(c.aliases().iter().copied()) {
                assert!(seen.insert(name), "{} {name:?} named twice", T::WHAT);
                assert_eq!(parse_choice::<T>(name), Ok(c));
                let json = serde_json::Value::String(name.to_owned());
                assert_eq!(serde_json::from_value::<T>(json).unwrap(), c);
            }
            assert_eq!(serde_json::to_value(c).unwrap(), c.name(), "{c:?}");
        }
        let distinct: HashSet<_> = T::ALL.iter().map(|c| format!("{c:?}")).collect();
        assert_eq!(
            distinct.len(),
            T::ALL.len(),
            "{}: a value listed twice",
            T::WHAT
        );
    }

    #[test]
    fn every_choice_has_distinct_names_that_round_trip_through_json() {
        check::<Colour>();
        check::<ferry::Delivery>();
        check::<ferry::WaitStrategy>();
    }

    #[test]
    fn ferrys_vocabularies_read_as_the_library_reads_them() {
        // White space aside (the lab's parser ignores it), the same values and messages.
        for &w in ferry::WaitStrategy::ALL {
            assert_eq!(parse_choice(w.name()), Ok(w));
            assert_eq!(w.name().parse(), Ok(w));
        }
        for &d in ferry::Delivery::ALL {
            assert_eq!(parse_choice(d.name()), Ok(d));
            assert_eq!(d.name().parse(), Ok(d));
        }
        assert_eq!(
            parse_choice::<ferry::WaitStrategy>("sleep").unwrap_err(),
            "sleep"
                .parse::<ferry::WaitStrategy>()
                .unwrap_err()
                .to_string()
        );
        assert_eq!(
            parse_choice::<ferry::Delivery>("maybe").unwrap_err(),
            "maybe".parse::<ferry::Delivery>().unwrap_err().to_string()
        );
    }

    #[test]
    fn the_schemas_of_ferrys_vocabularies_list_their_names() {
        fn names<T: JsonSchema>() -> Vec<String> {
            let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap();
            schema["oneOf"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| {
                    assert!(v["description"].as_str().is_some_and(|d| !d.is_empty()));
                    v["const"].as_str().unwrap().to_owned()
                })
                .collect()
        }
        assert_eq!(names::<DeliverySchema>(), ["reliable", "latest"]);
        assert_eq!(names::<WaitSchema>(), ["spin", "block", "adaptive"]);
    }
}
