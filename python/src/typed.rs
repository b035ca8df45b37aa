//! Typed topics from Python: `ferry.TopicType`, and messages as dicts (`Publisher.send_message`,
//! `Subscriber.recv_message`), encoded and decoded by ferry-types next to the zero-copy bytes.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use ferry_types::{Codec, Value};

use crate::errors::FerryError;

/// A topic's type: its name (e.g. "sensor_msgs/msg/Imu"), how its messages are encoded ("cdr",
/// "protobuf", "json" or "raw") and its schema (a ROS 2 message definition with its
/// dependencies, a protobuf FileDescriptorSet, a JSON Schema): given to `Qos(topic_type=...)`.
#[pyclass(frozen, module = "ferry", name = "TopicType")]
pub struct TopicType {
    pub inner: ferry::TopicType,
}

#[pymethods]
impl TopicType {
    #[new]
    #[pyo3(signature = (name, encoding="cdr", schema=None))]
    fn new(name: &str, encoding: &str, schema: Option<&Bound<'_, PyAny>>) -> PyResult<TopicType> {
        let bytes: Vec<u8> = match schema {
            None => Vec::new(),
            Some(s) => match s.cast::<PyString>() {
                Ok(text) => text.to_str()?.as_bytes().to_vec(),
                Err(_) => s
                    .extract::<Vec<u8>>()
                    .map_err(|_| PyValueError::new_err("schema is text (str) or bytes"))?,
            },
        };
        let encoding: ferry::MessageEncoding = encoding
            .parse()
            .map_err(|e: ferry::Error| PyValueError::new_err(e.to_string()))?;
        let inner = ferry::TopicType::new(name, encoding, bytes)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        // A schema ferry cannot read is refused here, not at the first message.
        if matches!(
            encoding,
            ferry::MessageEncoding::Cdr | ferry::MessageEncoding::Protobuf
        ) {
            Codec::new(&inner).map_err(|e| PyValueError::new_err(e.to_string()))?;
        }
        Ok(TopicType { inner })
    }

    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    #[getter]
    fn encoding(&self) -> &'static str {
        self.inner.encoding().name()
    }

    #[getter]
    fn schema_encoding(&self) -> &'static str {
        self.inner.encoding().schema_encoding()
    }

    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.schema())
    }

    /// The hash ends compare (64 bits).
    #[getter]
    fn hash(&self) -> u64 {
        self.inner.hash()
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<TopicType>()
            .is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __hash__(&self) -> u64 {
        self.inner.hash()
    }

    fn __repr__(&self) -> String {
        format!(
            "TopicType({:?}, {:?}, <{} bytes of schema>)",
            self.inner.name(),
            self.inner.encoding().name(),
            self.inner.schema().len()
        )
    }
}

/// A codec for `t`, when ferry decodes its encoding (not raw).
pub fn codec_of(t: &ferry::TopicType) -> PyResult<Option<Codec>> {
    if t.encoding() == ferry::MessageEncoding::Raw {
        return Ok(None);
    }
    Codec::new(t)
        .map(Some)
        .map_err(|e| FerryError::new_err(format!("{t}: {e}")))
}

/// A decoded message as Python objects: dicts (in the schema's field order), lists, ints,
/// floats, str, bool, None.
pub fn to_python(py: Python<'_>, v: &Value) -> PyResult<Py<PyAny>> {
    Ok(match v {
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Value::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Value::UInt(u) => u.into_pyobject(py)?.into_any().unbind(),
        Value::Float(f) => f.into_pyobject(py)?.into_any().unbind(),
        Value::Str(s) => s.into_pyobject(py)?.into_any().unbind(),
        Value::Null => py.None(),
        Value::Seq(items) => {
            let list = PyList::empty(py);
            for i in items {
                list.append(to_python(py, i)?)?;
            }
            list.into_any().unbind()
        }
        Value::Struct(fields) => {
            let d = PyDict::new(py);
            for (k, v) in fields {
                d.set_item(k, to_python(py, v)?)?;
            }
            d.into_any().unbind()
        }
    })
}

/// A message given as Python objects (what `json.dumps` takes), as the tree of fields a codec
/// encodes.
pub fn from_python(obj: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    let text: String = obj
        .py()
        .import("json")?
        .call_method1("dumps", (obj,))?
        .extract()?;
    serde_json::from_str(&text).map_err(|e| PyValueError::new_err(e.to_string()))
}
