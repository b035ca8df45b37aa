//! `results.json`: everything a suite measured, as one document, the only input the report
//! needs (`ferry lab report` rebuilds a report from it, or from several machines' documents side
//! by side). Its JSON schema is published in docs/results.schema.json ([`schema`]).
//!
//! ```text
//! {"schema": 1, "ferry_version", "suite": {"level", "command", "seconds", "started_unix_s"},
//!  "runs": [{"step", "experiment", "status", "note", "seconds", "results"}]}
//! ```
//!
//! `results` is one experiment's results (`experiment::Results`: `{"schema", "ferry_version",
//! "experiment", "machine", "request", "config", "rows"}`), absent when the run failed or did not
//! run (`status` and `note` say why).

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::{Context, Error, Result};
use crate::experiment::SCHEMA_VERSION;
use crate::registry::EXPERIMENTS;
use crate::Machine;

/// The file name of the document in a report directory.
pub const FILE: &str = "results.json";

/// The largest results document read (a quick suite writes well under 1 MiB).
const MAX_BYTES: u64 = 256 << 20;

/// A suite's results.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SuiteResults {
    /// The version of this format; a reader refuses versions it does not know.
    pub schema: u32,
    pub ferry_version: String,
    pub suite: Suite,
    pub runs: Vec<Run>,
}

/// How the suite was run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Suite {
    /// `smoke`, `quick` or `full`.
    pub level: String,
    /// The command line.
    pub command: String,
    /// How long the whole suite took.
    pub seconds: f64,
    pub started_unix_s: u64,
}

/// What became of one step of the suite.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Run {
    /// The step's name: the experiment's, or another for a second run of one experiment
    /// (`hubs-2hosts`); also the stem of its files in the report directory.
    pub step: String,
    /// The experiment (`ferry lab EXPERIMENT`).
    pub experiment: String,
    pub status: Status,
    /// Why it failed or did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub seconds: f64,
    /// The experiment's results, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Ok,
    Failed,
    /// Not run at this level of the suite, or left out with `--skip`.
    LeftOut,
}

impl Run {
    /// The status as the report's table says it.
    pub fn describe(&self) -> String {
        match (self.status, &self.note) {
            (Status::Ok, _) => "ok".to_owned(),
            (Status::Failed, Some(n)) => format!("failed: {n}"),
            (Status::Failed, None) => "failed".to_owned(),
            (Status::LeftOut, Some(n)) => n.clone(),
            (Status::LeftOut, None) => "left out".to_owned(),
        }
    }
}

impl SuiteResults {
    pub fn new(suite: Suite, runs: Vec<Run>) -> SuiteResults {
        SuiteResults {
            schema: SCHEMA_VERSION,
            ferry_version: env!("CARGO_PKG_VERSION").to_owned(),
            suite,
            runs,
        }
    }

    /// Reads a results document: `path` is the file, or a report directory holding one.
    pub fn read(path: &Path) -> Result<SuiteResults> {
        let file: PathBuf = if path.is_dir() {
            path.join(FILE)
        } else {
            path.to_owned()
        };
        let meta = std::fs::metadata(&file).context(format!("cannot read {}", file.display()))?;
        if !meta.is_file() {
            return Err(Error::msg(format!(
                "{} is not a regular file; give a results.json or the report directory holding one",
                file.display()
            )));
        }
        // No more than a document holds is read, whatever the size said a moment ago.
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(
                std::fs::File::open(&file).context(format!("cannot read {}", file.display()))?,
                MAX_BYTES + 1,
            ),
            &mut bytes,
        )
        .context(format!("cannot read {}", file.display()))?;
        if bytes.len() as u64 > MAX_BYTES {
            return Err(Error::msg(format!(
                "{} is more than a results document holds ({MAX_BYTES} bytes)",
                file.display()
            )));
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::msg(format!("{} is not JSON (not UTF-8)", file.display())))?;
        let value: Value =
            serde_json::from_str(&text).context(format!("{} is not JSON", file.display()))?;
        if value.is_array() {
            return Err(Error::msg(format!(
                "{} is in the format of ferry before results documents had a schema; measure again with this ferry",
                file.display()
            )));
        }
        match value.get("schema").and_then(Value::as_u64) {
            Some(v) if v == u64::from(SCHEMA_VERSION) => {}
            Some(v) => {
                return Err(Error::msg(format!(
                    "{} is in version {v} of the results format; this ferry reads version {SCHEMA_VERSION}",
                    file.display()
                )))
            }
            None => {
                return Err(Error::msg(format!(
                    "{} is not a ferry lab results document (no \"schema\")",
                    file.display()
                )))
            }
        }
        if value.get("suite").is_none() && value.get("experiment").is_some() {
            return Err(Error::msg(format!(
                "{} holds the results of one experiment (its --json); `ferry lab report` reads \
                 what a suite run writes: the results.json of `ferry lab`, or its report directory",
                file.display()
            )));
        }
        serde_json::from_value(value).context(format!("{}", file.display()))
    }

    /// The machine the suite ran on, from its first results.
    pub fn machine(&self) -> Option<Machine> {
        self.runs
            .iter()
            .filter_map(|r| r.results.as_ref()?.get("machine"))
            .find_map(|m| serde_json::from_value(m.clone()).ok())
    }

    /// A short name for the machine: its host name, or "unknown".
    pub fn label(&self) -> String {
        self.machine()
            .map(|m| m.hostname)
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "unknown".to_owned())
    }
}

/// The JSON schema of results documents and of every experiment's results (docs/results.schema.json,
/// printed by `ferry lab schema`).
pub fn schema() -> Value {
    let mut root =
        serde_json::to_value(schemars::schema_for!(SuiteResults)).expect("a schema is JSON");
    let experiments: Vec<Value> = EXPERIMENTS
        .iter()
        .map(|e| {
            let mut s = serde_json::to_value(e.schema()).expect("a schema is JSON");
            if let Some(obj) = s.as_object_mut() {
                obj.remove("$schema");
                obj.insert(
                    "title".to_owned(),
                    json!(format!("Results of {}", e.name())),
                );
            }
            s
        })
        .collect();
    if let Some(obj) = root.as_object_mut() {
        obj.insert(
            "$id".to_owned(),
            json!("https://example.invalid/ferry/results.schema.json"),
        );
        obj.insert(
            "description".to_owned(),
            json!("The results of a ferry lab suite (results.json). Each run's `results` is one experiment's results; `experimentResults` gives their schemas, one per experiment, chosen by the `experiment` field."),
        );
        obj.insert("experimentResults".to_owned(), Value::Array(experiments));
    }
    root
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> SuiteResults {
        SuiteResults::new(
            Suite {
                level: "quick".to_owned(),
                command: "ferry lab".to_owned(),
                seconds: 1.0,
                started_unix_s: 0,
            },
            vec![
                Run {
                    step: "latency".to_owned(),
                    experiment: "latency".to_owned(),
                    status: Status::Ok,
                    note: None,
                    seconds: 0.5,
                    results: Some(serde_json::to_value(crate::latency::example()).unwrap()),
                },
                Run {
                    step: "cycle".to_owned(),
                    experiment: "cycle".to_owned(),
                    status: Status::LeftOut,
                    note: Some("left out of the smoke suite".to_owned()),
                    seconds: 0.0,
                    results: None,
                },
            ],
        )
    }

    #[test]
    fn documents_read_back_and_old_or_foreign_ones_are_refused() {
        let dir = std::env::temp_dir().join(format!("ferry-results-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(FILE);
        crate::experiment::write_json(&file, &doc()).unwrap();
        let back = SuiteResults::read(&dir).unwrap();
        assert_eq!(back.runs.len(), 2);
        assert_eq!(back.runs[1].describe(), "left out of the smoke suite");
        assert!(!back.label().is_empty());
        for (text, says) in [
            ("[]", "before results documents had a schema"),
            ("{\"schema\": 99}", "version 99"),
            ("{\"rows\": []}", "not a ferry lab results document"),
            ("not json", "is not JSON"),
            (
                "{\"schema\": 1, \"experiment\": \"latency\", \"rows\": []}",
                "the results of one experiment",
            ),
        ] {
            std::fs::write(&file, text).unwrap();
            let err = SuiteResults::read(&file).unwrap_err().to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
        // A device is not read (/dev/zero would be read without end).
        for path in ["/dev/zero", "/dev/null"] {
            let err = SuiteResults::read(Path::new(path)).unwrap_err().to_string();
            assert!(err.contains("not a regular file"), "{path}: {err}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// docs/results.schema.json is what this build generates (regenerate it with
    /// `ferry lab schema > docs/results.schema.json`).
    #[test]
    fn the_published_schema_is_current() {
        let published = include_str!("../../../docs/results.schema.json");
        let published: Value = serde_json::from_str(published).unwrap();
        assert!(
            published == schema(),
            "docs/results.schema.json is out of date: run `ferry lab schema > docs/results.schema.json`"
        );
    }

    #[test]
    fn the_schema_names_every_experiment() {
        let s = schema();
        let titles: Vec<&str> = s["experimentResults"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["title"].as_str().unwrap())
            .collect();
        for e in EXPERIMENTS.iter() {
            assert!(titles.contains(&format!("Results of {}", e.name()).as_str()));
        }
        assert!(s["properties"]["runs"].is_object());
    }
}
