//! Reading an MCAP file as hostile input: a streaming pass (mcap's sans-io `LinearReader`) with
//! every record bounded in size, chunk and data-section CRCs checked, at most
//! [`ReadLimits::max_channels`] channels and schemas, and names of bounded length. A file that is
//! not MCAP, truncated, corrupt or inconsistent (a message on an unknown channel, a ferry
//! message whose framing is wrong) is an error that says what and where; nothing is allocated
//! or looped over from a number in the file beyond those bounds.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};

use std::path::{Path, PathBuf};

use mcap::records::op;
use mcap::sans_io::linear_reader::{LinearReadEvent, LinearReader, LinearReaderOptions};

use crate::format::{self, PayloadType};
use crate::Error;

/// Bounds on what a file may make the reader hold.
#[derive(Debug, Clone, Copy)]
pub struct ReadLimits {
    /// The largest record (a chunk, compressed or not, or any other record).
    pub max_record: usize,
    /// Channels (and, separately, schemas) a file may define.
    pub max_channels: usize,
}

impl Default for ReadLimits {
    fn default() -> ReadLimits {
        ReadLimits {
            max_record: 256 << 20,
            max_channels: 4096,
        }
    }
}

/// The records parsed; the others (indexes, statistics, attachments, …) are skipped unread,
/// which also keeps them from mcap's record parsers (0.26 panics on a short attachment).
const WANTED: [u8; 5] = [
    op::SCHEMA,
    op::CHANNEL,
    op::MESSAGE,
    op::CHUNK,
    op::METADATA,
];

/// The longest topic, encoding or schema name kept.
const MAX_NAME: usize = 1024;
/// Bytes read from the file at a time.
const READ_SIZE: usize = 256 << 10;

/// How a channel's messages turn into payloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoding {
    /// One of ferry's: the framing is checked and removed.
    Ferry(PayloadType),
    /// Any other: the message's bytes as they are.
    Raw,
}

/// A channel of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelInfo {
    pub id: u16,
    pub topic: String,
    pub message_encoding: String,
    pub schema_name: String,
    pub decoding: Decoding,
    /// The type a typed topic was recorded with (its schema and encoding are a ROS 2
    /// definition with CDR, a protobuf descriptor set, or a JSON Schema with JSON), which `ferry
    /// play` declares again; `None` for ferry's own framings and anything else.
    pub topic_type: Option<ferry::TopicType>,
}

/// One message: its channel, its header fields and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub channel: u16,
    pub sequence: u32,
    pub log_time: u64,
    pub publish_time: u64,
    pub payload: Vec<u8>,
}

/// A metadata record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    pub name: String,
    pub entries: Vec<(String, String)>,
}

/// What a pass over the file yields.
#[derive(Debug)]
pub enum Event {
    /// A channel, when it is defined (before its first message).
    Channel(ChannelInfo),
    Message(Message),
    Metadata(Metadata),
}

/// A pass over a file, record by record.
pub struct McapReader<R: Read> {
    path: PathBuf,
    input: R,
    reader: LinearReader,
    limits: ReadLimits,
    schemas: HashMap<u16, (String, String, Vec<u8>)>,
    channels: HashMap<u16, ChannelInfo>,
    records: u64,
    done: bool,
    /// The records of the chunk being read, and where the next one starts.
    chunk: Vec<u8>,
    chunk_pos: usize,
}

impl McapReader<BufReader<File>> {
    /// Opens `path` for one pass.
    pub fn open(path: &Path, limits: ReadLimits) -> Result<Self, Error> {
        let f = File::open(path).map_err(|e| Error::Io(format!("open {}", path.display()), e))?;
        Ok(McapReader::new(path, BufReader::new(f), limits))
    }
}

impl<R: Read> McapReader<R> {
    /// A pass over `input`; `path` names it in errors.
    pub fn new(path: &Path, input: R, limits: ReadLimits) -> Self {
        // Chunks are opened here (`open_chunk`), not by mcap's reader: its walk through an
        // uncompressed chunk trusts the lengths of the records inside (a record longer than
        // what is left of its chunk overflows a subtraction in mcap 0.26).
        let options = LinearReaderOptions::default()
            .with_record_length_limit(limits.max_record)
            .with_emit_chunks(true)
            .with_validate_data_section_crc(true)
            .with_validate_summary_section_crc(true);
        McapReader {
            path: path.to_owned(),
            input,
            reader: LinearReader::new_with_options(options),
            limits,
            schemas: HashMap::new(),
            channels: HashMap::new(),
            records: 0,
            done: false,
            chunk: Vec::new(),
            chunk_pos: 0,
        }
    }

    /// The channels defined so far.
    pub fn channels(&self) -> &HashMap<u16, ChannelInfo> {
        &self.channels
    }

    fn malformed(&self, detail: impl Into<String>) -> Error {
        Error::Malformed {
            path: self.path.clone(),
            record: self.records,
            detail: detail.into(),
        }
    }

    /// The next event; `None` at the end of a complete file.
    pub fn next_event(&mut self) -> Option<Result<Event, Error>> {
        if self.done {
            return None;
        }
        let r = self.advance();
        if !matches!(r, Some(Ok(_))) {
            self.done = true;
        }
        r
    }

    fn advance(&mut self) -> Option<Result<Event, Error>> {
        loop {
            if self.chunk_pos < self.chunk.len() {
                match self.next_in_chunk() {
                    Ok(Some(ev)) => return Some(Ok(ev)),
                    Ok(None) => continue,
                    Err(e) => return Some(Err(e)),
                }
            }
            let (opcode, body) = match self.reader.next_event() {
                None => return None,
                Some(Err(e)) => {
                    let detail = match e {
                        mcap::McapError::UnexpectedEof => {
                            "it ends early (truncated, or still being written)".to_owned()
                        }
                        mcap::McapError::BadMagic => {
                            "it does not start with MCAP's magic bytes: not an MCAP file".to_owned()
                        }
                        other => other.to_string(),
                    };
                    return Some(Err(self.malformed(detail)));
                }
                Some(Ok(LinearReadEvent::ReadRequest(n))) => {
                    let buf = self.reader.insert(n.clamp(1, READ_SIZE));
                    match read_some(&mut self.input, buf) {
                        Ok(got) => self.reader.notify_read(got),
                        Err(e) => {
                            return Some(Err(Error::Io(format!("read {}", self.path.display()), e)))
                        }
                    }
                    continue;
                }
                // Owned, so that the record outlives the reader's buffer (a message's bytes are
                // copied once here; ferry's framing is then cut off in place).
                Some(Ok(LinearReadEvent::Record { data, opcode })) => {
                    if !WANTED.contains(&opcode) {
                        self.records += 1;
                        continue;
                    }
                    (
                        opcode,
                        mcap::parse_record(opcode, data).map(|r| r.into_owned()),
                    )
                }
            };
            self.records += 1;
            let record = match body {
                Ok(r) => r,
                Err(e) => {
                    return Some(Err(self.malformed(format!(
                        "record of type 0x{opcode:02x} is malformed: {e}"
                    ))))
                }
            };
            if let mcap::records::Record::Chunk { header, data } = record {
                if let Err(e) = self.open_chunk(&header, &data) {
                    return Some(Err(e));
                }
                continue;
            }
            match self.take(record) {
                Ok(Some(ev)) => return Some(Ok(ev)),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// Decompresses a chunk (at most `max_record` bytes, exactly as many as it says) and checks
    /// its CRC; its records are then read by `next_in_chunk`.
    fn open_chunk(
        &mut self,
        header: &mcap::records::ChunkHeader,
        data: &[u8],
    ) -> Result<(), Error> {
        let size = header.uncompressed_size;
        if size > self.limits.max_record as u64 {
            return Err(self.malformed(format!(
                "a chunk of {size} bytes (at most {} are read)",
                self.limits.max_record
            )));
        }
        let size = size as usize;
        let mut out = std::mem::take(&mut self.chunk);
        out.clear();
        let done = match header.compression.as_str() {
            "" => {
                out.extend_from_slice(data);
                Ok(())
            }
            "zstd" => zstd::stream::read::Decoder::new(data)
                .and_then(|d| d.take(size as u64 + 1).read_to_end(&mut out).map(drop)),
            "lz4" => lz4::Decoder::new(data)
                .and_then(|d| d.take(size as u64 + 1).read_to_end(&mut out).map(drop)),
            other => {
                return Err(self.malformed(format!(
                    "a chunk compressed with {:?} (ferry reads zstd, lz4 and none)",
                    bounded(other, "compression").unwrap_or_default()
                )))
            }
        };
        if let Err(e) = done {
            return Err(self.malformed(format!(
                "a {} chunk does not decompress: {e}",
                header.compression
            )));
        }
        if out.len() != size {
            return Err(self.malformed(format!(
                "a chunk says {size} bytes but holds {}{}",
                out.len().min(size),
                if out.len() > size { " and more" } else { "" }
            )));
        }
        if header.uncompressed_crc != 0 && crc32fast::hash(&out) != header.uncompressed_crc {
            return Err(self.malformed("a chunk's CRC does not match its contents"));
        }
        self.chunk = out;
        self.chunk_pos = 0;
        Ok(())
    }

    /// The next record of the current chunk, every length checked against what is left.
    fn next_in_chunk(&mut self) -> Result<Option<Event>, Error> {
        let rest = &self.chunk[self.chunk_pos..];
        if rest.len() < 9 {
            return Err(self.malformed("a chunk ends inside a record's header"));
        }
        let opcode = rest[0];
        let len = u64::from_le_bytes(rest[1..9].try_into().expect("8 bytes"));
        if len > (rest.len() - 9) as u64 {
            return Err(self.malformed(format!(
                "a record of {len} bytes in a chunk with {} left",
                rest.len() - 9
            )));
        }
        let body = &rest[9..9 + len as usize];
        self.chunk_pos += 9 + len as usize;
        self.records += 1;
        if !WANTED.contains(&opcode) || opcode == op::CHUNK {
            return if opcode == op::CHUNK {
                Err(self.malformed("a chunk inside a chunk"))
            } else {
                Ok(None)
            };
        }
        let record = match mcap::parse_record(opcode, body) {
            Ok(r) => r.into_owned(),
            Err(e) => {
                return Err(
                    self.malformed(format!("record of type 0x{opcode:02x} is malformed: {e}"))
                )
            }
        };
        self.take(record)
    }

    fn take(&mut self, record: mcap::records::Record<'_>) -> Result<Option<Event>, Error> {
        use mcap::records::Record;
        match record {
            Record::Schema { header, data } => {
                if header.id == 0 {
                    return Err(self.malformed("schema id 0 (reserved for none)"));
                }
                let entry = (
                    bounded(&header.name, "schema name").map_err(|d| self.malformed(d))?,
                    bounded(&header.encoding, "schema encoding").map_err(|d| self.malformed(d))?,
                    // A schema larger than a type may have is kept out: its channel plays as bytes.
                    if data.len() <= ferry::MAX_SCHEMA {
                        data.into_owned()
                    } else {
                        Vec::new()
                    },
                );
                match self.schemas.get(&header.id) {
                    Some(known) if *known != entry => {
                        Err(self
                            .malformed(format!("schema {} defined twice, differently", header.id)))
                    }
                    Some(_) => Ok(None),
                    None if self.schemas.len() >= self.limits.max_channels => {
                        Err(self
                            .malformed(format!("more than {} schemas", self.limits.max_channels)))
                    }
                    None => {
                        self.schemas.insert(header.id, entry);
                        Ok(None)
                    }
                }
            }
            Record::Channel(c) => {
                let (schema_name, schema_encoding, schema_data) = if c.schema_id == 0 {
                    (String::new(), String::new(), Vec::new())
                } else {
                    self.schemas.get(&c.schema_id).cloned().ok_or_else(|| {
                        self.malformed(format!(
                            "channel {} names schema {}, which is not defined before it",
                            c.id, c.schema_id
                        ))
                    })?
                };
                let ferry_kind = PayloadType::from_schema_name(&schema_name).filter(|_| {
                    c.message_encoding == format::MESSAGE_ENCODING
                        && schema_encoding == format::SCHEMA_ENCODING
                });
                let info = ChannelInfo {
                    id: c.id,
                    topic: bounded(&c.topic, "topic").map_err(|d| self.malformed(d))?,
                    message_encoding: bounded(&c.message_encoding, "message encoding")
                        .map_err(|d| self.malformed(d))?,
                    topic_type: match ferry_kind {
                        Some(_) => None,
                        None => recorded_type(
                            &schema_name,
                            &schema_encoding,
                            &c.message_encoding,
                            schema_data,
                        ),
                    },
                    schema_name,
                    decoding: ferry_kind.map_or(Decoding::Raw, Decoding::Ferry),
                };
                match self.channels.get(&c.id) {
                    Some(known) if *known != info => {
                        Err(self.malformed(format!("channel {} defined twice, differently", c.id)))
                    }
                    Some(_) => Ok(None),
                    None if self.channels.len() >= self.limits.max_channels => {
                        Err(self
                            .malformed(format!("more than {} channels", self.limits.max_channels)))
                    }
                    None => {
                        self.channels.insert(c.id, info.clone());
                        Ok(Some(Event::Channel(info)))
                    }
                }
            }
            Record::Message { header, data } => {
                let Some(ch) = self.channels.get(&header.channel_id) else {
                    return Err(self.malformed(format!(
                        "a message on channel {}, which is not defined before it",
                        header.channel_id
                    )));
                };
                let payload = match ch.decoding {
                    Decoding::Raw => data.into_owned(),
                    Decoding::Ferry(kind) => {
                        if let Err(d) = format::payload(kind, &data) {
                            return Err(self.malformed(format!(
                                "message (sequence {}) on topic {:?}: {d}",
                                header.sequence, ch.topic
                            )));
                        }
                        let mut v = data.into_owned();
                        v.drain(..format::PREFIX);
                        v
                    }
                };
                Ok(Some(Event::Message(Message {
                    channel: header.channel_id,
                    sequence: header.sequence,
                    log_time: header.log_time,
                    publish_time: header.publish_time,
                    payload,
                })))
            }
            Record::Metadata(m) => Ok(Some(Event::Metadata(Metadata {
                name: m.name,
                entries: m.metadata.into_iter().collect(),
            }))),
            _ => Ok(None),
        }
    }
}

/// Reads what is there (retrying interruptions); 0 at the end.
fn read_some(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match input.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}

fn bounded(s: &str, what: &str) -> Result<String, String> {
    if s.len() > MAX_NAME {
        return Err(format!("{what} of {} bytes (at most {MAX_NAME})", s.len()));
    }
    Ok(s.to_owned())
}

/// Reads a whole file: its channels, messages and metadata (for tests and small files; a
/// player streams instead).
pub fn read_all(path: &Path, limits: ReadLimits) -> Result<Contents, Error> {
    let mut reader = McapReader::open(path, limits)?;
    let mut out = Contents::default();
    while let Some(ev) = reader.next_event() {
        match ev? {
            Event::Channel(c) => out.channels.push(c),
            Event::Message(m) => out.messages.push(m),
            Event::Metadata(m) => out.metadata.push(m),
        }
    }
    Ok(out)
}

/// Everything [`read_all`] found.
#[derive(Debug, Default)]
pub struct Contents {
    pub channels: Vec<ChannelInfo>,
    pub messages: Vec<Message>,
    pub metadata: Vec<Metadata>,
}

impl Contents {
    /// The first metadata record named `name`, as a map.
    pub fn metadata(&self, name: &str) -> Option<HashMap<&str, &str>> {
        self.metadata.iter().find(|m| m.name == name).map(|m| {
            m.entries
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect()
        })
    }
}

/// The ferry type of a channel whose message and schema encodings are one of the pairs MCAP
/// names (`cdr` with `ros2msg`, `protobuf` with `protobuf`, `json` with `jsonschema`), if its
/// name and schema make one.
fn recorded_type(
    name: &str,
    schema_encoding: &str,
    message_encoding: &str,
    schema: Vec<u8>,
) -> Option<ferry::TopicType> {
    let encoding: ferry::MessageEncoding = message_encoding.parse().ok()?;
    if encoding == ferry::MessageEncoding::Raw || encoding.schema_encoding() != schema_encoding {
        return None;
    }
    ferry::TopicType::new(name, encoding, schema).ok()
}
