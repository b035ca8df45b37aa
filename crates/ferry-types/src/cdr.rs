//! CDR as ROS 2 sends it (XCDR1, little or big endian): a 4-byte encapsulation header, then
//! the fields in order, each aligned to its size counted from the end of that header. Strings
//! are a u32 length (with the terminating NUL), the bytes and the NUL; sequences a u32 count and
//! the elements; fixed arrays the elements alone; an empty message one byte.
//!
//! A message is hostile input: every count read from it is checked against the bytes left
//! (each element takes at least [`min_size`] bytes) before a loop runs on it, and nesting is
//! bounded by the schema's (`ros2msg::MAX_DEPTH`).

use crate::ros2msg::{Arity, Definition, Element, MessageSet, Primitive};
use crate::value::Value;
use crate::TypeError;

const CDR_BE: [u8; 2] = [0x00, 0x00];
const CDR_LE: [u8; 2] = [0x00, 0x01];

/// The fewest bytes a value of `element` (one of it) takes on the wire: what bounds a count.
fn element_min(set: &MessageSet, element: &Element, depth: usize) -> u64 {
    match element {
        Element::Primitive(p) => p.size() as u64,
        Element::String(_) => 4,
        Element::Message(m) if depth < crate::ros2msg::MAX_DEPTH => {
            definition_min(set, &set.definitions[*m], depth + 1)
        }
        Element::Message(_) => 1,
    }
}

fn definition_min(set: &MessageSet, def: &Definition, depth: usize) -> u64 {
    let sum = def.fields.iter().fold(0u64, |acc, f| {
        let one = element_min(set, &f.element, depth);
        let n = match f.arity {
            Arity::One => one,
            Arity::Fixed(k) => one.saturating_mul(k),
            Arity::Bounded(_) | Arity::Unbounded => 4,
        };
        acc.saturating_add(n)
    });
    sum.max(1)
}

/// The fewest bytes one element of `element` takes (at least 1).
pub fn min_size(set: &MessageSet, element: &Element) -> u64 {
    element_min(set, element, 0).max(1)
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    little: bool,
}

impl Reader<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn align(&mut self, n: usize) -> Result<(), TypeError> {
        let pad = (n - self.pos % n) % n;
        self.take(pad).map(|_| ())
    }

    fn take(&mut self, n: usize) -> Result<&[u8], TypeError> {
        if n > self.left() {
            return Err(TypeError::Decode(format!(
                "the message ends at byte {}, {} bytes short",
                self.bytes.len() + 4,
                n - self.left()
            )));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn word<const N: usize>(&mut self) -> Result<[u8; N], TypeError> {
        self.align(N)?;
        let mut w: [u8; N] = self.take(N)?.try_into().expect("N bytes");
        if !self.little {
            w.reverse();
        }
        Ok(w)
    }

    fn u32(&mut self) -> Result<u32, TypeError> {
        Ok(u32::from_le_bytes(self.word()?))
    }

    fn primitive(&mut self, p: Primitive) -> Result<Value, TypeError> {
        Ok(match p {
            Primitive::Bool => Value::Bool(self.take(1)?[0] != 0),
            Primitive::Int8 => Value::Int(i8::from_le_bytes(self.word()?).into()),
            Primitive::UInt8 => Value::UInt(u8::from_le_bytes(self.word()?).into()),
            Primitive::Int16 => Value::Int(i16::from_le_bytes(self.word()?).into()),
            Primitive::UInt16 => Value::UInt(u16::from_le_bytes(self.word()?).into()),
            Primitive::Int32 => Value::Int(i32::from_le_bytes(self.word()?).into()),
            Primitive::UInt32 => Value::UInt(u32::from_le_bytes(self.word()?).into()),
            Primitive::Int64 => Value::Int(i64::from_le_bytes(self.word()?)),
            Primitive::UInt64 => Value::UInt(u64::from_le_bytes(self.word()?)),
            Primitive::Float32 => Value::Float(f32::from_le_bytes(self.word()?).into()),
            Primitive::Float64 => Value::Float(f64::from_le_bytes(self.word()?)),
        })
    }

    fn string(&mut self, bound: Option<u64>) -> Result<Value, TypeError> {
        let len = self.u32()? as usize;
        let raw = self.take(len)?;
        // The length counts a terminating NUL (a writer may send 0 for an empty string).
        let text = raw.strip_suffix(&[0]).unwrap_or(raw);
        let s = String::from_utf8_lossy(text).into_owned();
        if let Some(b) = bound {
            if s.len() as u64 > b {
                return Err(TypeError::Decode(format!(
                    "a string of {} bytes where at most {b} are declared",
                    s.len()
                )));
            }
        }
        Ok(Value::Str(s))
    }
}

/// Decodes one CDR message of the schema's root type.
pub fn decode(set: &MessageSet, bytes: &[u8]) -> Result<Value, TypeError> {
    if bytes.len() < 4 {
        return Err(TypeError::Decode(format!(
            "{} bytes: a CDR message starts with a 4-byte encapsulation header",
            bytes.len()
        )));
    }
    let little = match [bytes[0], bytes[1]] {
        CDR_LE => true,
        CDR_BE => false,
        other => {
            return Err(TypeError::Decode(format!(
                "encapsulation {:02x}{:02x} is not plain CDR (little or big endian)",
                other[0], other[1]
            )))
        }
    };
    let mut r = Reader {
        bytes: &bytes[4..],
        pos: 0,
        little,
    };
    decode_definition(set, 0, &mut r, 0)
}

fn decode_definition(
    set: &MessageSet,
    index: usize,
    r: &mut Reader<'_>,
    depth: usize,
) -> Result<Value, TypeError> {
    let def = &set.definitions[index];
    if def.fields.is_empty() {
        r.take(1)?;
        return Ok(Value::Struct(Vec::new()));
    }
    let mut fields = Vec::with_capacity(def.fields.len());
    for f in &def.fields {
        let count = match f.arity {
            Arity::One => None,
            Arity::Fixed(n) => Some(n),
            Arity::Bounded(_) | Arity::Unbounded => Some(u64::from(r.u32()?)),
        };
        let value = match count {
            None => decode_element(set, &f.element, r, depth)?,
            Some(n) => {
                if let Arity::Bounded(b) = f.arity {
                    if n > b {
                        return Err(TypeError::Decode(format!(
                            "{}.{}: {n} elements where at most {b} are declared",
                            def.name, f.name
                        )));
                    }
                }
                let min = min_size(set, &f.element);
                if n > r.left() as u64 / min {
                    return Err(TypeError::Decode(format!(
                        "{}.{}: {n} elements cannot fit in the {} bytes left",
                        def.name,
                        f.name,
                        r.left()
                    )));
                }
                let mut items = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    items.push(decode_element(set, &f.element, r, depth)?);
                }
                Value::Seq(items)
            }
        };
        fields.push((f.name.clone(), value));
    }
    Ok(Value::Struct(fields))
}

fn decode_element(
    set: &MessageSet,
    element: &Element,
    r: &mut Reader<'_>,
    depth: usize,
) -> Result<Value, TypeError> {
    match element {
        Element::Primitive(p) => r.primitive(*p),
        Element::String(bound) => r.string(*bound),
        Element::Message(m) if depth < crate::ros2msg::MAX_DEPTH => {
            decode_definition(set, *m, r, depth + 1)
        }
        Element::Message(_) => Err(TypeError::Decode("nested too deep".into())),
    }
}

/// Encodes `value` (an object whose keys are field names; a missing field is zero, false or
/// empty) as a little-endian CDR message of the schema's root type.
pub fn encode(set: &MessageSet, value: &serde_json::Value) -> Result<Vec<u8>, TypeError> {
    let mut out = vec![CDR_LE[0], CDR_LE[1], 0, 0];
    let mut w = Writer { out: &mut out };
    encode_definition(set, 0, Some(value), &mut w, "", 0)?;
    Ok(out)
}

struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

impl Writer<'_> {
    fn align(&mut self, n: usize) {
        let pos = self.out.len() - 4;
        let pad = (n - pos % n) % n;
        self.out.resize(self.out.len() + pad, 0);
    }

    fn put(&mut self, bytes: &[u8]) {
        self.align(bytes.len());
        self.out.extend_from_slice(bytes);
    }
}

fn encode_definition(
    set: &MessageSet,
    index: usize,
    value: Option<&serde_json::Value>,
    w: &mut Writer<'_>,
    path: &str,
    depth: usize,
) -> Result<(), TypeError> {
    let def = &set.definitions[index];
    let here = |field: &str| {
        if path.is_empty() {
            field.to_owned()
        } else {
            format!("{path}.{field}")
        }
    };
    let object = match value {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Object(o)) => Some(o),
        Some(other) => {
            return Err(TypeError::Encode(format!(
                "{}: a {} is a mapping of its fields, not {other}",
                if path.is_empty() { "the message" } else { path },
                def.name
            )))
        }
    };
    if let Some(o) = object {
        if let Some(k) = o.keys().find(|k| !def.fields.iter().any(|f| &f.name == *k)) {
            let names: Vec<&str> = def.fields.iter().map(|f| f.name.as_str()).collect();
            return Err(TypeError::Encode(format!(
                "{}: {} has no field {k:?} (it has {})",
                here(k),
                def.name,
                names.join(", ")
            )));
        }
    }
    if def.fields.is_empty() {
        w.out.push(0);
        return Ok(());
    }
    for f in &def.fields {
        let v = object.and_then(|o| o.get(&f.name));
        let p = here(&f.name);
        match f.arity {
            Arity::One => encode_element(set, &f.element, v, w, &p, depth)?,
            arity => {
                let items: &[serde_json::Value] = match v {
                    None | Some(serde_json::Value::Null) => &[],
                    Some(serde_json::Value::Array(a)) => a,
                    Some(other) => {
                        return Err(TypeError::Encode(format!("{p}: a sequence, not {other}")))
                    }
                };
                let n = items.len() as u64;
                match arity {
                    Arity::Fixed(k) if n != k && n != 0 => {
                        return Err(TypeError::Encode(format!(
                            "{p}: exactly {k} elements, not {n}"
                        )))
                    }
                    Arity::Bounded(b) if n > b => {
                        return Err(TypeError::Encode(format!(
                            "{p}: at most {b} elements, not {n}"
                        )))
                    }
                    _ => {}
                }
                if let Arity::Fixed(k) = arity {
                    for i in 0..k {
                        let item = items.get(i as usize);
                        encode_element(set, &f.element, item, w, &format!("{p}[{i}]"), depth)?;
                    }
                } else {
                    w.put(&(n as u32).to_le_bytes());
                    for (i, item) in items.iter().enumerate() {
                        let at = format!("{p}[{i}]");
                        encode_element(set, &f.element, Some(item), w, &at, depth)?;
                    }
                }
            }
        }
    }
    Ok(())
}

fn encode_element(
    set: &MessageSet,
    element: &Element,
    v: Option<&serde_json::Value>,
    w: &mut Writer<'_>,
    path: &str,
    depth: usize,
) -> Result<(), TypeError> {
    match element {
        Element::Primitive(p) => encode_primitive(*p, v, w, path),
        Element::String(bound) => {
            let s = match v {
                None | Some(serde_json::Value::Null) => "",
                Some(serde_json::Value::String(s)) => s.as_str(),
                Some(other) => {
                    return Err(TypeError::Encode(format!("{path}: a string, not {other}")))
                }
            };
            if let Some(b) = bound {
                if s.len() as u64 > *b {
                    return Err(TypeError::Encode(format!(
                        "{path}: at most {b} bytes, not {}",
                        s.len()
                    )));
                }
            }
            w.put(&(s.len() as u32 + 1).to_le_bytes());
            w.out.extend_from_slice(s.as_bytes());
            w.out.push(0);
            Ok(())
        }
        Element::Message(m) if depth < crate::ros2msg::MAX_DEPTH => {
            encode_definition(set, *m, v, w, path, depth + 1)
        }
        Element::Message(_) => Err(TypeError::Encode(format!("{path}: nested too deep"))),
    }
}

fn encode_primitive(
    p: Primitive,
    v: Option<&serde_json::Value>,
    w: &mut Writer<'_>,
    path: &str,
) -> Result<(), TypeError> {
    use serde_json::Value as J;
    let wrong = |what: &str| TypeError::Encode(format!("{path}: {what}"));
    let v = v.unwrap_or(&J::Null);
    let int = |lo: i128, hi: i128| -> Result<i128, TypeError> {
        let n = match v {
            J::Null => 0,
            J::Bool(b) => i128::from(*b),
            J::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => i128::from(i),
                (None, Some(u)) => i128::from(u),
                _ => return Err(wrong(&format!("an integer, not {n}"))),
            },
            other => return Err(wrong(&format!("an integer, not {other}"))),
        };
        if n < lo || n > hi {
            return Err(wrong(&format!("{n} is out of range {lo}..={hi}")));
        }
        Ok(n)
    };
    let float = || -> Result<f64, TypeError> {
        match v {
            J::Null => Ok(0.0),
            J::Number(n) => n.as_f64().ok_or_else(|| wrong("a number")),
            J::String(s) => match s.as_str() {
                "NaN" | "nan" | ".nan" => Ok(f64::NAN),
                "inf" | ".inf" => Ok(f64::INFINITY),
                "-inf" | "-.inf" => Ok(f64::NEG_INFINITY),
                _ => Err(wrong(&format!("a number, not {s:?}"))),
            },
            other => Err(wrong(&format!("a number, not {other}"))),
        }
    };
    match p {
        Primitive::Bool => match v {
            J::Null => w.put(&[0]),
            J::Bool(b) => w.put(&[u8::from(*b)]),
            other => return Err(wrong(&format!("true or false, not {other}"))),
        },
        Primitive::Int8 => w.put(&(int(i8::MIN.into(), i8::MAX.into())? as i8).to_le_bytes()),
        Primitive::UInt8 => w.put(&(int(0, u8::MAX.into())? as u8).to_le_bytes()),
        Primitive::Int16 => w.put(&(int(i16::MIN.into(), i16::MAX.into())? as i16).to_le_bytes()),
        Primitive::UInt16 => w.put(&(int(0, u16::MAX.into())? as u16).to_le_bytes()),
        Primitive::Int32 => w.put(&(int(i32::MIN.into(), i32::MAX.into())? as i32).to_le_bytes()),
        Primitive::UInt32 => w.put(&(int(0, u32::MAX.into())? as u32).to_le_bytes()),
        Primitive::Int64 => w.put(&(int(i64::MIN.into(), i64::MAX.into())? as i64).to_le_bytes()),
        Primitive::UInt64 => w.put(&(int(0, u64::MAX.into())? as u64).to_le_bytes()),
        Primitive::Float32 => w.put(&(float()? as f32).to_le_bytes()),
        Primitive::Float64 => w.put(&float()?.to_le_bytes()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imu() -> MessageSet {
        MessageSet::parse("sensor_msgs/msg/Imu", include_str!("../tests/data/Imu.msg")).unwrap()
    }

    #[test]
    fn an_imu_message_round_trips_with_ros2_alignment() {
        let set = imu();
        let input: serde_json::Value = serde_json::from_str(
            r#"{"header":{"stamp":{"sec":5,"nanosec":7},"frame_id":"imu"},
                "orientation":{"w":1.0},
                "angular_velocity":{"x":0.5,"y":-1.25,"z":2},
                "linear_acceleration_covariance":[1,2,3,4,5,6,7,8,9]}"#,
        )
        .unwrap();
        let bytes = encode(&set, &input).unwrap();
        // Header: sec (4), nanosec (4), "imu\0" with its length (8); then 8-byte alignment of the
        // quaternion's doubles (offset 16 is aligned already): 4 + 16 + 32 + 72 + 24 + 72 + 24 + 72.
        assert_eq!(bytes.len(), 4 + 16 + 32 + 72 + 24 + 72 + 24 + 72);
        assert_eq!(&bytes[..4], &[0, 1, 0, 0]);
        assert_eq!(&bytes[4..8], &5i32.to_le_bytes());
        let v = decode(&set, &bytes).unwrap();
        let json: serde_json::Value = serde_json::from_str(&v.to_json()).unwrap();
        assert_eq!(json["header"]["frame_id"], "imu");
        assert_eq!(json["header"]["stamp"]["nanosec"], 7);
        assert_eq!(json["angular_velocity"]["y"], -1.25);
        assert_eq!(json["orientation"]["w"], 1.0);
        assert_eq!(json["linear_acceleration_covariance"][8], 9.0);
        assert_eq!(json["orientation_covariance"].as_array().unwrap().len(), 9);
    }

    #[test]
    fn big_endian_and_sequences_decode() {
        let set = MessageSet::parse("a/B", "uint16[] v\nstring s").unwrap();
        // BE header; count 2 (u32 BE), two u16 BE; then a string aligned to 4.
        let bytes = [
            0, 0, 0, 0, 0, 0, 0, 2, 0, 1, 0, 2, 0, 0, 0, 3, b'h', b'i', 0,
        ];
        let v = decode(&set, &bytes).unwrap();
        assert_eq!(v.to_json(), r#"{"v":[1,2],"s":"hi"}"#);
    }

    #[test]
    fn lying_messages_are_refused_without_work_on_their_counts() {
        let set = MessageSet::parse("a/B", "uint64[] v").unwrap();
        // A count of 4 billion in a 12-byte message.
        let bytes = [0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];
        let e = decode(&set, &bytes).unwrap_err().to_string();
        assert!(e.contains("cannot fit"), "{e}");
        let e = decode(&set, &[0, 1]).unwrap_err().to_string();
        assert!(e.contains("encapsulation"), "{e}");
        let e = decode(&set, &[0, 3, 0, 0]).unwrap_err().to_string();
        assert!(e.contains("not plain CDR"), "{e}");
        // A fixed array the schema makes huge, in a short message.
        let set = MessageSet::parse("a/B", "float64[16000000] v").unwrap();
        assert!(decode(&set, &[0, 1, 0, 0, 1, 2, 3]).is_err());
        // A string that claims more than there is.
        let set = MessageSet::parse("a/B", "string s").unwrap();
        assert!(decode(&set, &[0, 1, 0, 0, 0xff, 0, 0, 0, b'x']).is_err());
    }

    #[test]
    fn text_that_does_not_fit_the_type_is_refused_by_field() {
        let set = imu();
        let cases = [
            (r#"{"nope":1}"#, "no field \"nope\""),
            (r#"{"header":{"stamp":{"sec":"x"}}}"#, "header.stamp.sec"),
            (r#"{"header":{"stamp":{"nanosec":-1}}}"#, "out of range"),
            (r#"{"orientation_covariance":[1,2]}"#, "exactly 9"),
        ];
        for (text, why) in cases {
            let v: serde_json::Value = serde_json::from_str(text).unwrap();
            let e = encode(&set, &v).unwrap_err().to_string();
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}
