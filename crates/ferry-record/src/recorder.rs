//! `Recorder`: subscribes to topics and writes what arrives to MCAP files.
//!
//! One thread per topic receives (so that the receive time is taken when the message arrives,
//! whatever the writer is doing), stamps it, copies it out and hands it to the writer through a
//! queue bounded in bytes. The writer — the caller's thread, in [`Recorder::run_for`] — frames
//! each message (see [`crate::format`]) into the channel of its topic and publisher, compresses
//! chunks, closes a chunk at least once a second (so a crash loses at most about a second, and
//! `mcap recover` restores the rest), and starts a new file when the current one passed its size
//! or duration. [`Recorder::finish`] stops the receivers, writes what they handed over, the
//! counts as metadata, and the summary and index, so the file is complete.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferry::{
    Delivery, MessageEncoding, Node, PublisherId, PublisherInfo, Qos, Subscriber, TopicType,
};

use crate::format::{self, channel, meta, PayloadType};
use crate::queue::Queue;
use crate::Error;

/// How chunks are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Zstd,
    Lz4,
    None,
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Compression::Zstd => "zstd",
            Compression::Lz4 => "lz4",
            Compression::None => "none",
        }
    }

    fn mcap(self) -> Option<mcap::Compression> {
        match self {
            Compression::Zstd => Some(mcap::Compression::Zstd),
            Compression::Lz4 => Some(mcap::Compression::Lz4),
            Compression::None => None,
        }
    }
}

/// How a recording is written.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// What the messages are (the schema of every channel).
    pub payload: PayloadType,
    pub compression: Compression,
    /// A chunk is closed once it holds this many bytes (before compression), or after a second.
    pub chunk_size: u64,
    /// Start a new file once this one holds this many bytes (at the next chunk's end).
    pub split_size: Option<u64>,
    /// Start a new file once this one is this old.
    pub split_duration: Option<Duration>,
    /// Keep only the newest this many files (with splitting), deleting older ones.
    pub max_files: Option<usize>,
    /// Bytes of received messages the writer may fall behind by before the receivers wait.
    pub queue_bytes: usize,
}

impl Default for RecordOptions {
    fn default() -> RecordOptions {
        RecordOptions {
            payload: PayloadType::Bytes,
            compression: Compression::Zstd,
            chunk_size: 1 << 20,
            split_size: None,
            split_duration: None,
            max_files: None,
            queue_bytes: 64 << 20,
        }
    }
}

/// What was recorded of one topic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Messages written.
    pub messages: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// Messages the subscriber missed (latest delivery lapped by the publisher, UDP losses),
    /// as ferry reported them (`Sample::skipped`).
    pub skipped: u64,
    /// Messages received but not written: not a whole number of u32 values under `--type u32`.
    pub refused: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.messages += o.messages;
        self.bytes += o.bytes;
        self.skipped += o.skipped;
        self.refused += o.refused;
    }
}

/// The end of a recording.
#[derive(Debug, Clone)]
pub struct RecordSummary {
    /// The files written, oldest first (without those `max_files` deleted).
    pub files: Vec<PathBuf>,
    /// Per topic, in the order given.
    pub topics: Vec<(String, Counts)>,
    /// Files deleted to keep `max_files`.
    pub deleted: u64,
}

/// A received message on its way to the writer.
struct Received {
    topic: usize,
    publisher: PublisherId,
    /// Set on a publisher's first message.
    info: Option<PublisherInfo>,
    /// The topic's type, looked at on a publisher's first message.
    topic_type: Option<TopicType>,
    seq: u64,
    skipped: u64,
    log_time: u64,
    data: Vec<u8>,
}

enum Item {
    Message(Received),
    /// A receiver stopped on an error.
    Failed {
        topic: usize,
        error: String,
    },
}

/// How long a receiver waits before looking at the stop flag again.
const SLICE: Duration = Duration::from_millis(50);
/// A chunk is closed at least this often.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

pub struct Recorder {
    base: PathBuf,
    split: bool,
    options: RecordOptions,
    topics: Vec<String>,
    delivery: Delivery,
    transport: ferry::Transport,
    queue: Arc<Queue<Item>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    file: Option<OpenFile>,
    files: Vec<PathBuf>,
    deleted: u64,
    next_index: usize,
    totals: Vec<Counts>,
    publishers: HashMap<PublisherId, PublisherInfo>,
    /// The type of each typed publisher's topic, as it was when it first sent.
    types: HashMap<PublisherId, TopicType>,
}

struct OpenFile {
    path: PathBuf,
    writer: mcap::Writer<Counting<BufWriter<File>>>,
    started: Instant,
    started_ns: u64,
    last_flush: Instant,
    /// How far the file reaches (what `Counting` wrote).
    end: Arc<AtomicU64>,
    schema: u16,
    /// The schemas of typed topics written so far, by type hash.
    typed_schemas: HashMap<u64, u16>,
    channels: HashMap<(usize, PublisherId), ChannelState>,
    counts: Vec<Counts>,
}

struct ChannelState {
    id: u16,
    first_seq: u64,
    last_seq: u64,
    counts: Counts,
}

impl Recorder {
    /// Subscribes to `topics` with `qos` and opens the first file. With splitting
    /// (`split_size` or `split_duration`), files are named `STEM_0.EXT`, `STEM_1.EXT`, … beside
    /// `path`; otherwise `path` itself. An existing file is not overwritten.
    pub fn start(
        node: &Node,
        topics: &[String],
        qos: &Qos,
        path: &Path,
        options: RecordOptions,
    ) -> Result<Recorder, Error> {
        if topics.is_empty() {
            return Err(Error::Usage("name at least one topic to record".into()));
        }
        // A topic named twice would be recorded twice, each message in two channels.
        let twice = topics
            .iter()
            .enumerate()
            .find_map(|(i, t)| topics[..i].contains(t).then_some(t));
        if let Some(t) = twice {
            return Err(Error::Usage(format!("topic {t:?} is named twice")));
        }
        let mut subscribers = Vec::with_capacity(topics.len());
        for t in topics {
            let sub = node
                .subscriber(t, qos)
                .map_err(|e| Error::Subscribe(t.clone(), e))?;
            subscribers.push(sub);
        }
        let split = options.split_size.is_some() || options.split_duration.is_some();
        let mut rec = Recorder {
            base: path.to_owned(),
            split,
            queue: Arc::new(Queue::new(options.queue_bytes.max(1))),
            options,
            topics: topics.to_vec(),
            delivery: qos.delivery,
            transport: qos.transport,
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            file: None,
            files: Vec::new(),
            deleted: 0,
            next_index: 0,
            totals: vec![Counts::default(); topics.len()],
            publishers: HashMap::new(),
            types: HashMap::new(),
        };
        rec.open_next()?;
        for (i, sub) in subscribers.into_iter().enumerate() {
            let (queue, stop) = (Arc::clone(&rec.queue), Arc::clone(&rec.stop));
            let handle = std::thread::Builder::new()
                .name(format!("record-{i}"))
                .spawn(move || receive(i, sub, &queue, &stop))
                .map_err(|e| Error::Io("start a receiving thread".into(), e))?;
            rec.threads.push(handle);
        }
        Ok(rec)
    }

    /// The file being written.
    pub fn current_file(&self) -> Option<&Path> {
        self.file.as_ref().map(|f| f.path.as_path())
    }

    /// Counts so far, per topic (in the order given).
    pub fn counts(&self) -> Vec<(String, Counts)> {
        let mut out: Vec<(String, Counts)> = self
            .topics
            .iter()
            .cloned()
            .zip(self.totals.iter().copied())
            .collect();
        if let Some(f) = &self.file {
            for (o, c) in out.iter_mut().zip(&f.counts) {
                o.1.add(c);
            }
        }
        out
    }

    /// Writes what arrives for up to `timeout`; returns the messages written.
    pub fn run_for(&mut self, timeout: Duration) -> Result<u64, Error> {
        let deadline = Instant::now() + timeout;
        let mut written = 0;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let item = self.queue.pop(left.min(FLUSH_EVERY));
            if let Some(item) = item {
                self.write(item)?;
                written += 1;
            }
            self.maintain()?;
            if Instant::now() >= deadline {
                return Ok(written);
            }
        }
    }

    /// Stops receiving, writes what was received, and closes the file complete (counts as
    /// metadata, summary, index).
    pub fn finish(mut self) -> Result<RecordSummary, Error> {
        self.stop.store(true, Ordering::Relaxed);
        let mut failure = None;
        // Drain while the receivers end (one may wait for room in the queue).
        while self.threads.iter().any(|t| !t.is_finished()) {
            if let Some(item) = self.queue.pop(SLICE) {
                if let Err(e) = self.write(item) {
                    failure.get_or_insert(e);
                }
            }
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        while let Some(item) = self.queue.pop(Duration::ZERO) {
            if let Err(e) = self.write(item) {
                failure.get_or_insert(e);
            }
        }
        self.close_file(false)?;
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(RecordSummary {
            files: std::mem::take(&mut self.files),
            topics: self
                .topics
                .iter()
                .cloned()
                .zip(self.totals.iter().copied())
                .collect(),
            deleted: self.deleted,
        })
    }

    fn write(&mut self, item: Item) -> Result<(), Error> {
        let m = match item {
            Item::Message(m) => m,
            Item::Failed { topic, error } => {
                return Err(Error::Receive(self.topics[topic].clone(), error));
            }
        };
        if let Some(info) = m.info.clone() {
            self.publishers.insert(m.publisher, info);
        }
        // A typed topic's messages are stored as they are, under the type's own schema and
        // encoding; a raw-typed or untyped one's framed as `--type` says.
        if let Some(t) = m.topic_type.clone() {
            if t.encoding() != MessageEncoding::Raw {
                self.types.insert(m.publisher, t);
            }
        }
        let typed = self.types.get(&m.publisher).cloned();
        let kind = self.options.payload;
        let file = self.file.as_mut().expect("a file is open while recording");
        let counts = &mut file.counts[m.topic];
        counts.skipped += m.skipped;
        let prefix = match &typed {
            Some(_) => None,
            None => match format::prefix(kind, m.data.len()) {
                Some(p) => Some(p),
                None => {
                    counts.refused += 1;
                    return Ok(());
                }
            },
        };
        let key = (m.topic, m.publisher);
        if !file.channels.contains_key(&key) {
            let info = self
                .publishers
                .get(&m.publisher)
                .cloned()
                .unwrap_or_default();
            let mut md = BTreeMap::new();
            let type_name = typed.as_ref().map_or(kind.name(), |t| t.name());
            md.insert(channel::TYPE.to_owned(), type_name.to_owned());
            md.insert(channel::PUBLISHER.to_owned(), m.publisher.to_string());
            md.insert(
                channel::TRANSPORT.to_owned(),
                m.publisher.transport().name().to_owned(),
            );
            md.insert(channel::FIRST_SEQ.to_owned(), m.seq.to_string());
            if let Some(node) = info.node {
                md.insert(channel::NODE.to_owned(), node);
            }
            if let Some(addr) = info.address {
                md.insert(channel::ADDRESS.to_owned(), addr.to_string());
            }
            let topic = &self.topics[m.topic];
            let mcap_err = |e| Error::Mcap {
                path: file.path.clone(),
                source: e,
            };
            let (schema, encoding) = match &typed {
                None => (file.schema, format::MESSAGE_ENCODING),
                Some(t) => {
                    let id = match file.typed_schemas.get(&t.hash()) {
                        Some(id) => *id,
                        None => {
                            let enc = t.encoding().schema_encoding();
                            let id = file
                                .writer
                                .add_schema(t.name(), enc, t.schema())
                                .map_err(mcap_err)?;
                            file.typed_schemas.insert(t.hash(), id);
                            id
                        }
                    };
                    (id, t.encoding().name())
                }
            };
            let id = file
                .writer
                .add_channel(schema, topic, encoding, &md)
                .map_err(mcap_err)?;
            file.channels.insert(
                key,
                ChannelState {
                    id,
                    first_seq: m.seq,
                    last_seq: m.seq,
                    counts: Counts::default(),
                },
            );
        }
        let ch = file.channels.get_mut(&key).expect("inserted above");
        let header = mcap::records::MessageHeader {
            channel_id: ch.id,
            // The low 32 bits; the channel's first_seq and the wrapping steps give the rest.
            sequence: m.seq as u32,
            log_time: m.log_time,
            publish_time: m.log_time,
        };
        let mut data = Vec::with_capacity(format::PREFIX + m.data.len());
        data.extend_from_slice(prefix.as_ref().map_or(&[][..], |p| &p[..]));
        data.extend_from_slice(&m.data);
        file.writer
            .write_to_known_channel(&header, &data)
            .map_err(|e| Error::Mcap {
                path: file.path.clone(),
                source: e,
            })?;
        ch.last_seq = m.seq;
        ch.counts.messages += 1;
        ch.counts.bytes += m.data.len() as u64;
        ch.counts.skipped += m.skipped;
        let counts = &mut file.counts[m.topic];
        counts.messages += 1;
        counts.bytes += m.data.len() as u64;
        Ok(())
    }

    /// Closes a chunk once a second; starts the next file when this one is full or old.
    fn maintain(&mut self) -> Result<(), Error> {
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        if file.last_flush.elapsed() >= FLUSH_EVERY {
            file.writer.flush().map_err(|e| Error::Mcap {
                path: file.path.clone(),
                source: e,
            })?;
            file.last_flush = Instant::now();
        }
        let has_messages = file.counts.iter().any(|c| c.messages > 0);
        let full = self
            .options
            .split_size
            .is_some_and(|s| file.writer_len() >= s);
        let old = self
            .options
            .split_duration
            .is_some_and(|d| file.started.elapsed() >= d);
        if has_messages && (full || old) {
            self.close_file(true)?;
            self.open_next()?;
        }
        Ok(())
    }

    fn path_of(&self, index: usize) -> PathBuf {
        if !self.split {
            return self.base.clone();
        }
        let stem = self
            .base
            .file_stem()
            .map_or_else(|| "recording".into(), |s| s.to_string_lossy().into_owned());
        let ext = self
            .base
            .extension()
            .map_or_else(|| "mcap".into(), |s| s.to_string_lossy().into_owned());
        self.base.with_file_name(format!("{stem}_{index}.{ext}"))
    }

    fn open_next(&mut self) -> Result<(), Error> {
        let path = self.path_of(self.next_index);
        self.next_index += 1;
        let f = File::options()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    Error::Exists(path.clone())
                } else {
                    Error::Io(format!("create {}", path.display()), e)
                }
            })?;
        let options = mcap::WriteOptions::new()
            .compression(self.options.compression.mcap())
            .chunk_size(Some(self.options.chunk_size.max(1)))
            .profile(format::PROFILE)
            .library(format::library());
        let end = Arc::new(AtomicU64::new(0));
        let mut writer = options
            .create(Counting::new(BufWriter::new(f), Arc::clone(&end)))
            .map_err(|e| Error::Mcap {
                path: path.clone(),
                source: e,
            })?;
        let kind = self.options.payload;
        let schema = writer
            .add_schema(
                kind.schema_name(),
                format::SCHEMA_ENCODING,
                kind.schema_text().as_bytes(),
            )
            .map_err(|e| Error::Mcap {
                path: path.clone(),
                source: e,
            })?;
        self.file = Some(OpenFile {
            path,
            writer,
            started: Instant::now(),
            started_ns: format::now_ns(),
            last_flush: Instant::now(),
            end,
            schema,
            typed_schemas: HashMap::new(),
            channels: HashMap::new(),
            counts: vec![Counts::default(); self.topics.len()],
        });
        Ok(())
    }

    /// Closes the file being written; `another` when a next file opens after it (it then
    /// counts as one of the `max_files` kept).
    fn close_file(&mut self, another: bool) -> Result<(), Error> {
        let Some(mut file) = self.file.take() else {
            return Ok(());
        };
        let path = file.path.clone();
        let mcap_err = |e| Error::Mcap {
            path: path.clone(),
            source: e,
        };
        let mut md = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            md.insert(k.to_owned(), v);
        };
        put("ferry_version", env!("CARGO_PKG_VERSION").to_owned());
        put("log_time", meta::LOG_TIME.to_owned());
        put("publish_time", meta::PUBLISH_TIME.to_owned());
        put("sequence", meta::SEQUENCE.to_owned());
        put("topics", self.topics.join(","));
        put("type", self.options.payload.name().to_owned());
        put("delivery", self.delivery.name().to_owned());
        put("transport", self.transport.name().to_owned());
        put("compression", self.options.compression.name().to_owned());
        put("file_index", (self.next_index - 1).to_string());
        put("started_ns", file.started_ns.to_string());
        put("ended_ns", format::now_ns().to_string());
        file.writer
            .write_metadata(&mcap::records::Metadata {
                name: meta::FERRY.to_owned(),
                metadata: md,
            })
            .map_err(mcap_err)?;
        for (topic, c) in self.topics.iter().zip(&file.counts) {
            let md = BTreeMap::from([
                ("topic".to_owned(), topic.clone()),
                ("messages".to_owned(), c.messages.to_string()),
                ("bytes".to_owned(), c.bytes.to_string()),
                ("skipped".to_owned(), c.skipped.to_string()),
                ("refused".to_owned(), c.refused.to_string()),
            ]);
            file.writer
                .write_metadata(&mcap::records::Metadata {
                    name: meta::TOPIC.to_owned(),
                    metadata: md,
                })
                .map_err(mcap_err)?;
        }
        let mut channels: Vec<_> = file.channels.iter().collect();
        channels.sort_by_key(|(_, c)| c.id);
        for ((topic, publisher), c) in channels {
            let mut md = BTreeMap::from([
                ("topic".to_owned(), self.topics[*topic].clone()),
                ("channel_id".to_owned(), c.id.to_string()),
                ("publisher".to_owned(), publisher.to_string()),
                ("first_seq".to_owned(), c.first_seq.to_string()),
                ("last_seq".to_owned(), c.last_seq.to_string()),
                ("messages".to_owned(), c.counts.messages.to_string()),
                ("skipped".to_owned(), c.counts.skipped.to_string()),
            ]);
            if let Some(node) = self.publishers.get(publisher).and_then(|i| i.node.clone()) {
                md.insert("node".to_owned(), node);
            }
            file.writer
                .write_metadata(&mcap::records::Metadata {
                    name: meta::PUBLISHER.to_owned(),
                    metadata: md,
                })
                .map_err(mcap_err)?;
        }
        file.writer.finish().map_err(mcap_err)?;
        let out = file.writer.into_inner().inner;
        out.into_inner()
            .map_err(|e| Error::Io(format!("write {}", path.display()), e.into_error()))?
            .sync_all()
            .map_err(|e| Error::Io(format!("sync {}", path.display()), e))?;
        for (t, c) in self.totals.iter_mut().zip(&file.counts) {
            t.add(c);
        }
        self.files.push(path);
        if let Some(keep) = self.options.max_files.filter(|_| self.split) {
            // The file opened next, if one is, counts as one of them.
            while self.files.len() + usize::from(another) > keep.max(1) {
                let old = self.files.remove(0);
                std::fs::remove_file(&old)
                    .map_err(|e| Error::Io(format!("remove {}", old.display()), e))?;
                self.deleted += 1;
            }
        }
        Ok(())
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // Without `finish` (an error on the way): stop the receivers; the file stays as far as
        // it was flushed.
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl OpenFile {
    fn writer_len(&self) -> u64 {
        // Relaxed: written and read by this thread only (shared for lack of a getter).
        self.end.load(Ordering::Relaxed)
    }
}

/// One topic's receiving thread.
fn receive(topic: usize, mut sub: Subscriber, queue: &Queue<Item>, stop: &AtomicBool) {
    let mut known: Vec<PublisherId> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let got = match sub.recv_timeout(SLICE) {
            Ok(Some(sample)) => {
                let log_time = format::now_ns();
                let publisher = sample.publisher();
                Some((
                    publisher,
                    sample.seq(),
                    sample.skipped(),
                    log_time,
                    sample.to_vec(),
                ))
            }
            Ok(None) => None,
            Err(e) => {
                let _ = queue.push(
                    Item::Failed {
                        topic,
                        error: e.to_string(),
                    },
                    0,
                    Duration::MAX,
                );
                return;
            }
        };
        let Some((publisher, seq, skipped, log_time, data)) = got else {
            continue;
        };
        let first = !known.contains(&publisher);
        let info = first.then(|| {
            known.push(publisher);
            sub.publisher_info(publisher)
        });
        // A damaged type record in the directory leaves the topic recorded as bytes.
        let topic_type = if first {
            sub.topic_type().ok().flatten()
        } else {
            None
        };
        let bytes = data.len();
        let mut item = Item::Message(Received {
            topic,
            publisher,
            info,
            topic_type,
            seq,
            skipped,
            log_time,
            data,
        });
        // Wait for room, looking at the stop flag: a stop while the writer is behind still
        // writes this message (the writer drains until every receiver has ended).
        loop {
            match queue.push(item, bytes, SLICE) {
                Ok(()) => break,
                Err(back) => item = back,
            }
        }
    }
}

/// A writer that knows how far the file reaches.
struct Counting<W> {
    inner: W,
    pos: u64,
    end: Arc<AtomicU64>,
}

impl<W> Counting<W> {
    fn new(inner: W, end: Arc<AtomicU64>) -> Counting<W> {
        Counting { inner, pos: 0, end }
    }

    fn moved(&mut self) {
        // Relaxed: see `OpenFile::writer_len`.
        self.end.fetch_max(self.pos, Ordering::Relaxed);
    }
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.pos += n as u64;
        self.moved();
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Seek> Seek for Counting<W> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.pos = self.inner.seek(to)?;
        self.moved();
        Ok(self.pos)
    }
}
