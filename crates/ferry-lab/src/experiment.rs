//! The one shape every experiment has, and its type-erased form that the command line, the
//! suite, the peer processes, the agent and the report share.
//!
//! An experiment is a type implementing [`Experiment`]: a typed configuration (what the user
//! asks for; serde, so the suite keeps it as a value and the results record it), a typed setup
//! (how the run was actually made: resolved warm-ups, pinning, descriptions), a typed row, the
//! main side ([`Experiment::run`]), the peer side ([`Experiment::run_peer`], in another process
//! or on another machine, see [`crate::peer`]), the terminal table and the report section. The
//! report reads rows as the same Rust types the experiment wrote, so a renamed field fails to
//! compile instead of emptying a chart.
//!
//! [`Registered`] erases the types, for what is chosen by name at run time: a peer process told
//! which experiment to serve, and a results file read back for a report. The list of every
//! experiment is on the floor above them all ([`crate::registry`]).

use std::fmt::Debug;
use std::marker::PhantomData;
use std::path::Path;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::chart::{Section, SummaryLine};
use crate::error::{bail, Context, Error, Result};
use crate::peer::link::PeerLink;
use crate::Machine;

/// One experiment of the lab.
pub trait Experiment: Sized + 'static {
    /// Its name on the command line and in results (`ferry lab latency`).
    const NAME: &'static str;
    /// What it measures, for the report's heading.
    const TITLE: &'static str;
    /// Whether its peer may run on another machine (`--remote`, through `ferry lab agent`); the
    /// agent refuses the others.
    const ACROSS_MACHINES: bool = false;

    /// What the user asks for. `Default` is what `ferry lab NAME` measures without options.
    type Config: Serialize + DeserializeOwned + JsonSchema + Default + Clone + Debug;
    /// How the run was made, as the results record it.
    type Setup: Serialize + DeserializeOwned + JsonSchema + Debug;
    /// One line of results.
    type Row: Serialize + DeserializeOwned + JsonSchema + Debug;
    /// What the main side tells its peer process; [`NoPeer`] for an experiment without one.
    type PeerRequest: Serialize + DeserializeOwned + Debug;

    /// Refuses a configuration that cannot run, with a message naming the option.
    fn validate(config: &Self::Config) -> Result<()>;

    /// The main side: measures and returns what the results record.
    fn run(config: &Self::Config) -> Result<Measured<Self>>;

    /// The peer side, in the process `crate::peer` started (locally or through an agent).
    fn run_peer(request: Self::PeerRequest, link: &mut PeerLink) -> Result<()> {
        let _ = (request, link);
        Err(Error::msg(format!(
            "the {} experiment has no peer process",
            Self::NAME
        )))
    }

    /// The results as a table for the terminal.
    fn table(results: &Results<Self>) -> String;

    /// The results as a section of the report: sentences, tables and plots.
    fn section(results: &Results<Self>) -> Result<Section>;

    /// The report's summary: one line per figure that the study this experiment reproduces
    /// also gives (ferry's figure, the floor and the best peer measured in the same run, the
    /// study's own).
    fn summary(results: &Results<Self>) -> Vec<SummaryLine> {
        let _ = results;
        Vec::new()
    }
}

/// The head of an `impl Experiment`: its name and title, then `across machines` where its peer
/// may run on another machine, or `no peer` where it has no peer process ([`NoPeer`]). Its types
/// are the ones its module names as the trait does: `Config`, `Setup`, `Row` and `PeerRequest`.
///
/// ```ignore
/// use crate::experiment::{head, Experiment};
///
/// impl Experiment for Latency {
///     head!("latency", "One-way latency", across machines);
/// ```
macro_rules! head {
    ($name:literal, $title:literal) => {
        $crate::experiment::head!(@ $name, $title, PeerRequest);
    };
    ($name:literal, $title:literal, across machines) => {
        const ACROSS_MACHINES: bool = true;
        $crate::experiment::head!(@ $name, $title, PeerRequest);
    };
    ($name:literal, $title:literal, no peer) => {
        $crate::experiment::head!(@ $name, $title, $crate::experiment::NoPeer);
    };
    (@ $name:literal, $title:literal, $peer:ty) => {
        const NAME: &'static str = $name;
        const TITLE: &'static str = $title;
        type Config = Config;
        type Setup = Setup;
        type Row = Row;
        type PeerRequest = $peer;
    };
}
pub(crate) use head;

/// The peer request of an experiment that has no peer process (it cannot be built).
#[derive(Debug, Serialize, Deserialize)]
pub enum NoPeer {}

/// What the main side measured.
#[derive(Debug)]
pub struct Measured<E: Experiment> {
    pub setup: E::Setup,
    pub rows: Vec<E::Row>,
}

/// The version of the results format (docs/results.schema.json). Raised when a field changes
/// meaning or goes away; new fields do not raise it.
pub const SCHEMA_VERSION: u32 = 1;

/// The most samples an experiment records per row (each kept in memory, 8 bytes).
pub const MAX_SAMPLES: usize = 100_000_000;
/// The most warm-up exchanges an experiment makes per row and round.
pub const MAX_WARMUP: usize = 100_000_000;

/// Refuses `--samples` and `--warmup` past what an experiment keeps in memory or counts.
pub fn check_counts(samples: usize, warmup: usize) -> Result<()> {
    if samples > MAX_SAMPLES {
        bail!("--samples must be at most {MAX_SAMPLES}");
    }
    if warmup > MAX_WARMUP {
        bail!("--warmup must be at most {MAX_WARMUP}");
    }
    Ok(())
}

/// Refuses `--sizes` unless it names at least one size, each in `range` (which `range_words`
/// says, as "1 byte to 256M"), none twice.
pub fn check_sizes(
    sizes: &[usize],
    range: std::ops::RangeInclusive<usize>,
    range_words: &str,
) -> Result<()> {
    if sizes.is_empty() {
        bail!("--sizes: give at least one size");
    }
    for (i, &s) in sizes.iter().enumerate() {
        if !range.contains(&s) {
            bail!("--sizes: {s} bytes is out of range ({range_words})");
        }
        if sizes[..i].contains(&s) {
            bail!("--sizes: {s} is listed twice");
        }
    }
    Ok(())
}

/// One experiment's results: `{"schema", "ferry_version", "experiment", "machine", "request",
/// "config", "rows"}`. `request` is the configuration asked for (enough to run it again),
/// `config` how the run was made.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(bound = "")]
#[schemars(bound = "")]
pub struct Results<E: Experiment> {
    pub schema: u32,
    pub ferry_version: String,
    pub experiment: String,
    pub machine: Machine,
    pub request: E::Config,
    pub config: E::Setup,
    pub rows: Vec<E::Row>,
}

impl<E: Experiment> Results<E> {
    pub fn new(machine: Machine, request: E::Config, measured: Measured<E>) -> Self {
        Results {
            schema: SCHEMA_VERSION,
            ferry_version: env!("CARGO_PKG_VERSION").to_owned(),
            experiment: E::NAME.to_owned(),
            machine,
            request,
            config: measured.setup,
            rows: measured.rows,
        }
    }

    /// Reads results back from their JSON value, refusing another experiment's.
    pub fn from_value(value: Value) -> Result<Self> {
        let experiment = value.get("experiment").and_then(Value::as_str);
        if experiment != Some(E::NAME) {
            return Err(Error::msg(format!(
                "these are results of {}, not of {}",
                experiment.unwrap_or("no experiment"),
                E::NAME
            )));
        }
        serde_json::from_value(value).context(format!("results of {}", E::NAME))
    }
}

/// Validates `config`, measures, and returns the results.
pub fn measure<E: Experiment>(config: E::Config) -> Result<Results<E>> {
    E::validate(&config)?;
    let machine = Machine::probe();
    let measured = E::run(&config)?;
    Ok(Results::new(machine, config, measured))
}

/// `ferry lab NAME`: measures, prints the table, and writes the results to `json` if given.
pub fn run_and_print<E: Experiment>(config: E::Config, json: Option<&Path>) -> Result<()> {
    // Before the measurement: a path it could not be written to would lose it.
    if let Some(path) = json {
        check_json_path(path)?;
    }
    let results = measure::<E>(config)?;
    crate::table::print_out(&E::table(&results))?;
    if let Some(path) = json {
        write_json(path, &results)?;
        crate::note!("wrote {}", path.display());
    }
    Ok(())
}

/// Whether results can go to `path`: a regular file or nothing there yet, in a directory that
/// exists. Anything else (a device such as /dev/null, a directory, a link) is refused, as the
/// file written beside it would replace it.
pub fn check_json_path(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.is_file() => bail!(
            "{} is not a regular file; results are written to a file of their own (a file there \
             is replaced)",
            path.display()
        ),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
            match dir {
                Some(d) if !d.is_dir() => {
                    bail!(
                        "cannot write {}: {} is not a directory",
                        path.display(),
                        d.display()
                    )
                }
                _ => Ok(()),
            }
        }
        Err(e) => Err(e).context(format!("cannot write {}", path.display())),
    }
}

/// Writes pretty JSON to `path` through a temporary file, so that a reader never sees half.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    check_json_path(path)?;
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, text).context(format!("cannot write {}", Path::new(&tmp).display()))?;
    std::fs::rename(&tmp, path).context(format!("cannot write {}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// The registry

/// An experiment with its types erased, for what picks one by name.
pub trait Registered: Sync {
    fn name(&self) -> &'static str;
    fn title(&self) -> &'static str;
    /// Whether its peer may run on another machine.
    fn across_machines(&self) -> bool;
    /// Serves a peer request (JSON) in this process.
    fn serve_peer(&self, request: Value, link: &mut PeerLink) -> Result<()>;
    /// The report section of results read back as JSON.
    fn section(&self, results: Value) -> Result<Section>;
    /// The summary lines of results read back as JSON.
    fn summary(&self, results: Value) -> Result<Vec<SummaryLine>>;
    /// The JSON schema of this experiment's results.
    fn schema(&self) -> schemars::Schema;
}

/// An experiment type as a [`Registered`] value: `&Entry::<Latency>::NEW`.
pub struct Entry<E>(PhantomData<fn() -> E>);

impl<E: Experiment> Entry<E> {
    pub const NEW: Entry<E> = Entry(PhantomData);
}

impl<E: Experiment> Registered for Entry<E> {
    fn name(&self) -> &'static str {
        E::NAME
    }

    fn title(&self) -> &'static str {
        E::TITLE
    }

    fn across_machines(&self) -> bool {
        E::ACROSS_MACHINES
    }

    fn serve_peer(&self, request: Value, link: &mut PeerLink) -> Result<()> {
        let request: E::PeerRequest =
            serde_json::from_value(request).context(format!("a {} peer request", E::NAME))?;
        E::run_peer(request, link)
    }

    fn section(&self, results: Value) -> Result<Section> {
        E::section(&Results::<E>::from_value(results)?)
    }

    fn summary(&self, results: Value) -> Result<Vec<SummaryLine>> {
        Ok(E::summary(&Results::<E>::from_value(results)?))
    }

    fn schema(&self) -> schemars::Schema {
        schemars::schema_for!(Results<E>)
    }
}

/// A list of experiments, for what picks one by name at run time: a peer process told which
/// experiment to serve, an agent asked for one, a results file read back for a report. The lab's
/// own list is [`crate::registry::EXPERIMENTS`]; the parts that serve experiments receive it.
#[derive(Clone, Copy)]
pub struct Registry(pub &'static [&'static dyn Registered]);

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(|e| e.name()))
            .finish()
    }
}

impl Registry {
    /// Every experiment, in the order the suite runs them and the report shows them.
    pub fn iter(&self) -> impl Iterator<Item = &'static dyn Registered> + '_ {
        self.0.iter().copied()
    }

    /// The experiments whose peer may run on another machine.
    pub fn across_machines(&self) -> Vec<&'static str> {
        self.iter()
            .filter(|e| e.across_machines())
            .map(|e| e.name())
            .collect()
    }

    /// The experiment named `name`.
    pub fn find(&self, name: &str) -> Result<&'static dyn Registered> {
        self.iter().find(|e| e.name() == name).ok_or_else(|| {
            // The name may come from another machine: echoed no longer than any experiment's.
            let name: String = name.chars().take(40).collect();
            Error::msg(format!(
                "no experiment is named {name:?}; the lab has: {}",
                self.iter().map(|e| e.name()).collect::<Vec<_>>().join(", ")
            ))
        })
    }
}

/// What the experiments' tests share: example results as the report and the terminal meet them.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::chart::Plot;

    /// Results written as JSON and read back, as the report reads a results file, with what the
    /// experiment makes of them: the JSON as written, the results read back from it, the
    /// report's section, the terminal's table and the summary.
    pub(crate) fn read_back<E: Experiment>(
        results: &Results<E>,
    ) -> (Value, Results<E>, Section, String, Vec<SummaryLine>) {
        let json = serde_json::to_value(results).unwrap();
        let back = Results::<E>::from_value(json.clone()).unwrap();
        let section = E::section(&back).unwrap();
        let table = E::table(&back);
        let summary = E::summary(&back);
        (json, back, section, table, summary)
    }

    /// A change to an experiment's default configuration.
    pub(crate) type Change<E> = fn(&mut <E as Experiment>::Config);

    /// Asserts that `E::validate` accepts the default configuration and refuses each of `cases`:
    /// the default configuration with one change, and words the error must contain.
    pub(crate) fn assert_refused<E: Experiment>(cases: &[(Change<E>, &str)]) {
        if let Err(e) = E::validate(&E::Config::default()) {
            panic!("the default configuration is refused: {e}");
        }
        for (change, words) in cases {
            let mut config = E::Config::default();
            change(&mut config);
            let e = E::validate(&config).unwrap_err().to_string();
            assert!(e.contains(words), "{config:?}: {e}");
        }
    }

    /// Asserts that `text` (a sentence, a table, a plot's SVG, a study) contains each of `parts`,
    /// showing it where one is missing.
    pub(crate) fn assert_contains(text: &str, parts: &[&str]) {
        for part in parts {
            assert!(text.contains(part), "{part:?} missing from {text}");
        }
    }

    /// The section's one plot, which must be saved as `file`.
    pub(crate) fn only_plot<'a>(section: &'a Section, file: &str) -> &'a Plot {
        assert_eq!(section.plots.len(), 1);
        assert_eq!(section.plots[0].file, file);
        &section.plots[0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Results go to a regular file or a new one in a directory that exists; a device (this once
    /// replaced /dev/null with a file, as root), a directory or a missing directory is refused
    /// before anything is measured.
    #[test]
    fn results_go_only_to_a_regular_file() {
        let dir = std::env::temp_dir().join(format!("ferry-json-path-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fresh = dir.join("fresh.json");
        assert!(check_json_path(&fresh).is_ok());
        write_json(&fresh, &[1, 2]).unwrap();
        assert!(check_json_path(&fresh).is_ok(), "a file there is replaced");
        let link = dir.join("link.json");
        std::os::unix::fs::symlink(&fresh, &link).unwrap();
        for bad in [
            Path::new("/dev/null"),
            dir.as_path(),
            &dir.join("missing/x.json"),
            &link,
        ] {
            let e = check_json_path(bad).unwrap_err().to_string();
            assert!(e.contains(&bad.display().to_string()), "{e}");
            assert!(write_json(bad, &[1]).is_err(), "{}", bad.display());
        }
        use std::os::unix::fs::FileTypeExt;
        assert!(Path::new("/dev/null")
            .metadata()
            .unwrap()
            .file_type()
            .is_char_device());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
