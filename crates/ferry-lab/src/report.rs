//! The suite's report: one CSV per experiment, SVG plots (plotters, SVG backend, no fonts
//! needed: text stays SVG `<text>`), and a self-contained `index.html` (inline CSS, no scripts,
//! nothing fetched) that shows the machine, the configuration, every plot, and for each
//! experiment a sentence that sets the result beside the study it reproduces.
//!
//! Everything here works on the results JSON (`serde_json::Value`), so it draws whatever an
//! experiment wrote; an experiment it has no plot for still gets its CSV and a table.
//! The plots are the experiments' own ([`crate::chart`]); this module lays them out on the page.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::chart::{Section, SummaryLine};
use crate::error::{Context, Result};
use crate::experiment::write_json;
use crate::registry::EXPERIMENTS;
use crate::results::{Status, SuiteResults};
use crate::studies;

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).context(format!("cannot write {}", path.display()))
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key)?.as_str()
}

fn rows(v: &Value) -> &[Value] {
    v.get("rows")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

// ---------------------------------------------------------------------------------------------
// CSV

/// The scalar fields of every row, one column each (arrays and objects are left out: per-round
/// details stay in the JSON).
pub fn csv(rows: &[Value]) -> String {
    // The identifying columns first, then the rest in the order serde_json gives them.
    let mut cols: Vec<String> = Vec::new();
    for key in [
        "experiment",
        "app",
        "kind",
        "transport",
        "wait",
        "size_bytes",
        "round",
    ] {
        if rows
            .iter()
            .any(|r| r.get(key).is_some_and(|v| !v.is_array() && !v.is_object()))
        {
            cols.push(key.to_owned());
        }
    }
    for r in rows {
        if let Some(obj) = r.as_object() {
            for (k, v) in obj {
                if !v.is_array() && !v.is_object() && !cols.contains(k) {
                    cols.push(k.clone());
                }
            }
        }
    }
    let cell = |v: Option<&Value>| -> String {
        match v {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => {
                if s.contains([',', '"', '\n']) {
                    format!("\"{}\"", s.replace('"', "\"\""))
                } else {
                    s.clone()
                }
            }
            Some(other) => other.to_string(),
        }
    };
    let mut out = cols.join(",");
    out.push('\n');
    for r in rows {
        let line: Vec<String> = cols.iter().map(|c| cell(r.get(c))).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

/// The section of one experiment's results; its SVG files are named after `stem` (the
/// experiment's name, or the suite's name for a second run of it).
pub fn section(v: &Value, stem: &str) -> Result<Section> {
    let name = text(v, "experiment").unwrap_or("unknown");
    Ok(EXPERIMENTS
        .find(name)?
        .section(v.clone())?
        .named_after(name, stem))
}

// ---------------------------------------------------------------------------------------------
// The report directory

const CSS: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;max-width:1560px;margin:24px auto;padding:0 24px;color:#222;line-height:1.45}\
h1{margin-bottom:4px}h2{margin-top:40px;border-bottom:2px solid #ddd;padding-bottom:4px}\
table{border-collapse:collapse;margin:8px 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;vertical-align:top}\
.rows{overflow-x:auto}.rows td{white-space:nowrap}\
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}\
.study{background:#f5f8fc;border-left:4px solid #1f77b4;padding:8px 12px;font-size:15px}\
.fail{background:#fdf1f1;border-left:4px solid #d62728;padding:8px 12px}\
figure{margin:12px 0}figure img{max-width:100%;border:1px solid #ddd}figcaption{font-size:13px;color:#555}\
pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:12px}.muted{color:#777}\
table.summary{width:100%;table-layout:auto}table.summary td,table.summary th{text-align:left;white-space:normal}\
table.summary td.fig{min-width:110px}table.summary td.cite{font-size:12px;color:#444;min-width:260px}";

/// The name of each document's machine in a report: its host name, with its CPUs where two
/// machines share a host name (virtual machines often do), and a number where that still does
/// not tell them apart.
fn labels(docs: &[SuiteResults]) -> Vec<String> {
    let unique = |names: &[String]| {
        names
            .iter()
            .enumerate()
            .all(|(i, n)| !names[..i].contains(n))
    };
    let mut names: Vec<String> = docs.iter().map(SuiteResults::label).collect();
    if unique(&names) {
        return names;
    }
    for (name, d) in names.iter_mut().zip(docs) {
        if let Some(m) = d.machine() {
            let _ = write!(name, ", {} × {}", m.cpus, m.cpu_model);
        }
    }
    if !unique(&names) {
        for (i, name) in names.iter_mut().enumerate() {
            let _ = write!(name, " #{}", i + 1);
        }
    }
    names
}

/// The machine table's rows: a heading and one cell per document.
fn machine_rows(docs: &[SuiteResults]) -> String {
    let machines: Vec<Option<crate::Machine>> = docs.iter().map(SuiteResults::machine).collect();
    let mut html = String::from("<table>");
    if docs.len() > 1 {
        html.push_str("<tr><th></th>");
        for label in labels(docs) {
            let _ = write!(html, "<th>{}</th>", esc(&label));
        }
        html.push_str("</tr>");
    }
    let mut row = |name: &str, cell: &dyn Fn(&crate::Machine) -> String| {
        let _ = write!(html, "<tr><th>{name}</th>");
        for m in &machines {
            let _ = write!(
                html,
                "<td>{}</td>",
                esc(&m.as_ref().map_or("?".to_owned(), cell))
            );
        }
        html.push_str("</tr>");
    };
    row("host", &|m| m.hostname.clone());
    row("CPU", &|m| m.cpu_model.clone());
    row("CPUs online / allowed", &|m| {
        format!(
            "{} / {}",
            m.cpus,
            m.allowed_cpus
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(",")
        )
    });
    row("memory", &|m| {
        m.memory_bytes.map_or("?".into(), |b| {
            format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
        })
    });
    row("kernel", &|m| format!("{} {} ({})", m.os, m.kernel, m.arch));
    row("virtualized", &|m| m.virtualized.to_string());
    row("clock source", &|m| {
        m.clocksource.clone().unwrap_or_default()
    });
    html.push_str("</table>\n");
    html
}

/// The summary: for every run with results, its experiment's headline lines, with each
/// machine's figures side by side.
fn summary_table(docs: &[SuiteResults]) -> String {
    // (step, what) in order of first appearance → per document, the line.
    let mut keys: Vec<(String, String)> = Vec::new();
    let mut cells: Vec<Vec<Option<SummaryLine>>> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    for (di, doc) in docs.iter().enumerate() {
        for run in &doc.runs {
            let Some(results) = &run.results else {
                continue;
            };
            let lines = match EXPERIMENTS.find(&run.experiment) {
                Ok(e) => match e.summary(results.clone()) {
                    Ok(lines) => lines,
                    Err(err) => {
                        notes.push(format!("{}: {err}", run.step));
                        continue;
                    }
                },
                Err(_) => continue,
            };
            for line in lines {
                let key = (run.step.clone(), line.what.clone());
                let at = match keys.iter().position(|k| *k == key) {
                    Some(i) => i,
                    None => {
                        keys.push(key);
                        cells.push(vec![None; docs.len()]);
                        keys.len() - 1
                    }
                };
                cells[at][di] = Some(line);
            }
        }
    }
    if keys.is_empty() {
        return String::new();
    }
    let mut html = String::from("<h2 id=\"summary\">Summary</h2>\n<p class=\"muted\">ferry's figure, the floor (the raw baseline) and the best other system, each measured in the same run on this machine, beside the figure the study gives for its own machine.</p>\n<table class=\"summary\"><tr><th>experiment</th><th>measured</th>");
    for label in labels(docs) {
        let suffix = if docs.len() > 1 {
            format!(" ({})", esc(&label))
        } else {
            String::new()
        };
        let _ = write!(
            html,
            "<th>ferry{suffix}</th><th>floor{suffix}</th><th>best other{suffix}</th>"
        );
    }
    html.push_str("<th>the study</th></tr>\n");
    let mut previous_study: Option<(String, String)> = None;
    for ((step, what), row) in keys.iter().zip(&cells) {
        let _ = write!(
            html,
            "<tr><td><a href=\"#{0}\">{0}</a></td><td>{1}</td>",
            esc(step),
            esc(what)
        );
        for cell in row {
            let get = |f: &dyn Fn(&SummaryLine) -> Option<String>| {
                esc(&cell.as_ref().and_then(f).unwrap_or_else(|| "–".to_owned()))
            };
            let _ = write!(
                html,
                "<td class=\"fig\">{}</td><td class=\"fig\">{}</td><td class=\"fig\">{}</td>",
                get(&|l| Some(l.ferry.clone())),
                get(&|l| l.floor.clone()),
                get(&|l| l.best_peer.clone())
            );
        }
        let study = row
            .iter()
            .flatten()
            .find_map(|l| l.study.clone())
            .unwrap_or_else(|| "–".to_owned());
        // A study's figure said once per experiment: the next lines that repeat it say so.
        let repeated = previous_study
            .as_ref()
            .is_some_and(|(s, t)| s == step && *t == study && study != "–");
        let shown = if repeated {
            "(as above)"
        } else {
            study.as_str()
        };
        let _ = writeln!(html, "<td class=\"cite\">{}</td></tr>", esc(shown));
        previous_study = Some((step.clone(), study));
    }
    html.push_str("</table>\n");
    for n in notes {
        let _ = writeln!(html, "<p class=\"fail\">{}</p>", esc(&n));
    }
    html
}

/// Writes the CSVs, the SVGs and index.html for one or more results documents into `out`
/// (several: one per machine, side by side). Each document's own results.json is its input
/// and is not rewritten here.
pub fn write(out: &Path, docs: &[SuiteResults]) -> Result<()> {
    std::fs::create_dir_all(out)
        .map_err(|e| crate::error::Error::msg(format!("cannot create {}: {e}", out.display())))?;
    let several = docs.len() > 1;
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ferry lab report</title><style>{CSS}</style></head><body>\n<h1>ferry lab report</h1>\n"
    );
    let labels = labels(docs);
    // A document's label, escaped, where several documents need telling apart.
    let shown = |label: &str| several.then(|| esc(label));
    for (d, label) in docs.iter().zip(&labels) {
        let _ = writeln!(
            html,
            "<p class=\"muted\">{}ferry {} · {} suite · {:.0} s · <code>{}</code></p>",
            shown(label).map_or(String::new(), |l| format!("{l}: ")),
            esc(&d.ferry_version),
            esc(&d.suite.level),
            d.suite.seconds,
            esc(&d.suite.command),
        );
    }
    html.push_str(&summary_table(docs));
    html.push_str("<h2>Machine</h2>\n");
    html.push_str(&machine_rows(docs));
    html.push_str("<h2>Experiments</h2>\n<table><tr><th>experiment</th>");
    for label in &labels {
        let _ = write!(
            html,
            "<th>status{0}</th><th>seconds{0}</th><th>files{0}</th>",
            shown(label).map_or(String::new(), |l| format!(" ({l})"))
        );
    }
    html.push_str("</tr>\n");
    // Steps in order of first appearance over all documents.
    let mut steps: Vec<&str> = Vec::new();
    for d in docs {
        for r in &d.runs {
            if !steps.contains(&r.step.as_str()) {
                steps.push(&r.step);
            }
        }
    }
    // The file stem of a step's files for document `di`.
    let stem = |step: &str, di: usize| {
        if several {
            format!("{step}-m{}", di + 1)
        } else {
            step.to_owned()
        }
    };
    for step in &steps {
        let _ = write!(html, "<tr><td><a href=\"#{0}\">{0}</a></td>", esc(step));
        for (di, d) in docs.iter().enumerate() {
            match d.runs.iter().find(|r| r.step == *step) {
                Some(r) => {
                    let files = if r.results.is_some() {
                        format!(
                            "<a href=\"{0}.json\">{0}.json</a> · <a href=\"{0}.csv\">{0}.csv</a>",
                            stem(step, di)
                        )
                    } else {
                        String::new()
                    };
                    let _ = write!(
                        html,
                        "<td>{}</td><td>{:.1}</td><td>{files}</td>",
                        esc(&r.describe()),
                        r.seconds
                    );
                }
                None => html.push_str("<td>–</td><td></td><td></td>"),
            }
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table>\n<p class=\"muted\">All results: <a href=\"results.json\">results.json</a> (one document per suite; its schema is docs/results.schema.json in ferry's sources, or <code>ferry lab schema</code>). <code>ferry lab report results.json</code> rebuilds this report from it.</p>\n");

    for step in &steps {
        let _ = writeln!(html, "<h2 id=\"{0}\">{0}</h2>", esc(step));
        for (di, d) in docs.iter().enumerate() {
            let Some(run) = d.runs.iter().find(|r| r.step == *step) else {
                continue;
            };
            if several {
                let _ = writeln!(html, "<h3>{}</h3>", esc(&labels[di]));
            }
            if run.status == Status::Failed {
                let _ = writeln!(
                    html,
                    "<p class=\"fail\">This experiment failed: {}</p>",
                    esc(run.note.as_deref().unwrap_or(""))
                );
            }
            let Some(v) = &run.results else { continue };
            let stem = stem(step, di);
            let rs = rows(v);
            write_file(&out.join(format!("{stem}.csv")), &csv(rs))?;
            write_file(
                &out.join(format!("{stem}.json")),
                &(serde_json::to_string_pretty(v)? + "\n"),
            )?;
            if !rs.is_empty() {
                match section(v, &stem) {
                    Ok(sec) => {
                        let _ = writeln!(html, "<p class=\"study\">{}</p>", esc(&sec.sentence));
                        for p in &sec.plots {
                            write_file(&out.join(&p.file), &p.svg)?;
                            let _ = writeln!(
                                html,
                                "<figure><img src=\"{0}\" alt=\"{0}\"><figcaption>{1}</figcaption></figure>",
                                p.file,
                                esc(&p.caption)
                            );
                        }
                    }
                    Err(e) => {
                        let _ = writeln!(
                            html,
                            "<p class=\"fail\">The plots of this experiment could not be drawn: {}</p>",
                            esc(&e.to_string())
                        );
                    }
                }
            }
            html.push_str(&table(rs));
            let config = v
                .get("config")
                .map(|c| serde_json::to_string_pretty(c).unwrap_or_default())
                .unwrap_or_default();
            let _ = writeln!(
                html,
                "<details><summary>configuration</summary><pre>{}</pre></details>",
                esc(&config)
            );
        }
    }
    html.push_str("<h2 id=\"studies\">Studies reproduced</h2>\n<ul>\n");
    for study in studies::ALL {
        let _ = writeln!(
            html,
            "<li>{}: <i>{}</i></li>",
            esc(study.authors),
            esc(study.title)
        );
    }
    html.push_str("</ul>\n</body></html>\n");
    write_file(&out.join("index.html"), &html)
}

/// `ferry lab report`: rebuilds the report from results documents alone (`inputs`: files or
/// report directories; several are shown side by side) into `out`, with the documents copied
/// there as `results.json` (one) or `results-m1.json`, ... (several).
pub fn rebuild(inputs: &[PathBuf], out: &Path) -> Result<()> {
    if inputs.is_empty() {
        return Err(crate::error::Error::msg(
            "give at least one results.json (or a report directory holding one)",
        ));
    }
    let docs = inputs
        .iter()
        .map(|p| SuiteResults::read(p))
        .collect::<Result<Vec<_>>>()?;
    std::fs::create_dir_all(out)
        .map_err(|e| crate::error::Error::msg(format!("cannot create {}: {e}", out.display())))?;
    if docs.len() == 1 {
        write_json(&out.join(crate::results::FILE), &docs[0])?;
    } else {
        for (i, d) in docs.iter().enumerate() {
            write_json(&out.join(format!("results-m{}.json", i + 1)), d)?;
        }
    }
    write(out, &docs)
}

/// The rows' scalar fields as an HTML table (at most 80 rows; the CSV has them all).
fn table(rs: &[Value]) -> String {
    if rs.is_empty() {
        return String::new();
    }
    let text = csv(rs);
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let mut out =
        String::from("<details open><summary>rows</summary><div class=\"rows\"><table><tr>");
    for h in &header {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>\n");
    for r in rs.iter().take(80) {
        out.push_str("<tr>");
        for h in &header {
            let cell = match r.get(*h) {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => match n.as_f64() {
                    Some(f) if n.is_f64() => format!("{f:.3}"),
                    _ => n.to_string(),
                },
                Some(other) => other.to_string(),
            };
            if cell.chars().count() > 60 {
                // Long notes stay whole in the CSV and in a tooltip.
                let short: String = cell.chars().take(57).collect();
                let _ = write!(out, "<td title=\"{}\">{}…</td>", esc(&cell), esc(&short));
            } else {
                let _ = write!(out, "<td>{}</td>", esc(&cell));
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table></div></details>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small, made-up result of every experiment the report draws.
    fn fake_results() -> Vec<(&'static str, Value)> {
        /// The experiment's name and its results as JSON.
        fn named<E: crate::experiment::Experiment>(
            results: crate::experiment::Results<E>,
        ) -> (&'static str, Value) {
            (E::NAME, serde_json::to_value(results).unwrap())
        }
        vec![
            named(crate::latency::example()),
            named(crate::sendtime::example()),
            named(crate::idle::example()),
            named(crate::fanout::example()),
            named(crate::footprint::example()),
            named(crate::limits::example()),
            named(crate::throughput::example()),
            named(crate::share::example()),
            named(crate::udprate::example()),
            named(crate::cycle::example()),
            named(crate::hubs::example()),
        ]
    }

    #[test]
    fn the_report_cites_every_study_and_uses_no_internal_words() {
        let runs: Vec<crate::results::Run> = fake_results()
            .into_iter()
            .map(|(name, v)| crate::results::Run {
                step: name.to_owned(),
                experiment: name.to_owned(),
                status: crate::results::Status::Ok,
                note: None,
                seconds: 1.0,
                results: Some(v),
            })
            .collect();
        let dir = std::env::temp_dir().join(format!("ferry-studies-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let doc = crate::results::SuiteResults::new(
            crate::results::Suite {
                level: "quick".into(),
                command: "ferry lab".into(),
                seconds: 9.0,
                started_unix_s: 0,
            },
            runs,
        );
        crate::report::write(&dir, std::slice::from_ref(&doc)).unwrap();
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
        let svgs = files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "svg"))
            .count();
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            crate::studies::tests::assert_clean(&f.display().to_string(), &text);
        }
        let _ = std::fs::remove_dir_all(&dir);
        assert!(svgs >= 9, "only {svgs} plots drawn");
        // No experiment fell back to an error instead of its sentence.
        assert!(!html.contains("could not be drawn"), "{html}");
        for study in crate::studies::ALL {
            // Its sentence cites it, and the list at the end gives authors and title.
            assert!(
                html.contains(&studies::cite(study)) || html.contains(&studies::cite_first(study)),
                "the report never cites {:?}",
                study.key
            );
            assert!(html.contains(study.title) && html.contains(study.authors));
        }
    }

    #[test]
    fn a_second_run_of_an_experiment_names_its_plots_after_its_step() {
        let v = serde_json::to_value(crate::latency::example()).unwrap();
        let first = section(&v, "latency").unwrap();
        let second = section(&v, "latency-m2").unwrap();
        assert_eq!(first.plots[0].file, "latency.svg");
        assert_eq!(second.plots[0].file, "latency-m2.svg");
        let unknown = serde_json::json!({"experiment": "nothing", "rows": []});
        assert!(section(&unknown, "nothing").is_err());
    }

    /// A results document from a machine of this host name and CPU count.
    fn doc_on(hostname: &str, cpus: usize) -> SuiteResults {
        let mut v = serde_json::to_value(crate::latency::example()).unwrap();
        v["machine"]["hostname"] = serde_json::json!(hostname);
        v["machine"]["cpus"] = serde_json::json!(cpus);
        v["machine"]["cpu_model"] = serde_json::json!("Some CPU");
        let suite = crate::results::Suite {
            level: "quick".to_owned(),
            command: "ferry lab".to_owned(),
            seconds: 1.0,
            started_unix_s: 0,
        };
        let run = crate::results::Run {
            step: "latency".to_owned(),
            experiment: "latency".to_owned(),
            status: Status::Ok,
            note: None,
            seconds: 0.5,
            results: Some(v),
        };
        SuiteResults::new(suite, vec![run])
    }

    #[test]
    fn machines_that_share_a_host_name_are_told_apart_in_a_report() {
        let names = |docs: &[SuiteResults]| labels(docs);
        assert_eq!(
            names(&[doc_on("a", 2), doc_on("b", 2)]),
            ["a", "b"],
            "distinct host names stay as they are"
        );
        assert_eq!(
            names(&[doc_on("vm", 2), doc_on("vm", 16)]),
            ["vm, 2 × Some CPU", "vm, 16 × Some CPU"]
        );
        assert_eq!(
            names(&[doc_on("vm", 2), doc_on("vm", 2)]),
            ["vm, 2 × Some CPU #1", "vm, 2 × Some CPU #2"]
        );
    }
}
