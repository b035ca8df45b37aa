//! A topic's type on the command line (`--type`, `--schema`, `--encoding`), and decoding what
//! `ferry echo` receives by it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use ferry::{MessageEncoding, TopicType};
use ferry_types::{Codec, Value};

use ferry_cmd::error::{bail, Context, Result};

/// `--type NAME --schema FILE [--encoding E]`: the type an end declares.
#[derive(Debug, Clone, Args)]
pub struct TypeArgs {
    /// Declare the topic's type (e.g. sensor_msgs/msg/Imu), with --schema: an end of another
    /// type is refused, naming both
    #[arg(long = "type", value_name = "NAME", requires = "schema")]
    pub type_name: Option<String>,

    /// The type's schema: a ROS 2 message definition with its dependencies (cdr), a protobuf
    /// FileDescriptorSet (protobuf), or a JSON Schema (json)
    #[arg(long, value_name = "FILE", requires = "type_name")]
    pub schema: Option<PathBuf>,

    /// How the type's messages are encoded
    #[arg(long, value_name = "E", default_value = "cdr", value_parser = ["cdr", "protobuf", "json", "raw"])]
    pub encoding: String,
}

impl TypeArgs {
    /// The declared type, if any.
    pub fn topic_type(&self) -> Result<Option<TopicType>> {
        let (Some(name), Some(path)) = (&self.type_name, &self.schema) else {
            return Ok(None);
        };
        let encoding: MessageEncoding = self.encoding.parse()?;
        let meta = std::fs::metadata(path).context(format!("cannot read {}", path.display()))?;
        if meta.len() > ferry::MAX_SCHEMA as u64 {
            bail!(
                "{} is {} bytes; a schema has at most {}",
                path.display(),
                meta.len(),
                ferry::MAX_SCHEMA
            );
        }
        let schema = std::fs::read(path).context(format!("cannot read {}", path.display()))?;
        let t = TopicType::new(name, encoding, schema)?;
        // A ROS 2 definition or a descriptor set is read now, so that one ferry cannot use is
        // refused before anything is sent (a JSON Schema is carried as it is).
        if matches!(encoding, MessageEncoding::Cdr | MessageEncoding::Protobuf) {
            Codec::new(&t).context(format!("the schema {}", path.display()))?;
        }
        Ok(Some(t))
    }
}

/// How often an untyped topic's directory is looked at again for a type (and at once when a
/// new publisher sends).
const RECHECK: Duration = Duration::from_secs(1);

/// Decodes one topic's messages by its type, once the topic has one.
pub struct Decoder {
    domain: String,
    topic: String,
    codec: Option<Codec>,
    /// Why the type cannot be used (said once).
    problem: Option<String>,
    checked: Option<(Instant, ferry::PublisherId)>,
}

impl Decoder {
    pub fn new(domain: &str, topic: &str) -> Decoder {
        Decoder {
            domain: domain.to_owned(),
            topic: topic.to_owned(),
            codec: None,
            problem: None,
            checked: None,
        }
    }

    /// The message's fields, or `None` when the topic has no type this decoder can use (an
    /// untyped topic's directory is looked at again at most once a second, and when another
    /// publisher sends); a message that does not decode is an error, with the reason.
    pub fn decode(
        &mut self,
        publisher: ferry::PublisherId,
        bytes: &[u8],
    ) -> Option<std::result::Result<Value, String>> {
        let due = self
            .checked
            .map_or(true, |(t, p)| p != publisher || t.elapsed() >= RECHECK);
        if self.codec.is_none() && self.problem.is_none() && due {
            self.checked = Some((Instant::now(), publisher));
            self.look();
        }
        let codec = self.codec.as_ref()?;
        Some(codec.decode(bytes).map_err(|e| e.to_string()))
    }

    fn look(&mut self) {
        match ferry::admin::topic_type(&self.domain, &self.topic) {
            Ok(Some(t)) if t.encoding() == MessageEncoding::Raw => {}
            Ok(Some(t)) => match Codec::new(&t) {
                Ok(c) => self.codec = Some(c),
                Err(e) => self.problem = Some(format!("{t}: {e}")),
            },
            Ok(None) => {}
            Err(e) => self.problem = Some(e.to_string()),
        }
        if let Some(p) = &self.problem {
            ferry_cmd::error::note!(
                "ferry echo: cannot decode {} by its type, showing bytes: {p}",
                self.topic
            );
        }
    }
}
