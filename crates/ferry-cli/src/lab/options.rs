//! What every `ferry lab <experiment>` command has: the experiment's own options, read into its
//! configuration, and `--json`.
//!
//! An experiment's options are declared with [`options!`]: each is named as the field of the
//! configuration it sets and is unset when not given (`None`, or `false` for a flag), and the
//! configuration is the one of [`Options::defaults`] with every option given put in ([`Fill`]).
//! The defaults themselves live with the configuration (`Config::default()`), not here.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use ferry_lab::error::Result;
use ferry_lab::experiment::{run_and_print, Experiment as Measure};

/// The configuration an experiment's options are read into.
pub type ConfigOf<O> = <<O as Options>::Experiment as Measure>::Config;

/// An experiment's own options, read into its configuration.
pub trait Options: Args + std::fmt::Debug + Sized {
    /// The experiment they configure.
    type Experiment: Measure;

    /// The configuration the options given are put into: the configuration's defaults, unless
    /// an option given changes the default of another.
    fn defaults(&self) -> ConfigOf<Self> {
        ConfigOf::<Self>::default()
    }

    /// The configuration: the options given, the defaults for the others.
    fn into_config(self) -> ConfigOf<Self>
    where
        Self: Fill<ConfigOf<Self>>,
    {
        let defaults = self.defaults();
        self.fill(defaults)
    }
}

/// What is read from the command line into a configuration's value: the value given replaces
/// it, and without one it stays.
pub trait Fill<T> {
    fn fill(self, value: T) -> T;
}

/// An option: its value if given.
impl<T> Fill<T> for Option<T> {
    fn fill(self, value: T) -> T {
        self.unwrap_or(value)
    }
}

/// An option of an optional value (whose `None` means something, such as "chosen at run time").
impl<T> Fill<Option<T>> for Option<T> {
    fn fill(self, value: Option<T>) -> Option<T> {
        self.or(value)
    }
}

/// A flag: set if given, or if set already.
impl Fill<bool> for bool {
    fn fill(self, value: bool) -> bool {
        self || value
    }
}

/// A duration, into seconds.
impl Fill<f64> for Option<Duration> {
    fn fill(self, seconds: f64) -> f64 {
        self.map_or(seconds, |d| d.as_secs_f64())
    }
}

/// An optional duration, into seconds.
impl Fill<Option<f64>> for Option<Duration> {
    fn fill(self, seconds: Option<f64>) -> Option<f64> {
        self.map(|d| d.as_secs_f64()).or(seconds)
    }
}

/// Declares an experiment's options: the clap struct (its fields documented as `--help` shows
/// them, each named as the field of the configuration it sets), how it fills the configuration
/// (every field of the configuration, each from the option of its name), and the experiment it
/// configures ([`Options`], with the items that follow the struct, such as its own `defaults`).
macro_rules! options {
    (
        pub struct $name:ident fills $config:ident for $experiment:path {
            $(
                $(#[$($attribute:tt)*])*
                pub $field:ident: $type:ty,
            )*
        }
        $($options:tt)*
    ) => {
        #[derive(Debug, clap::Args)]
        pub struct $name {
            $(
                $(#[$($attribute)*])*
                pub $field: $type,
            )*
        }

        impl $crate::lab::options::Fill<$config> for $name {
            fn fill(self, defaults: $config) -> $config {
                $config {
                    $($field: $crate::lab::options::Fill::fill(self.$field, defaults.$field),)*
                }
            }
        }

        impl $crate::lab::options::Options for $name {
            type Experiment = $experiment;
            $($options)*
        }
    };
}
pub(super) use options;

/// `ferry lab <experiment>`: the experiment's own options, then those every experiment has.
#[derive(Debug, Args)]
pub struct Run<O: Options> {
    #[command(flatten)]
    pub options: O,

    /// Write the results as JSON to PATH
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

impl<O: Options + Fill<ConfigOf<O>>> Run<O> {
    /// Measures and prints the results (and writes them to --json).
    pub fn run(self) -> Result<()> {
        run_and_print::<O::Experiment>(self.options.into_config(), self.json.as_deref())
    }
}
