//! Recording ferry topics to MCAP files, playing them back, and the rate and bandwidth windows
//! of `ferry hz` and `ferry bw`.
//!
//! - [`Recorder`] subscribes to topics and writes every message with its receive time,
//!   publisher and sequence number into a chunked, compressed MCAP file (a channel per topic
//!   and publisher, a schema per message type, counts as metadata at the end), splitting into
//!   numbered files by size or age.
//! - [`Player`] checks a file (as hostile input: [`reader`]) and publishes its messages again on
//!   an absolute schedule, reporting how late they went out.
//! - [`window`] holds the rate and bandwidth statistics.
//!
//! [`format`](mod@format) says what a recording holds and why.

pub mod format;
pub mod player;
mod queue;
pub mod reader;
pub mod recorder;
pub mod window;

use std::path::PathBuf;

pub use format::PayloadType;
pub use player::{Lateness, PlayOptions, PlayReport, Player, Rate, Scan};
pub use reader::ReadLimits;
pub use recorder::{Compression, Counts, RecordOptions, RecordSummary, Recorder};

/// What can go wrong when recording or playing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{0}")]
    Usage(String),
    #[error("{} exists already: remove it or choose another name", .0.display())]
    Exists(PathBuf),
    #[error("cannot {0}: {1}")]
    Io(String, #[source] std::io::Error),
    #[error("{}: {source}", path.display())]
    Mcap {
        path: PathBuf,
        source: mcap::McapError,
    },
    #[error("{} is not a usable MCAP recording (at record {record}): {detail}", path.display())]
    Malformed {
        path: PathBuf,
        record: u64,
        detail: String,
    },
    #[error("cannot subscribe to topic {0:?}: {1}")]
    Subscribe(String, #[source] ferry::Error),
    #[error("cannot publish on topic {0:?}: {1}")]
    Publish(String, #[source] ferry::Error),
    #[error("receiving topic {0:?} failed: {1}")]
    Receive(String, String),
    #[error("sending on topic {0:?} failed: {1}")]
    Send(String, #[source] ferry::SendError),
}
