//! What ferry's commands share: `ferry pub`, `echo`, `record`, `topics` and the rest use it
//! without the lab, and the lab (`ferry-lab`) builds on it.
//!
//! - `error`: the error a command prints (`ferry: error: …`), `bail!`, `note!`, `Context`;
//! - `units`: sizes, rates, durations and names as the command line writes them;
//! - `signal`: Ctrl-C and SIGTERM, heard by long-running commands at their next check;
//! - `table`: aligned tables, and writing to a terminal that may close;
//! - `stats`: summaries (median, percentiles) of measured values.

pub mod error;
pub mod signal;
pub mod stats;
pub mod table;
pub mod units;
