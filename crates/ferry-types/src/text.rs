//! A message written as text (`ferry pub --yaml` or `--json`), read into a tree of fields that
//! a codec encodes; and JSON read into a [`Value`].

use yaml_rust2::{Yaml, YamlLoader};

use crate::value::Value;
use crate::TypeError;

/// The deepest text a message may nest.
const MAX_TEXT_DEPTH: usize = 64;
/// The longest text a message may be written in.
pub const MAX_TEXT: usize = 1 << 20;

/// Reads `text` as YAML (of which JSON is a part): one document, a mapping of field names to
/// values, as `ros2 topic pub` takes it (`{header: {frame_id: imu}, orientation: {w: 1.0}}`).
pub fn parse_yaml(text: &str) -> Result<serde_json::Value, TypeError> {
    bounded(text)?;
    let docs =
        YamlLoader::load_from_str(text).map_err(|e| TypeError::Encode(format!("not YAML: {e}")))?;
    match docs.as_slice() {
        [] => Ok(serde_json::Value::Object(Default::default())),
        [doc] => yaml_to_json(doc, 0),
        _ => Err(TypeError::Encode(
            "several YAML documents: give one message".into(),
        )),
    }
}

/// Reads `text` as JSON.
pub fn parse_json(text: &str) -> Result<serde_json::Value, TypeError> {
    bounded(text)?;
    serde_json::from_str(text).map_err(|e| TypeError::Encode(format!("not JSON: {e}")))
}

fn bounded(text: &str) -> Result<(), TypeError> {
    if text.len() > MAX_TEXT {
        return Err(TypeError::Encode(format!(
            "a message's text is at most {MAX_TEXT} bytes, not {}",
            text.len()
        )));
    }
    Ok(())
}

fn yaml_to_json(y: &Yaml, depth: usize) -> Result<serde_json::Value, TypeError> {
    use serde_json::Value as J;
    if depth > MAX_TEXT_DEPTH {
        return Err(TypeError::Encode(format!(
            "the text nests deeper than {MAX_TEXT_DEPTH} levels"
        )));
    }
    Ok(match y {
        Yaml::Null => J::Null,
        Yaml::Boolean(b) => J::Bool(*b),
        Yaml::Integer(i) => J::from(*i),
        Yaml::Real(r) => match r.as_str() {
            ".nan" | ".NaN" | ".NAN" | "nan" => J::String("NaN".into()),
            ".inf" | ".Inf" | ".INF" | "+.inf" => J::String("inf".into()),
            "-.inf" | "-.Inf" | "-.INF" => J::String("-inf".into()),
            _ => {
                let f: f64 = r
                    .parse()
                    .map_err(|_| TypeError::Encode(format!("{r:?} is not a number")))?;
                serde_json::Number::from_f64(f).map_or(J::Null, J::Number)
            }
        },
        Yaml::String(s) => J::String(s.clone()),
        Yaml::Array(items) => J::Array(
            items
                .iter()
                .map(|i| yaml_to_json(i, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Hash(h) => {
            let mut o = serde_json::Map::new();
            for (k, v) in h {
                let key = match k {
                    Yaml::String(s) => s.clone(),
                    Yaml::Integer(i) => i.to_string(),
                    other => {
                        return Err(TypeError::Encode(format!(
                            "a field name is text, not {other:?}"
                        )))
                    }
                };
                o.insert(key, yaml_to_json(v, depth + 1)?);
            }
            J::Object(o)
        }
        Yaml::Alias(_) => {
            return Err(TypeError::Encode(
                "YAML aliases are not taken in a message".into(),
            ))
        }
        Yaml::BadValue => return Err(TypeError::Encode("a bad YAML value".into())),
    })
}

/// A JSON value as a [`Value`], refused beyond `max_depth` levels.
pub fn from_json(v: &serde_json::Value, max_depth: usize) -> Result<Value, String> {
    use serde_json::Value as J;
    if max_depth == 0 {
        return Err("the JSON nests too deep".into());
    }
    Ok(match v {
        J::Null => Value::Null,
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Value::UInt(u),
            (_, Some(i), _) => Value::Int(i),
            (_, _, Some(f)) => Value::Float(f),
            _ => Value::Null,
        },
        J::String(s) => Value::Str(s.clone()),
        J::Array(a) => Value::Seq(
            a.iter()
                .map(|x| from_json(x, max_depth - 1))
                .collect::<Result<_, _>>()?,
        ),
        J::Object(o) => Value::Struct(
            o.iter()
                .map(|(k, x)| Ok((k.clone(), from_json(x, max_depth - 1)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_flow_and_block_text_read_as_fields() {
        let v = parse_yaml("{header: {frame_id: imu, stamp: {sec: 3}}, orientation: {w: 1.0}}")
            .unwrap();
        assert_eq!(v["header"]["frame_id"], "imu");
        assert_eq!(v["header"]["stamp"]["sec"], 3);
        assert_eq!(v["orientation"]["w"], 1.0);
        let v = parse_yaml("x: .nan\nlist:\n  - 1\n  - 2\n").unwrap();
        assert_eq!(v["x"], "NaN");
        assert_eq!(v["list"][1], 2);
        assert!(parse_yaml("a: [").is_err());
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(parse_yaml(&deep).is_err());
        assert!(parse_yaml(&"x".repeat(MAX_TEXT + 1)).is_err());
    }
}
