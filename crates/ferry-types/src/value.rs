//! A decoded message: fields by name, in the schema's order, and how tools print it (YAML-like
//! text, or one JSON object per line).

use std::fmt::Write;

/// A decoded value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Value>),
    /// A message's fields, in the order its schema gives them.
    Struct(Vec<(String, Value)>),
    Null,
}

impl Value {
    /// One line of JSON. Non-finite floats, which JSON cannot hold, are written as strings
    /// (`"NaN"`, `"inf"`, `"-inf"`).
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    fn write_json(&self, out: &mut String) {
        match self {
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Value::UInt(u) => {
                let _ = write!(out, "{u}");
            }
            Value::Float(f) => out.push_str(&float_json(*f)),
            Value::Str(s) => out.push_str(&quote(s)),
            Value::Null => out.push_str("null"),
            Value::Seq(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write_json(out);
                }
                out.push(']');
            }
            Value::Struct(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&quote(k));
                    out.push(':');
                    v.write_json(out);
                }
                out.push('}');
            }
        }
    }

    /// YAML-like text, as `ros2 topic echo` prints: `name: value` per field, nested messages
    /// indented, sequences of scalars inline and of messages as `-` items.
    pub fn to_yaml(&self) -> String {
        let mut out = String::new();
        match self {
            Value::Struct(fields) if !fields.is_empty() => write_fields(fields, 0, &mut out),
            other => {
                out.push_str(&other.scalar_or_inline());
                out.push('\n');
            }
        }
        out
    }

    fn is_scalar(&self) -> bool {
        !matches!(self, Value::Seq(_) | Value::Struct(_))
    }

    fn scalar_or_inline(&self) -> String {
        match self {
            Value::Float(f) => float_text(*f),
            Value::Str(s) => quote(s),
            Value::Seq(items) if items.iter().all(Value::is_scalar) => {
                let parts: Vec<String> = items.iter().map(Value::scalar_or_inline).collect();
                format!("[{}]", parts.join(", "))
            }
            Value::Struct(fields) if fields.is_empty() => "{}".to_owned(),
            other => other.to_json(),
        }
    }
}

fn write_fields(fields: &[(String, Value)], indent: usize, out: &mut String) {
    let pad = "  ".repeat(indent);
    for (name, v) in fields {
        match v {
            Value::Struct(inner) if !inner.is_empty() => {
                let _ = writeln!(out, "{pad}{name}:");
                write_fields(inner, indent + 1, out);
            }
            Value::Seq(items) if !items.iter().all(Value::is_scalar) => {
                let _ = writeln!(out, "{pad}{name}:");
                for item in items {
                    match item {
                        Value::Struct(inner) if !inner.is_empty() => {
                            let _ = writeln!(out, "{pad}-");
                            write_fields(inner, indent + 1, out);
                        }
                        other => {
                            let _ = writeln!(out, "{pad}- {}", other.scalar_or_inline());
                        }
                    }
                }
            }
            other => {
                let _ = writeln!(out, "{pad}{name}: {}", other.scalar_or_inline());
            }
        }
    }
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

fn float_text(f: f64) -> String {
    if f.is_nan() {
        "NaN".to_owned()
    } else if f.is_infinite() {
        if f > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else if f == f.trunc() && f.abs() < 1e15 {
        format!("{f:.1}")
    } else if f.abs() >= 1e15 || f.abs() < 1e-5 {
        // Shortest round-trip digits with an exponent (plain digits would run to 300 places).
        format!("{f:e}")
    } else {
        format!("{f}")
    }
}

fn float_json(f: f64) -> String {
    if f.is_finite() {
        float_text(f)
    } else {
        quote(&float_text(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_as_yaml_and_json() {
        let v = Value::Struct(vec![
            (
                "header".into(),
                Value::Struct(vec![("frame_id".into(), Value::Str("imu\"1".into()))]),
            ),
            ("x".into(), Value::Float(1.0)),
            ("n".into(), Value::Int(-3)),
            (
                "cov".into(),
                Value::Seq(vec![Value::Float(0.5), Value::Float(f64::NAN)]),
            ),
            (
                "points".into(),
                Value::Seq(vec![Value::Struct(vec![("u".into(), Value::UInt(7))])]),
            ),
        ]);
        assert_eq!(
            v.to_yaml(),
            "header:\n  frame_id: \"imu\\\"1\"\nx: 1.0\nn: -3\ncov: [0.5, NaN]\npoints:\n-\n  u: 7\n"
        );
        assert_eq!(
            v.to_json(),
            r#"{"header":{"frame_id":"imu\"1"},"x":1.0,"n":-3,"cov":[0.5,"NaN"],"points":[{"u":7}]}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&v.to_json()).unwrap();
        assert_eq!(parsed["points"][0]["u"], 7);
        // Extremes stay JSON numbers that read back the same.
        for f in [f64::MAX, f64::MIN_POSITIVE, -1e300, 1.5e-7, 0.1] {
            let text = Value::Float(f).to_json();
            let back: f64 = serde_json::from_str(&text).unwrap();
            assert_eq!(back, f, "{text}");
        }
    }
}
