//! What every `ferry lab <experiment>` command has: the experiment's own options, read into its
//! configuration, and `--json`.

use std::path::PathBuf;

use clap::Args;
use ferry_lab::error::Result;
use ferry_lab::experiment::{run_and_print, Experiment as Measure};

/// An experiment's own options, read into its configuration.
pub trait Options: Args + std::fmt::Debug {
    /// The experiment they configure.
    type Experiment: Measure;

    /// The configuration: the options given, the configuration's defaults for the others.
    fn into_config(self) -> <Self::Experiment as Measure>::Config;
}

/// `ferry lab <experiment>`: the experiment's own options, then those every experiment has.
#[derive(Debug, Args)]
pub struct Run<O: Options> {
    #[command(flatten)]
    pub options: O,

    /// Write the results as JSON to PATH
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

impl<O: Options> Run<O> {
    /// Measures and prints the results (and writes them to --json).
    pub fn run(self) -> Result<()> {
        run_and_print::<O::Experiment>(self.options.into_config(), self.json.as_deref())
    }
}
