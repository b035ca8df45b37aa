//! `ferry record`: writes the messages of topics to an MCAP file until Ctrl-C (or a limit).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use ferry::Qos;
use ferry_record::{Compression, PayloadType, RecordOptions, Recorder};

use super::{delivery_words, wait_words, TransportOpt, POLL_SLICE};
use ferry_cmd::error::{note, Context, Result};
use ferry_cmd::signal;
use ferry_cmd::units::{format_size, parse_domain, parse_seconds, parse_size};

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Topics to record
    #[arg(required = true, value_name = "TOPIC")]
    pub topics: Vec<String>,

    /// The MCAP file to write (with --split-*, FILE's stem numbered: out_0.mcap, out_1.mcap, …).
    /// An existing file is not overwritten
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,

    /// What the messages are: raw bytes, or little-endian u32 arrays (shown as numbers by
    /// viewers; a message that is no whole number of u32 values is counted as refused)
    #[arg(long = "type", value_enum, default_value_t = TypeArg::Bytes)]
    pub payload: TypeArg,

    /// How chunks are compressed
    #[arg(long, value_enum, default_value_t = CompressionArg::Zstd)]
    pub compression: CompressionArg,

    /// latest never holds a publisher back (what the recorder misses is counted as skipped);
    /// reliable records everything, holding reliable publishers back while it is behind
    #[arg(long, value_parser = delivery_words(), default_value_t = ferry::Delivery::Latest)]
    pub delivery: ferry::Delivery,

    #[command(flatten)]
    pub transport: TransportOpt,

    /// How to wait for messages
    #[arg(long, value_parser = wait_words(), default_value_t = ferry::WaitStrategy::Block)]
    pub wait: ferry::WaitStrategy,

    /// Start a new file once this one holds this many bytes (K, M, G suffixes)
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub split_size: Option<usize>,

    /// Start a new file every S seconds
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub split_duration: Option<Duration>,

    /// With --split-*, keep only the newest N files (older ones are deleted)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_files: Option<u64>,

    /// Stop after S seconds [default: until Ctrl-C]
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub duration: Option<Duration>,

    /// Stop after N messages (all topics together)
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,

    /// Start each topic with the last K messages its publishers kept (`ferry pub --history N`)
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub history: usize,

    /// Domain: only topics of one domain see each other [default: $FERRY_DOMAIN, else "default"]
    #[arg(long, value_name = "D", value_parser = parse_domain)]
    pub domain: Option<String>,
}

/// `--type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TypeArg {
    Bytes,
    U32,
}

/// `--compression`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompressionArg {
    Zstd,
    Lz4,
    None,
}

pub fn run(args: RecordArgs) -> Result<()> {
    let node = super::node("ferry-record", args.domain.as_deref())?;
    let qos = Qos::default()
        .transport(args.transport.into())
        .delivery(args.delivery)
        .wait(args.wait)
        .history(args.history);
    let options = RecordOptions {
        payload: match args.payload {
            TypeArg::Bytes => PayloadType::Bytes,
            TypeArg::U32 => PayloadType::U32,
        },
        compression: match args.compression {
            CompressionArg::Zstd => Compression::Zstd,
            CompressionArg::Lz4 => Compression::Lz4,
            CompressionArg::None => Compression::None,
        },
        split_size: args.split_size.map(|s| s as u64),
        split_duration: args.split_duration,
        max_files: args.max_files.map(|n| n as usize),
        ..RecordOptions::default()
    };
    let mut recorder = Recorder::start(&node, &args.topics, &qos, &args.output, options)
        .context(format!("cannot record (domain {})", node.domain()))?;
    note!(
        "recording {} to {} (domain {}); Ctrl-C stops and closes the file",
        args.topics.join(", "),
        recorder
            .current_file()
            .map_or(String::new(), |p| p.display().to_string()),
        node.domain()
    );
    let start = Instant::now();
    let mut outcome = Ok(());
    while !signal::interrupted() {
        if args.duration.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
        let written: u64 = recorder.counts().iter().map(|(_, c)| c.messages).sum();
        if args.count.is_some_and(|c| written >= c) {
            break;
        }
        if let Err(e) = recorder.run_for(POLL_SLICE) {
            outcome = Err(e);
            break;
        }
    }
    // Whatever stopped the loop, the file is closed complete.
    let summary = recorder.finish();
    outcome.context("recording")?;
    let summary = summary.context("closing the recording")?;
    for (topic, c) in &summary.topics {
        let mut line = format!(
            "{topic}: {} messages, {}",
            c.messages,
            format_size(c.bytes as usize)
        );
        if c.skipped > 0 {
            line.push_str(&format!(", {} skipped (missed by the recorder)", c.skipped));
        }
        if c.refused > 0 {
            line.push_str(&format!(", {} refused (not whole u32 arrays)", c.refused));
        }
        note!("{line}");
    }
    let files: Vec<String> = summary
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    note!(
        "wrote {}{}",
        files.join(", "),
        if summary.deleted > 0 {
            format!(" ({} older files deleted)", summary.deleted)
        } else {
            String::new()
        }
    );
    Ok(())
}
