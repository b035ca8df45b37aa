//! ROS 2 message definitions (`.msg` text, as MCAP's `ros2msg` schema encoding holds them): the
//! root message's fields, then each dependency after a line of `=` and a `MSG: pkg/Name` line.
//!
//! A schema is hostile input: it is parsed in one pass over its lines (at most
//! `ferry::MAX_SCHEMA` bytes), with bounded counts of definitions and fields, and a type that
//! nests deeper than [`MAX_DEPTH`] (a recursive one does) is refused.

use crate::TypeError;

/// The deepest nesting of messages a type may have.
pub const MAX_DEPTH: usize = 32;
/// The most message definitions one schema may hold.
pub const MAX_DEFINITIONS: usize = 1024;
/// The longest fixed or bounded array or string a schema may declare.
pub const MAX_BOUND: u64 = 1 << 24;
const _: () = assert!(MAX_BOUND == 16_777_216);

/// A fixed-size scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Primitive {
    Bool,
    Int8,
    UInt8,
    Int16,
    UInt16,
    Int32,
    UInt32,
    Int64,
    UInt64,
    Float32,
    Float64,
}

impl Primitive {
    fn parse(s: &str) -> Option<Primitive> {
        Some(match s {
            "bool" => Primitive::Bool,
            "int8" => Primitive::Int8,
            "uint8" | "byte" | "char" => Primitive::UInt8,
            "int16" => Primitive::Int16,
            "uint16" => Primitive::UInt16,
            "int32" => Primitive::Int32,
            "uint32" => Primitive::UInt32,
            "int64" => Primitive::Int64,
            "uint64" => Primitive::UInt64,
            "float32" => Primitive::Float32,
            "float64" => Primitive::Float64,
            _ => return None,
        })
    }

    /// Its size in bytes, which is also its alignment in CDR.
    pub fn size(self) -> usize {
        match self {
            Primitive::Bool | Primitive::Int8 | Primitive::UInt8 => 1,
            Primitive::Int16 | Primitive::UInt16 => 2,
            Primitive::Int32 | Primitive::UInt32 | Primitive::Float32 => 4,
            Primitive::Int64 | Primitive::UInt64 | Primitive::Float64 => 8,
        }
    }
}

/// A field's element type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Element {
    Primitive(Primitive),
    /// A UTF-8 string, with its bound (`string<=N`) if it has one.
    String(Option<u64>),
    /// Another message of the schema, by index in [`MessageSet::definitions`].
    Message(usize),
}

/// Whether a field is one value or many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    One,
    /// `T[N]`: exactly N.
    Fixed(u64),
    /// `T[<=N]`: at most N.
    Bounded(u64),
    /// `T[]`.
    Unbounded,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub element: Element,
    pub arity: Arity,
}

/// One message definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    /// `pkg/Name` (a `pkg/msg/Name` reference is the same message).
    pub name: String,
    pub fields: Vec<Field>,
}

/// A parsed schema: its definitions, the root first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageSet {
    pub definitions: Vec<Definition>,
}

/// A field before its message references are resolved.
struct RawField {
    name: String,
    element: RawElement,
    arity: Arity,
}

enum RawElement {
    Primitive(Primitive),
    String(Option<u64>),
    Message(String),
}

impl MessageSet {
    /// Parses `schema`, the definition of `root` (`pkg/msg/Name` or `pkg/Name`) with its
    /// dependencies.
    pub fn parse(root: &str, schema: &str) -> Result<MessageSet, TypeError> {
        if schema.len() > ferry::MAX_SCHEMA {
            return Err(TypeError::Schema(format!(
                "{} bytes, more than the {} a schema may have",
                schema.len(),
                ferry::MAX_SCHEMA
            )));
        }
        let mut sections: Vec<(String, Vec<RawField>)> = vec![(normalize(root)?, Vec::new())];
        let mut expect_name = false;
        for (n, line) in schema.lines().enumerate() {
            let line_no = n + 1;
            let text = line.split('#').next().unwrap_or("").trim();
            if text.len() >= 3 && text.bytes().all(|b| b == b'=') {
                if sections.len() >= MAX_DEFINITIONS {
                    return Err(TypeError::Schema(format!(
                        "more than {MAX_DEFINITIONS} message definitions"
                    )));
                }
                expect_name = true;
                continue;
            }
            if text.is_empty() {
                continue;
            }
            if expect_name {
                let name = text.strip_prefix("MSG:").ok_or_else(|| {
                    TypeError::Schema(format!(
                        "line {line_no}: a definition after a separator starts with \
                         \"MSG: pkg/Name\", not {text:?}"
                    ))
                })?;
                sections.push((normalize(name.trim())?, Vec::new()));
                expect_name = false;
                continue;
            }
            let package = package_of(&sections.last().expect("never empty").0).to_owned();
            if let Some(field) = parse_field(text, &package, line_no)? {
                let fields = &mut sections.last_mut().expect("never empty").1;
                if fields.iter().any(|f| f.name == field.name) {
                    return Err(TypeError::Schema(format!(
                        "line {line_no}: field {:?} is declared twice",
                        field.name
                    )));
                }
                fields.push(field);
            }
        }
        let index = |name: &str| sections.iter().position(|(n, _)| n == name);
        let mut definitions = Vec::with_capacity(sections.len());
        for (i, (name, _)) in sections.iter().enumerate() {
            if index(name) != Some(i) {
                return Err(TypeError::Schema(format!("{name} is defined twice")));
            }
        }
        for (name, raw) in &sections {
            let mut fields = Vec::with_capacity(raw.len());
            for f in raw {
                let element = match &f.element {
                    RawElement::Primitive(p) => Element::Primitive(*p),
                    RawElement::String(b) => Element::String(*b),
                    RawElement::Message(m) => Element::Message(index(m).ok_or_else(|| {
                        TypeError::Schema(format!(
                            "{name}.{} is a {m}, which the schema does not define",
                            f.name
                        ))
                    })?),
                };
                fields.push(Field {
                    name: f.name.clone(),
                    element,
                    arity: f.arity,
                });
            }
            definitions.push(Definition {
                name: name.clone(),
                fields,
            });
        }
        let set = MessageSet { definitions };
        set.check_depth()?;
        Ok(set)
    }

    /// Refuses a type nesting deeper than [`MAX_DEPTH`] (a recursive type nests forever): the
    /// depth of each definition, computed bottom-up over at most `MAX_DEPTH` rounds.
    fn check_depth(&self) -> Result<(), TypeError> {
        let n = self.definitions.len();
        // depth[i]: how deep definition i nests, once known.
        let mut depth: Vec<Option<usize>> = vec![None; n];
        for _ in 0..=MAX_DEPTH {
            let mut progress = false;
            for i in 0..n {
                if depth[i].is_some() {
                    continue;
                }
                let mut d = Some(1);
                for f in &self.definitions[i].fields {
                    if let Element::Message(m) = f.element {
                        d = match (d, depth[m]) {
                            (Some(a), Some(b)) => Some(a.max(b + 1)),
                            _ => None,
                        };
                    }
                }
                if let Some(d) = d {
                    depth[i] = Some(d);
                    progress = true;
                }
            }
            if !progress {
                break;
            }
        }
        match depth[0] {
            Some(d) if d <= MAX_DEPTH => Ok(()),
            _ => Err(TypeError::Schema(format!(
                "{} nests messages deeper than {MAX_DEPTH} levels (or refers to itself)",
                self.definitions[0].name
            ))),
        }
    }

    pub fn root(&self) -> &Definition {
        &self.definitions[0]
    }
}

/// `pkg/msg/Name` and `pkg/Name` name the same message: kept as `pkg/Name`.
fn normalize(name: &str) -> Result<String, TypeError> {
    let parts: Vec<&str> = name.split('/').collect();
    let (pkg, msg) = match parts.as_slice() {
        [pkg, "msg", msg] | [pkg, msg] => (*pkg, *msg),
        _ => {
            return Err(TypeError::Schema(format!(
                "message name {name:?} is not pkg/Name or pkg/msg/Name"
            )))
        }
    };
    let ok = |s: &str| {
        !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    if !ok(pkg) || !ok(msg) {
        return Err(TypeError::Schema(format!(
            "message name {name:?} is not pkg/Name or pkg/msg/Name"
        )));
    }
    Ok(format!("{pkg}/{msg}"))
}

fn package_of(name: &str) -> &str {
    name.split('/').next().unwrap_or("")
}

/// One line: `type name`, `type name default`, or a constant `type NAME=value` (skipped: it is
/// not on the wire).
fn parse_field(text: &str, package: &str, line_no: usize) -> Result<Option<RawField>, TypeError> {
    let bad = |why: &str| TypeError::Schema(format!("line {line_no}: {why}: {text:?}"));
    let mut parts = text.splitn(2, char::is_whitespace);
    let ty = parts.next().unwrap_or("");
    let rest = parts.next().unwrap_or("").trim();
    if rest.is_empty() {
        return Err(bad("a field is `type name`"));
    }
    let name_end = rest
        .find(|c: char| c.is_whitespace() || c == '=')
        .unwrap_or(rest.len());
    let name = &rest[..name_end];
    if rest[name_end..].trim_start().starts_with('=') {
        return Ok(None); // a constant
    }
    if name.is_empty()
        || name.len() > 128
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(bad("a field name is letters, digits and _"));
    }
    let (base, arity) = match ty.find('[') {
        None => (ty, Arity::One),
        Some(at) => {
            let inner = ty[at + 1..]
                .strip_suffix(']')
                .ok_or_else(|| bad("an array type ends with ]"))?;
            let arity = if inner.is_empty() {
                Arity::Unbounded
            } else if let Some(n) = inner.strip_prefix("<=") {
                Arity::Bounded(
                    bound(n).ok_or_else(|| bad("an array bound is a number up to 16777216"))?,
                )
            } else {
                Arity::Fixed(
                    bound(inner).ok_or_else(|| bad("an array size is a number up to 16777216"))?,
                )
            };
            (&ty[..at], arity)
        }
    };
    let element = if let Some(p) = Primitive::parse(base) {
        RawElement::Primitive(p)
    } else if base == "string" {
        RawElement::String(None)
    } else if let Some(n) = base.strip_prefix("string<=") {
        RawElement::String(Some(
            bound(n).ok_or_else(|| bad("a string bound is a number up to 16777216"))?,
        ))
    } else if base == "wstring" || base.starts_with("wstring<=") {
        return Err(bad("wstring fields are not supported"));
    } else if base == "Header" {
        RawElement::Message("std_msgs/Header".to_owned())
    } else if base.contains('/') {
        RawElement::Message(normalize(base)?)
    } else {
        RawElement::Message(normalize(&format!("{package}/{base}"))?)
    };
    Ok(Some(RawField {
        name: name.to_owned(),
        element,
        arity,
    }))
}

fn bound(s: &str) -> Option<u64> {
    s.parse::<u64>().ok().filter(|n| *n <= MAX_BOUND)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub const IMU: &str = include_str!("../tests/data/Imu.msg");

    #[test]
    fn the_ros2_imu_definition_parses_with_its_dependencies() {
        let set = MessageSet::parse("sensor_msgs/msg/Imu", IMU).unwrap();
        let root = set.root();
        assert_eq!(root.name, "sensor_msgs/Imu");
        let names: Vec<&str> = root.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "header",
                "orientation",
                "orientation_covariance",
                "angular_velocity",
                "angular_velocity_covariance",
                "linear_acceleration",
                "linear_acceleration_covariance"
            ]
        );
        assert_eq!(root.fields[2].arity, Arity::Fixed(9));
        let Element::Message(h) = root.fields[0].element else {
            panic!("header is a message")
        };
        assert_eq!(set.definitions[h].name, "std_msgs/Header");
    }

    #[test]
    fn bad_schemas_are_refused_with_the_line() {
        let cases = [
            ("float64", "type name"),
            ("float64 x\nfloat64 x", "twice"),
            ("Missing m", "does not define"),
            ("uint8[99999999999] big", "up to 16777216"),
            ("wstring w", "wstring"),
            ("int32 x\n===\nnot a header", "MSG:"),
        ];
        for (schema, why) in cases {
            let e = MessageSet::parse("a/B", schema).unwrap_err().to_string();
            assert!(e.contains(why), "{schema:?}: {e}");
        }
        // Constants and defaults are not fields on the wire.
        let set = MessageSet::parse("a/B", "int32 X=3\nint32 y 5\nstring<=4 s").unwrap();
        assert_eq!(set.root().fields.len(), 2);
    }

    #[test]
    fn recursive_and_very_deep_types_are_refused() {
        let e = MessageSet::parse("a/B", "B next").unwrap_err();
        assert!(e.to_string().contains("deeper"), "{e}");
        // 10 000 levels, each its own definition: refused by the definition count, in one pass.
        let mut deep = String::from("L1 next\n");
        for i in 1..10_000 {
            deep.push_str(&format!("===\nMSG: a/L{i}\nL{} next\n", i + 1));
        }
        let e = MessageSet::parse("a/B", &deep[..deep.len().min(ferry::MAX_SCHEMA)]);
        assert!(e.is_err());
        // 33 levels within the size and count bounds: refused by depth.
        let mut deep = String::from("L1 next\n");
        for i in 1..=MAX_DEPTH {
            deep.push_str(&format!("===\nMSG: a/L{i}\nL{} next\n", i + 1));
        }
        deep.push_str(&format!("===\nMSG: a/L{}\nint8 end\n", MAX_DEPTH + 1));
        let e = MessageSet::parse("a/B", &deep).unwrap_err();
        assert!(e.to_string().contains("deeper"), "{e}");
        // A megabyte is refused before it is read.
        let big = "int8 x\n".repeat(150_000);
        assert!(MessageSet::parse("a/B", &big)
            .unwrap_err()
            .to_string()
            .contains("more than"));
    }
}
