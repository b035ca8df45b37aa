//! The suite's report: one CSV per experiment, SVG plots (plotters, SVG backend, no fonts
//! needed: text stays SVG `<text>`), and a self-contained `index.html` (inline CSS, no scripts,
//! nothing fetched) that shows the machine, the configuration, every plot, and for each
//! experiment a sentence that sets the result beside the study it reproduces.
//!
//! Everything here works on the results JSON (`serde_json::Value`), so it draws whatever an
//! experiment wrote; an experiment it has no plot for still gets its CSV and a table.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;

use super::footprint::{VORTEX_BINARY_BYTES, VORTEX_THREADS, VORTEX_VMRSS_KB};
use super::studies::{self, cite, cite_first, DOMINION, PACED_UDP, SHM_STREAM, VORTEX_LITE};
use super::suite::{write as write_file, Outcome};
use crate::error::Result;
use crate::units::{format_ns, format_size};

/// What the suite tells the report about itself.
pub struct SuiteInfo<'a> {
    pub level: &'static str,
    pub command: String,
    pub seconds: f64,
    pub outcomes: &'a [Outcome],
}

const W: u32 = 960;
const H: u32 = 540;

/// Tableau 10: distinct, readable on white.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
const GREY: RGBColor = RGBColor(150, 150, 150);
const FONT: &str = "sans-serif";

pub(crate) fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

// ---------------------------------------------------------------------------------------------
// JSON helpers

/// One line of the cycle plot: transport, CPU budget (None: unlimited), placement, cycle time.
#[derive(Debug, Clone, PartialEq)]
struct CycleKey {
    transport: String,
    cpu: Option<f64>,
    placement: Option<String>,
    cycle_ms: f64,
}

/// A CPU budget for a label: "0.3 CPU", or "unlimited CPU".
fn cpu_label(cpu: Option<f64>) -> String {
    cpu.map_or("unlimited CPU".to_owned(), |c| format!("{c} CPU"))
}

impl CycleKey {
    fn cpu_label(&self) -> String {
        cpu_label(self.cpu)
    }

    fn placement_label(&self) -> &'static str {
        match self.placement.as_deref() {
            Some("one-cpu") => ", both apps on one CPU",
            Some("two-cpus") => ", one CPU each",
            Some("scheduler") => ", placed by the kernel",
            _ => "",
        }
    }
}

/// A whole count with spaces between thousands: 1234567 → "1 234 567".
fn format_thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key)?.as_f64()
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key)?.as_str()
}

fn rows(v: &Value) -> &[Value] {
    v.get("rows")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Distinct values of a string field, in order of first appearance.
fn distinct(rows: &[Value], key: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if let Some(s) = text(r, key) {
            if !out.iter().any(|o| o == s) {
                out.push(s.to_owned());
            }
        }
    }
    out
}

fn distinct_sizes(rows: &[Value]) -> Vec<u64> {
    let mut out: Vec<u64> = rows
        .iter()
        .filter_map(|r| r.get("size_bytes")?.as_u64())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
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

// ---------------------------------------------------------------------------------------------
// Plots

/// A box-and-whisker glyph: box `lo..hi` with a line at `mid`, whiskers `wlo..whi`, a dot at
/// `dot`.
#[derive(Clone, Copy)]
pub(crate) struct Glyph {
    wlo: f64,
    lo: f64,
    mid: f64,
    hi: f64,
    whi: f64,
    dot: Option<f64>,
}

impl Glyph {
    /// Box p50 to p90, whiskers min and p99, a dot at p99.9.
    pub(crate) fn of_summary(s: &crate::Summary) -> Glyph {
        let f = |v: u64| (v as f64).max(1.0);
        Glyph {
            wlo: f(s.min_ns),
            lo: f(s.p50_ns),
            mid: f(s.p50_ns),
            hi: f(s.p90_ns),
            whi: f(s.p99_ns),
            dot: Some(f(s.p999_ns)),
        }
    }
}

/// Box plots by size and transport from typed cells `(transport, size, summary)`, and a phrase
/// with every transport's p50 at the smallest and the largest size.
pub(crate) fn size_boxes(
    title: &str,
    y_desc: &str,
    cells: &[(String, usize, Option<Glyph>)],
) -> Result<(String, String)> {
    let mut sizes: Vec<u64> = cells.iter().map(|c| c.1 as u64).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut transports: Vec<&str> = Vec::new();
    for c in cells {
        if !transports.contains(&c.0.as_str()) {
            transports.push(&c.0);
        }
    }
    let find = |t: &str, s: u64| {
        cells
            .iter()
            .find(|c| c.0 == t && c.1 as u64 == s)
            .and_then(|c| c.2)
    };
    let series: Vec<(String, Vec<Option<Glyph>>)> = transports
        .iter()
        .map(|&t| (t.to_owned(), sizes.iter().map(|&s| find(t, s)).collect()))
        .collect();
    let svg = box_plot(title, y_desc, &sizes, &series)?;
    let at = |s: u64| -> String {
        transports
            .iter()
            .filter_map(|&t| Some(format!("{t} {}", format_ns(find(t, s)?.mid))))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut phrase = String::new();
    if let (Some(&first), Some(&last)) = (sizes.first(), sizes.last()) {
        let _ = write!(phrase, "at {}: {}", format_size(first as usize), at(first));
        if last != first {
            let _ = write!(phrase, "; at {}: {}", format_size(last as usize), at(last));
        }
    }
    Ok((svg, phrase))
}

fn glyph_of(row: &Value) -> Option<Glyph> {
    let p50 = num(row, "p50_ns")?;
    let min = num(row, "min_ns").unwrap_or(p50);
    let p90 = num(row, "p90_ns").unwrap_or(p50);
    let p99 = num(row, "p99_ns").unwrap_or(p90);
    let (lo, hi) = match (num(row, "p25_ns"), num(row, "p75_ns")) {
        (Some(a), Some(b)) => (a, b),
        _ => (p50, p90),
    };
    Some(Glyph {
        wlo: min.max(1.0),
        lo: lo.max(1.0),
        mid: p50.max(1.0),
        hi: hi.max(1.0),
        whi: p99.max(1.0),
        dot: num(row, "p999_ns").map(|v| v.max(1.0)),
    })
}

/// Box plots per size (x, categorical) and transport (colour) on a log y axis, like the
/// cpp-shm-stream experiments.
fn box_plot(
    title: &str,
    y_desc: &str,
    sizes: &[u64],
    series: &[(String, Vec<Option<Glyph>>)],
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE)?;
        let all = series.iter().flat_map(|(_, g)| g.iter().flatten());
        let lo = all
            .clone()
            .map(|g| g.wlo)
            .fold(f64::INFINITY, f64::min)
            .min(1e9);
        let hi = all
            .map(|g| g.dot.unwrap_or(g.whi).max(g.whi))
            .fold(0.0, f64::max)
            .max(lo * 10.0);
        let n = sizes.len().max(1);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 22))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(86)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (lo / 1.5..hi * 1.5).log_scale())?;
        let labels: Vec<String> = sizes.iter().map(|&s| format_size(s as usize)).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n * 2 + 1)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 0.01 && i >= 0.0 && (i as usize) < labels.len() {
                    labels[i as usize].clone()
                } else {
                    String::new()
                }
            })
            .y_labels(8)
            .y_label_formatter(&|y| format_ns(*y))
            .x_desc("message size")
            .y_desc(y_desc)
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 16))
            .draw()?;
        let k = series.len().max(1) as f64;
        let slot = 0.8 / k;
        for (ti, (name, glyphs)) in series.iter().enumerate() {
            let c = color(ti);
            let mut elements: Vec<DynElement<'static, SVGBackend, (f64, f64)>> = Vec::new();
            for (si, g) in glyphs.iter().enumerate() {
                let Some(g) = g else { continue };
                let x = si as f64 - 0.4 + slot * (ti as f64 + 0.5);
                let half = slot * 0.35;
                let line = c.stroke_width(2);
                elements.push(PathElement::new(vec![(x, g.wlo), (x, g.lo)], line).into_dyn());
                elements.push(PathElement::new(vec![(x, g.hi), (x, g.whi)], line).into_dyn());
                for w in [g.wlo, g.whi] {
                    elements.push(
                        PathElement::new(vec![(x - half / 2.0, w), (x + half / 2.0, w)], line)
                            .into_dyn(),
                    );
                }
                elements.push(
                    Rectangle::new([(x - half, g.lo), (x + half, g.hi)], c.mix(0.35).filled())
                        .into_dyn(),
                );
                elements
                    .push(Rectangle::new([(x - half, g.lo), (x + half, g.hi)], line).into_dyn());
                elements.push(
                    PathElement::new(
                        vec![(x - half, g.mid), (x + half, g.mid)],
                        BLACK.stroke_width(3),
                    )
                    .into_dyn(),
                );
                if let Some(d) = g.dot {
                    elements.push(Circle::new((x, d), 3, c.filled()).into_dyn());
                }
            }
            chart
                .draw_series(elements)?
                .label(name.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], c.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 15))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

/// A line chart with points; log axes where asked.
fn line_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
    y_fmt: &dyn Fn(f64) -> String,
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE)?;
        let pts = series.iter().flat_map(|(_, p)| p.iter());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, 0.0f64, f64::INFINITY, 0.0f64);
        for &(x, y) in pts {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
        if !x0.is_finite() {
            (x0, x1, y0, y1) = (1.0, 10.0, 0.1, 1.0);
        }
        let y0 = (y0 / 2.0).max(1e-6);
        let y1 = (y1 * 2.0).max(y0 * 10.0);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 22))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(80)
            .build_cartesian_2d((x0.log2() - 0.5)..(x1.log2() + 0.5), (y0..y1).log_scale())?;
        // x is log2 of the size, so that the ticks fall on powers of two.
        let ticks = (x1.log2() - x0.log2()).round() as usize + 2;
        chart
            .configure_mesh()
            .x_labels(ticks * 2 + 1)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 0.01 && i >= 0.0 {
                    format_size(2f64.powf(i) as usize)
                } else {
                    String::new()
                }
            })
            .y_labels(8)
            .y_label_formatter(&|y| y_fmt(*y))
            .x_desc(x_desc)
            .y_desc(y_desc)
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 16))
            .draw()?;
        for (i, (name, points)) in series.iter().enumerate() {
            let c = color(i);
            let points: Vec<(f64, f64)> = points.iter().map(|&(x, y)| (x.log2(), y)).collect();
            chart
                .draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3))
                });
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, 15))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

/// One series of an x/y chart: its name and points `(x, y, spread)`, where `spread` is an
/// optional (low, high) drawn as an error bar.
type XySeries = (String, Vec<(f64, f64, Option<(f64, f64)>)>);

/// A line chart on linear axes (log y with `log_y`), points joined in x order, error bars where
/// a point has a spread, and an optional dashed horizontal reference line with its label.
fn xy_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[XySeries],
    log_y: bool,
    integer_x: bool,
    reference: Option<(&str, f64)>,
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE)?;
        let (mut x0, mut x1, mut y0, mut y1) =
            (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, 0.0f64);
        for &(x, y, spread) in series.iter().flat_map(|(_, p)| p.iter()) {
            let (lo, hi) = spread.unwrap_or((y, y));
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(lo.min(y));
            y1 = y1.max(hi.max(y));
        }
        if let Some((_, r)) = reference {
            y0 = y0.min(r);
            y1 = y1.max(r);
        }
        if !x0.is_finite() {
            (x0, x1, y0, y1) = (0.0, 1.0, 1.0, 10.0);
        }
        let pad = ((x1 - x0) * 0.05).max(0.5);
        let xr = (x0 - pad)..(x1 + pad);
        let mut chart = ChartBuilder::on(&root);
        chart
            .caption(title, (FONT, 22))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(80);
        // Two code paths because log and linear y are different coordinate types.
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .x_labels(if integer_x {
                        (x1 - x0) as usize + 3
                    } else {
                        10
                    })
                    .x_label_formatter(&|x| {
                        if !integer_x {
                            format_count(*x)
                        } else if (x - x.round()).abs() < 1e-6 {
                            format!("{x:.0}")
                        } else {
                            String::new()
                        }
                    })
                    .y_labels(8)
                    .y_label_formatter(&|y| format_count(*y))
                    .x_desc(x_desc)
                    .y_desc(y_desc)
                    .label_style((FONT, 15))
                    .axis_desc_style((FONT, 16))
                    .draw()?;
                if let Some((label, r)) = reference {
                    chart
                        .draw_series(DashedLineSeries::new(
                            vec![(x0 - pad, r), (x1 + pad, r)],
                            8,
                            6,
                            GREY.stroke_width(2),
                        ))?
                        .label(label.to_owned())
                        .legend(|(x, y)| {
                            PathElement::new(vec![(x, y), (x + 18, y)], GREY.stroke_width(2))
                        });
                }
                for (i, (name, points)) in series.iter().enumerate() {
                    let c = color(i);
                    let mut pts = points.clone();
                    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                    // On a count axis, series side by side a little, so that equal values
                    // do not hide each other.
                    if integer_x && series.len() > 1 {
                        let shift = (i as f64 - (series.len() - 1) as f64 / 2.0) * 0.04;
                        for p in &mut pts {
                            p.0 += shift;
                        }
                    }
                    chart
                        .draw_series(LineSeries::new(
                            pts.iter().map(|&(x, y, _)| (x, y)),
                            c.stroke_width(2),
                        ))?
                        .label(name.clone())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3))
                        });
                    chart.draw_series(
                        pts.iter()
                            .map(|&(x, y, _)| Circle::new((x, y), 4, c.filled())),
                    )?;
                    chart.draw_series(pts.iter().filter_map(|&(x, _, spread)| {
                        let (lo, hi) = spread?;
                        Some(PathElement::new(vec![(x, lo), (x, hi)], c.stroke_width(2)))
                    }))?;
                }
                chart
                    .configure_series_labels()
                    .position(if log_y {
                        SeriesLabelPosition::UpperRight
                    } else {
                        SeriesLabelPosition::LowerRight
                    })
                    .label_font((FONT, 15))
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .draw()?;
            }};
        }
        if log_y {
            let lo = (y0 / 2.0).max(1e-9);
            let hi = (y1 * 2.0).max(lo * 10.0);
            draw!(chart.build_cartesian_2d(xr, (lo..hi).log_scale())?);
        } else {
            let hi = if y1 > 0.0 { y1 * 1.15 } else { 1.0 };
            draw!(chart.build_cartesian_2d(xr, 0.0..hi)?);
        }
        root.present()?;
    }
    Ok(svg)
}

/// A number for an axis: 1 234, 12.5 k, 3.4 M.
fn format_count(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.3} M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1} k", v / 1e3)
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A run over time in two panels: rates (requested dashed, measured solid) above, the
/// thread count below.
fn timeline_chart(
    title: &str,
    at_s: &[f64],
    requested: &[f64],
    sent: &[f64],
    threads: &[f64],
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE)?;
        let (top, bottom) = root.split_vertically(H * 62 / 100);
        let t1 = at_s.iter().copied().fold(0.0f64, f64::max).max(0.1);
        let r1 = requested
            .iter()
            .chain(sent)
            .copied()
            .fold(0.0f64, f64::max)
            .max(1e-3)
            * 1.2;
        let mut chart = ChartBuilder::on(&top)
            .caption(title, (FONT, 22))
            .margin(16)
            .x_label_area_size(28)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..t1, 0.0..r1)?;
        chart
            .configure_mesh()
            .x_labels(10)
            .y_labels(6)
            .y_desc("Gbit/s")
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 16))
            .draw()?;
        let pts = |ys: &[f64]| -> Vec<(f64, f64)> {
            at_s.iter().copied().zip(ys.iter().copied()).collect()
        };
        let c = color(0);
        chart
            .draw_series(DashedLineSeries::new(
                pts(requested),
                8,
                6,
                GREY.stroke_width(2),
            ))?
            .label("requested")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], GREY.stroke_width(2)));
        chart
            .draw_series(LineSeries::new(pts(sent), c.stroke_width(2)))?
            .label("sent (per interval)")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3)));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FONT, 15))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        let n1 = threads.iter().copied().fold(1.0f64, f64::max) + 1.0;
        let mut lower = ChartBuilder::on(&bottom)
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..t1, 0.0..n1)?;
        lower
            .configure_mesh()
            .x_labels(10)
            .y_labels(n1 as usize + 1)
            .y_label_formatter(&|y| {
                if y.fract() == 0.0 {
                    format!("{y:.0}")
                } else {
                    String::new()
                }
            })
            .x_desc("time (s)")
            .y_desc("sender threads")
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 16))
            .draw()?;
        // A step line: the count holds until the next interval.
        let mut steps = Vec::new();
        for (i, (&t, &n)) in at_s.iter().zip(threads).enumerate() {
            if i > 0 {
                steps.push((t, threads[i - 1]));
            }
            steps.push((t, n));
        }
        let c = color(1);
        lower.draw_series(LineSeries::new(steps, c.stroke_width(2)))?;
        root.present()?;
    }
    Ok(svg)
}

/// One bar panel: categories on x, one bar per series in each (a missing value leaves a gap),
/// an optional dashed reference line.
pub(crate) struct Bars<'a> {
    pub(crate) title: &'a str,
    pub(crate) y_desc: &'a str,
    pub(crate) categories: Vec<String>,
    /// name, colour, a value per category.
    pub(crate) series: Vec<(String, RGBColor, Vec<Option<f64>>)>,
    pub(crate) reference: Option<(String, f64)>,
    pub(crate) log_y: bool,
}

fn draw_bars(area: &DrawingArea<SVGBackend, plotters::coord::Shift>, b: &Bars<'_>) -> Result<()> {
    let n = b.categories.len().max(1);
    let values = b.series.iter().flat_map(|s| s.2.iter().flatten().copied());
    let top = values
        .clone()
        .fold(0.0f64, f64::max)
        .max(b.reference.as_ref().map_or(0.0, |r| r.1))
        .max(1e-9);
    let bottom = values.fold(f64::INFINITY, f64::min).max(1e-9);
    let labels = b.categories.clone();
    let x_fmt = move |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 0.01 && i >= 0.0 && (i as usize) < labels.len() {
            labels[i as usize].clone()
        } else {
            String::new()
        }
    };
    macro_rules! body {
        ($chart:ident, $base:expr) => {{
            $chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(n * 2 + 1)
                .x_label_formatter(&x_fmt)
                .y_label_formatter(&|y| format_count(*y))
                .y_desc(b.y_desc)
                .label_style((FONT, 14))
                .axis_desc_style((FONT, 15))
                .draw()?;
            for (si, (name, c, vals)) in b.series.iter().enumerate() {
                let c = *c;
                // Each category centres the bars it has (a series without a value there
                // leaves no gap).
                let place = |ci: usize| -> (f64, f64) {
                    let present: Vec<usize> = (0..b.series.len())
                        .filter(|&j| b.series[j].2.get(ci).copied().flatten().is_some())
                        .collect();
                    let k = present.len().max(1) as f64;
                    let pos = present.iter().position(|&j| j == si).unwrap_or(0) as f64;
                    let w = (0.8 / k).min(0.3);
                    (ci as f64 - w * k / 2.0 + w * pos, w)
                };
                let bars = vals.iter().enumerate().filter_map(|(ci, v)| {
                    let v = (*v)?;
                    let (x, w) = place(ci);
                    Some(Rectangle::new(
                        [(x + w * 0.06, $base), (x + w * 0.94, v)],
                        c.filled(),
                    ))
                });
                let labels = vals.iter().enumerate().filter_map(|(ci, v)| {
                    let v = (*v)?;
                    let (x, w) = place(ci);
                    let t = if v.fract() == 0.0 || v >= 100.0 {
                        format!("{v:.0}")
                    } else if v >= 10.0 {
                        format!("{v:.1}")
                    } else {
                        format!("{v:.2}")
                    };
                    Some(Text::new(
                        t,
                        (x + w / 2.0, v),
                        (FONT, 13)
                            .into_font()
                            .color(&BLACK)
                            .pos(Pos::new(HPos::Center, VPos::Bottom)),
                    ))
                });
                $chart
                    .draw_series(bars)?
                    .label(name.clone())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 6), (x + 16, y + 6)], c.filled())
                    });
                $chart.draw_series(labels)?;
            }
            if let Some((label, v)) = &b.reference {
                let v = *v;
                $chart
                    .draw_series(DashedLineSeries::new(
                        vec![(-0.5, v), (n as f64 - 0.5, v)],
                        8,
                        5,
                        RED.stroke_width(2),
                    ))?
                    .label(label.clone())
                    .legend(|(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], RED.stroke_width(2))
                    });
            }
            $chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .label_font((FONT, 13))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()?;
        }};
    }
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(b.title, (FONT, 19))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    if b.log_y {
        let base = bottom / 3.0;
        let mut chart =
            builder.build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (base..top * 4.0).log_scale())?;
        body!(chart, base);
    } else {
        let mut chart = builder.build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0.0..top * 1.3)?;
        body!(chart, 0.0);
    }
    Ok(())
}

pub(crate) fn bar_svg(panels: &[Bars<'_>], width: u32) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, H)).into_drawing_area();
        root.fill(&WHITE)?;
        let areas = root.split_evenly((1, panels.len().max(1)));
        for (a, p) in areas.iter().zip(panels) {
            draw_bars(a, p)?;
        }
        root.present()?;
    }
    Ok(svg)
}

// ---------------------------------------------------------------------------------------------
// Per experiment: plots and the sentence

/// A plot of a section: its SVG, the file it is saved as, and its caption.
pub struct Plot {
    pub file: String,
    pub svg: String,
    pub caption: String,
}

/// An experiment's part of the report: a sentence that sets the results beside the study, and
/// plots.
pub struct Section {
    pub plots: Vec<Plot>,
    pub sentence: String,
}

/// One line of the report's summary: a figure the study also gives, measured here.
#[derive(Debug, Clone)]
pub struct SummaryLine {
    /// What is measured, in a few words ("one-way latency, 32 B, shared memory").
    pub what: String,
    /// ferry's figure.
    pub ferry: String,
    /// The floor measured in the same run (a raw baseline), if any.
    pub floor: Option<String>,
    /// The best other system measured in the same run, if any.
    pub best_peer: Option<String>,
    /// The study's own figure and who gives it.
    pub study: Option<String>,
}

fn latency_like(
    v: &Value,
    name: &str,
    y_desc: &str,
    what: &str,
) -> Result<(Vec<(String, String)>, String)> {
    let rows = rows(v);
    let sizes = distinct_sizes(rows);
    let transports = distinct(rows, "transport");
    let series: Vec<(String, Vec<Option<Glyph>>)> = transports
        .iter()
        .map(|t| {
            let g = sizes
                .iter()
                .map(|&s| {
                    rows.iter()
                        .find(|r| {
                            text(r, "transport") == Some(t)
                                && r.get("size_bytes").and_then(Value::as_u64) == Some(s)
                        })
                        .and_then(glyph_of)
                })
                .collect();
            (t.clone(), g)
        })
        .collect();
    let svg = box_plot(
        &format!("{what} by message size (log scale)"),
        y_desc,
        &sizes,
        &series,
    )?;
    // The sentence: p50 of every transport at the smallest and the largest size.
    let at = |s: u64| -> String {
        transports
            .iter()
            .filter_map(|t| {
                let r = rows.iter().find(|r| {
                    text(r, "transport") == Some(t)
                        && r.get("size_bytes").and_then(Value::as_u64) == Some(s)
                })?;
                Some(format!("{t} {}", format_ns(num(r, "p50_ns")?)))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut summary = String::new();
    if let (Some(&first), Some(&last)) = (sizes.first(), sizes.last()) {
        let _ = write!(summary, "at {}: {}", format_size(first as usize), at(first));
        if last != first {
            let _ = write!(summary, "; at {}: {}", format_size(last as usize), at(last));
        }
    }
    Ok((vec![(format!("{name}.svg"), svg)], summary))
}

/// The plots and sentence of one experiment's results, for experiments that do not draw their
/// own section yet.
fn legacy_section(v: &Value) -> Result<Section> {
    let name = text(v, "experiment").unwrap_or("unknown");
    let rs = rows(v);
    let mut svgs: Vec<(String, String)> = Vec::new();
    let mut captions: Vec<String> = Vec::new();
    #[allow(unused_assignments)]
    let mut sentence = String::new();
    match name {
        "send-time" => {
            let (s, summary) = latency_like(v, name, "time of the publish call", "Send time")?;
            svgs.extend(s);
            captions.push("Box: p25 to p75, black line p50; whiskers: min and p99; dot: p99.9. The publish call alone (loan + fill + send; raw-udp4: fill + send_to).".into());
            sentence = format!(
                "{} timed the send call of 10 000 messages per size and found the shared-memory streams' sends shorter than UDP's. Here, send-time p50 {summary}.",
                cite_first(&SHM_STREAM)
            );
        }
        "idle" => {
            let waits = distinct(rs, "wait");
            let vals = waits
                .iter()
                .map(|w| {
                    rs.iter()
                        .find(|r| text(r, "wait") == Some(w))
                        .and_then(|r| num(r, "cpu_percent"))
                })
                .collect::<Vec<_>>();
            let svg = bar_svg(
                &[Bars {
                    title: "CPU of an idle subscriber by wait strategy",
                    y_desc: "CPU (% of one CPU)",
                    categories: waits.clone(),
                    series: vec![("shm subscriber".into(), color(0), vals.clone())],
                    reference: None,
                    log_y: false,
                }],
                W,
            )?;
            svgs.push(("idle.svg".into(), svg));
            captions.push("CPU time of a subscriber that waits for a message that does not come, from /proc/PID/stat.".into());
            let parts: Vec<String> = waits
                .iter()
                .zip(&vals)
                .filter_map(|(w, v)| Some(format!("{w} {:.1} %", (*v)?)))
                .collect();
            sentence = format!(
                "In {}, the wait-free stream spins (faster, but it loads a CPU) while the blocking stream waits without a busy loop. Here an idle ferry subscriber uses {} of one CPU.",
                cite(&SHM_STREAM),
                parts.join(", ")
            );
        }
        "footprint" => {
            let cats: Vec<String> = rs
                .iter()
                .map(|r| {
                    format!(
                        "{} {}",
                        text(r, "app").unwrap_or("?").trim_start_matches("min-"),
                        text(r, "transport").unwrap_or("?")
                    )
                })
                .chain(std::iter::once("Vortex Lite".to_owned()))
                .collect();
            let col = |key: &str, div: f64| -> Vec<Option<f64>> {
                rs.iter()
                    .map(|r| num(r, key).map(|x| x / div))
                    .chain(std::iter::once(None))
                    .collect()
            };
            let vortex = |x: f64| -> Vec<Option<f64>> {
                rs.iter()
                    .map(|_| None)
                    .chain(std::iter::once(Some(x)))
                    .collect()
            };
            let panels = [
                Bars {
                    title: "Stripped binary",
                    y_desc: "size (KB)",
                    categories: cats.clone(),
                    series: vec![
                        ("ferry".into(), color(0), col("binary_bytes", 1024.0)),
                        (
                            "Vortex Lite".into(),
                            GREY,
                            vortex(VORTEX_BINARY_BYTES as f64 / 1024.0),
                        ),
                    ],
                    reference: Some(("goal 531 KB".into(), 531.0)),
                    log_y: false,
                },
                Bars {
                    title: "Resident memory",
                    y_desc: "KB",
                    categories: cats.clone(),
                    series: vec![
                        ("private RSS".into(), color(0), col("rss_private_kb", 1.0)),
                        ("VmRSS".into(), color(1), col("vm_rss_kb", 1.0)),
                        ("ring (RssShmem)".into(), color(2), col("rss_shmem_kb", 1.0)),
                        (
                            "Vortex Lite VmRSS".into(),
                            GREY,
                            vortex(VORTEX_VMRSS_KB as f64),
                        ),
                    ],
                    reference: Some(("goal 1.5 MB private".into(), 1536.0)),
                    log_y: false,
                },
                Bars {
                    title: "Threads",
                    y_desc: "threads",
                    categories: cats.clone(),
                    series: vec![
                        ("ferry".into(), color(0), col("threads", 1.0)),
                        ("Vortex Lite".into(), GREY, vortex(VORTEX_THREADS as f64)),
                    ],
                    reference: Some(("goal 2 threads".into(), 2.0)),
                    log_y: false,
                },
            ];
            svgs.push(("footprint.svg".into(), bar_svg(&panels, 1500)?));
            captions.push("min-pub sends 64 bytes every 10 ms, min-sub receives; built with the min-size profile. Private RSS = Private_Clean + Private_Dirty (smaps_rollup); VmRSS also counts shared libc pages; the ring is shared memory, shown apart. Grey: Vortex Lite (x86, static library).".into());
            let describe = |app: &str, t: &str| -> Option<String> {
                let r = rs
                    .iter()
                    .find(|r| text(r, "app") == Some(app) && text(r, "transport") == Some(t))?;
                Some(format!(
                    "ferry {app} over {t}: {:.0} KB / {:.0} KB private RSS (VmRSS {:.0} KB, ring {:.0} KB) / {:.0} thread(s)",
                    num(r, "binary_bytes")? / 1024.0,
                    num(r, "rss_private_kb")?,
                    num(r, "vm_rss_kb")?,
                    num(r, "rss_shmem_kb")?,
                    num(r, "threads")?
                ))
            };
            let ours: Vec<String> = [
                ("min-pub", "shm"),
                ("min-sub", "shm"),
                ("min-pub", "udp"),
                ("min-sub", "udp"),
            ]
            .iter()
            .filter_map(|(a, t)| describe(a, t))
            .collect();
            sentence = format!(
                "Vortex Lite in {} (x86, static library): 531 KB publisher image / 1.5 MB VmRSS / 7 threads. {}.",
                cite(&VORTEX_LITE),
                ours.join("; ")
            );
        }
        "limits" => {
            let mem: Vec<(f64, f64)> = rs
                .iter()
                .filter(|r| text(r, "kind") == Some("memcpy"))
                .filter_map(|r| Some((num(r, "size_bytes")?, num(r, "gbytes_per_s")?)))
                .collect();
            if !mem.is_empty() {
                svgs.push((
                    "limits-memcpy.svg".into(),
                    line_chart(
                        "memcpy bandwidth by size",
                        "copy size",
                        "GB/s (10^9 bytes per second)",
                        &[("memcpy (median of trials)".into(), mem.clone())],
                        &|y| format!("{y:.1}"),
                    )?,
                ));
                captions.push(
                    "One thread copies a buffer of the size again and again; log axes.".into(),
                );
            }
            let lat: Vec<&Value> = rs.iter().filter(|r| num(r, "p50_ns").is_some()).collect();
            let cats: Vec<String> = lat
                .iter()
                .map(|r| {
                    format!(
                        "{} {}",
                        text(r, "kind").unwrap_or("?"),
                        format_size(num(r, "size_bytes").unwrap_or(0.0) as usize)
                    )
                })
                .collect();
            if !lat.is_empty() {
                let us = |k: &str| {
                    lat.iter()
                        .map(|r| num(r, k).map(|v| v / 1000.0))
                        .collect::<Vec<_>>()
                };
                svgs.push((
                    "limits-latency.svg".into(),
                    bar_svg(
                        &[Bars {
                            title: "Raw one-way latency between two CPUs (log scale)",
                            y_desc: "one-way latency (µs)",
                            categories: cats,
                            series: vec![
                                ("p50".into(), color(0), us("p50_ns")),
                                ("p99".into(), color(1), us("p99_ns")),
                            ],
                            reference: None,
                            log_y: true,
                        }],
                        W,
                    )?,
                ));
                captions.push("Two threads pinned to two CPUs: an atomic cache line, a futex wake, blocking UDP on loopback. One-way = round trip / 2.".into());
            }
            let find = |kind: &str, key: &str| {
                rs.iter()
                    .find(|r| text(r, "kind") == Some(kind))
                    .and_then(|r| num(r, key))
            };
            let mut parts = Vec::new();
            if let Some(v) = find("cacheline", "p50_ns") {
                parts.push(format!("cache line {}", format_ns(v)));
            }
            if let Some(v) = find("futex", "p50_ns") {
                parts.push(format!("futex wake {}", format_ns(v)));
            }
            if let Some(v) = find("udp-loopback", "p50_ns") {
                parts.push(format!("UDP loopback {}", format_ns(v)));
            }
            if let (Some(a), Some(b)) = (mem.iter().find(|p| p.0 >= 65536.0), mem.last()) {
                parts.push(format!(
                    "memcpy {:.1} GB/s at {} and {:.1} GB/s at {}",
                    a.1,
                    format_size(a.0 as usize),
                    b.1,
                    format_size(b.0 as usize)
                ));
            }
            sentence = format!(
                "ferry's development machines (2 vCPU EPYC, KVM) measured: cache line 50–170 ns, futex wake ~28 µs, blocking UDP ~35 µs across CPUs (one-way), memcpy ~40 GB/s up to 1 MiB and ~10 GB/s beyond. Here (one-way p50): {}.",
                parts.join(", ")
            );
        }
        "throughput" => {
            let transports = distinct(rs, "transport");
            let sizes = distinct_sizes(rs);
            let series: Vec<(String, Vec<(f64, f64)>)> = transports
                .iter()
                .map(|t| {
                    let pts = sizes
                        .iter()
                        .filter_map(|&s| {
                            let mut v: Vec<f64> = rs
                                .iter()
                                .filter(|r| {
                                    text(r, "transport") == Some(t)
                                        && r.get("size_bytes").and_then(Value::as_u64) == Some(s)
                                })
                                .filter_map(|r| num(r, "delivered_gbps"))
                                .filter(|v| *v > 0.0)
                                .collect();
                            v.sort_by(f64::total_cmp);
                            v.get(v.len() / 2).map(|m| (s as f64, *m))
                        })
                        .collect();
                    (t.clone(), pts)
                })
                .filter(|(_, p): &(String, Vec<(f64, f64)>)| !p.is_empty())
                .collect();
            if !series.is_empty() {
                svgs.push((
                    "throughput.svg".into(),
                    line_chart(
                        "Throughput by message size",
                        "message size",
                        "delivered Gbit/s (median of rounds)",
                        &series,
                        &|y| format!("{y:.2}"),
                    )?,
                ));
                captions.push("Messages sent back to back to a subscriber in another process; median over the rounds; log axes.".into());
            }
            let best: Vec<String> = series
                .iter()
                .filter_map(|(t, p)| {
                    p.iter()
                        .copied()
                        .max_by(|a, b| a.1.total_cmp(&b.1))
                        .map(|(s, g)| format!("{t} {g:.2} Gbit/s at {}", format_size(s as usize)))
                })
                .collect();
            sentence = format!(
                "In {}, Vortex Lite reaches the ~950 Mbit/s of Gigabit Ethernet from messages under 2 KB (110 000 messages/s at 1 KB). Here, best delivered rates: {}.",
                cite(&VORTEX_LITE),
                best.join(", ")
            );
        }
        "cycle" => {
            // Medians over the repeats per (transport, CPU budget, placement, cycle time).
            let mut groups: Vec<(CycleKey, Vec<f64>)> = Vec::new();
            for r in rs {
                let (Some(t), Some(ms), Some(m)) = (
                    text(r, "transport"),
                    num(r, "cycle_ms"),
                    num(r, "max_multiplicity"),
                ) else {
                    continue;
                };
                let key = CycleKey {
                    transport: t.to_owned(),
                    cpu: r.get("cpu").and_then(Value::as_f64),
                    placement: text(r, "placement").map(str::to_owned),
                    cycle_ms: ms,
                };
                match groups.iter_mut().find(|g| g.0 == key) {
                    Some(g) => g.1.push(m),
                    None => groups.push((key, vec![m])),
                }
            }
            // The mean of the middle two for an even count.
            let median_of = |values: &[f64]| {
                let mut v = values.to_vec();
                v.sort_by(f64::total_cmp);
                let n = v.len();
                if n % 2 == 0 {
                    (v[n / 2 - 1] + v[n / 2]) / 2.0
                } else {
                    v[n / 2]
                }
            };
            let mut parts = Vec::new();
            for (key, values) in &groups {
                if key.transport != "shm" {
                    continue;
                }
                let shm = median_of(values);
                let mut part = format!(
                    "shm at {} ms, {}{}: {} u32",
                    key.cycle_ms,
                    key.cpu_label(),
                    key.placement_label(),
                    format_thousands(shm)
                );
                if key.cycle_ms == 1.0 && key.cpu == Some(0.3) {
                    let _ = write!(part, " ({:.2} × the study's 200 000)", shm / 200_000.0);
                }
                let udp = groups.iter().find(|(k, _)| {
                    k.transport == "udp"
                        && CycleKey {
                            transport: "shm".into(),
                            ..k.clone()
                        } == *key
                });
                if let Some((_, u)) = udp {
                    let udp = median_of(u);
                    let _ = write!(part, ", udp {} u32", format_thousands(udp));
                    if udp > 0.0 {
                        let _ = write!(part, ", shm/udp {:.1}", shm / udp);
                    }
                }
                if values.len() > 1 {
                    let _ = write!(part, " (medians of {} repeats)", values.len());
                }
                parts.push(part);
            }
            sentence = format!(
                "{} finds the largest multiplicity (u32 elements per cycle) that arrives in 99.95 % of the cycles under a CPU budget (over 200 000 u32 at 1 ms and 0.3 CPU over shared memory). Here: {}.",
                cite_first(&DOMINION),
                parts.join("; ")
            );
            // Median against cycle time, one line per transport, budget and placement, the
            // spread over the repeats as a bar.
            let mut series: Vec<XySeries> = Vec::new();
            let range_of = |values: &[f64]| {
                let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
                (lo, values.iter().copied().fold(lo, f64::max))
            };
            for (key, values) in &groups {
                let median = median_of(values);
                let spread = (values.len() > 1).then(|| range_of(values));
                let label = format!(
                    "{}, {}{}",
                    key.transport,
                    key.cpu_label(),
                    key.placement_label()
                );
                let point = (key.cycle_ms, median.max(1.0), spread);
                match series.iter_mut().find(|s| s.0 == label) {
                    Some(s) => s.1.push(point),
                    None => series.push((label, vec![point])),
                }
            }
            let mut limited: Vec<String> = rs
                .iter()
                .filter(|r| r.get("reached_limit").and_then(Value::as_bool) == Some(true))
                .filter_map(|r| {
                    Some(format!(
                        "{} at {} ms{}",
                        text(r, "transport")?,
                        num(r, "cycle_ms")?,
                        text(r, "placement").map_or(String::new(), |p| format!(" ({p})"))
                    ))
                })
                .collect::<Vec<_>>();
            limited.sort();
            limited.dedup();
            // Runs made void by the host's steal (failed while the hypervisor held the CPU).
            let voids = rs
                .iter()
                .filter_map(|r| r.get("trials").and_then(Value::as_array))
                .flatten()
                .filter(|t| t.get("void").and_then(Value::as_bool) == Some(true))
                .count();
            let void_note = if voids > 0 {
                format!(" {voids} run(s) failed while the host stole CPU time from this machine and were run again (kept in the JSON with \"void\": true).")
            } else {
                String::new()
            };
            let mut cycle_times: Vec<f64> = groups.iter().map(|g| g.0.cycle_ms).collect();
            cycle_times.sort_by(f64::total_cmp);
            cycle_times.dedup();
            if let [ms] = cycle_times[..] {
                // One cycle time: bars per transport and budget, one per placement.
                let mut categories: Vec<(&str, Option<f64>)> = Vec::new();
                let mut placements: Vec<Option<String>> = Vec::new();
                for (key, _) in &groups {
                    if !categories.contains(&(key.transport.as_str(), key.cpu)) {
                        categories.push((key.transport.as_str(), key.cpu));
                    }
                    if !placements.contains(&key.placement) {
                        placements.push(key.placement.clone());
                    }
                }
                let bar_series = placements
                    .iter()
                    .enumerate()
                    .map(|(i, place)| {
                        let values = categories
                            .iter()
                            .map(|&(transport, cpu)| {
                                groups
                                    .iter()
                                    .find(|(k, _)| {
                                        k.placement == *place
                                            && k.transport == transport
                                            && k.cpu == cpu
                                    })
                                    .map(|(_, v)| median_of(v))
                            })
                            .collect();
                        let key = CycleKey {
                            transport: String::new(),
                            cpu: None,
                            placement: place.clone(),
                            cycle_ms: ms,
                        };
                        let name = key.placement_label().trim_start_matches(", ");
                        let name = if name.is_empty() { "median" } else { name };
                        (name.to_owned(), color(i), values)
                    })
                    .collect();
                let title = format!(
                    "Largest multiplicity at {ms} ms (u32 elements per cycle), median over repeats"
                );
                let panel = Bars {
                    title: &title,
                    y_desc: "u32 elements per cycle",
                    categories: categories
                        .iter()
                        .map(|&(transport, cpu)| format!("{transport}, {}", cpu_label(cpu)))
                        .collect(),
                    series: bar_series,
                    reference: (ms == 1.0)
                        .then(|| (format!("{}: shm, 1 ms, 0.3 CPU", DOMINION.short), 200_000.0)),
                    log_y: false,
                };
                svgs.push(("cycle.svg".into(), bar_svg(&[panel], 960)?));
                let spreads: Vec<String> = groups
                    .iter()
                    .filter(|(_, v)| v.len() > 1)
                    .map(|(k, v)| {
                        let (lo, hi) = range_of(v);
                        format!(
                            "{}{} {}–{}",
                            k.transport,
                            k.placement_label(),
                            format_thousands(lo),
                            format_thousands(hi)
                        )
                    })
                    .collect();
                let mut caption = format!("Median over the repeats of the largest multiplicity that passed (≥ 99.95 % complete cycles, no overload), per placement of the two apps. The point of {}: over 200 000 u32 over shared memory at 1 ms and 0.3 CPU.", cite(&DOMINION));
                if !spreads.is_empty() {
                    let _ = write!(caption, " Spread over the repeats: {}.", spreads.join("; "));
                }
                if !limited.is_empty() {
                    let _ = write!(
                        caption,
                        " Reached the largest multiplicity tried (the true maximum is higher): {}.",
                        limited.join(", ")
                    );
                }
                caption.push_str(&void_note);
                captions.push(caption);
            } else if !series.is_empty() {
                series.push((
                    format!("{}: shm, 1 ms, 0.3 CPU", DOMINION.short),
                    vec![(1.0, 200_000.0, None)],
                ));
                svgs.push((
                    "cycle.svg".into(),
                    xy_chart(
                        "Largest multiplicity per cycle (u32 elements), median over repeats",
                        "cycle time (ms)",
                        "u32 elements per cycle (log scale)",
                        &series,
                        true,
                        false,
                        None,
                    )?,
                ));
                let mut caption = format!("Median over the repeats of the largest multiplicity that passed (≥ 99.95 % complete cycles, no overload); the bar spans the repeats. The point of {}: over 200 000 u32 over shared memory at 1 ms and 0.3 CPU.", cite(&DOMINION));
                if !limited.is_empty() {
                    let _ = write!(
                        caption,
                        " Reached the largest multiplicity tried (the true maximum is higher): {}.",
                        limited.join(", ")
                    );
                }
                caption.push_str(&void_note);
                captions.push(caption);
            }
        }
        "udp-rate" => {
            let parts: Vec<String> = rs
                .iter()
                .filter_map(|r| {
                    Some(format!(
                        "{:.2} of {:.2} Gbit/s (MSS {}, {} thread(s))",
                        num(r, "achieved_bps")? / 1e9,
                        num(r, "requested_bps")? / 1e9,
                        num(r, "mss")?,
                        num(r, "threads")?
                    ))
                })
                .collect();
            sentence = format!(
                "{} paces each UDP sender thread at T = MSS·8·N/R and adds threads from the accumulated lag. Here: {}.",
                cite_first(&PACED_UDP),
                parts.join("; ")
            );
            // The paced UDP study's figures 2-4: achieved rate against the number of sender
            // threads, one line per MSS (and requested rate, and pacing when several were run).
            let mut rates: Vec<f64> = rs.iter().filter_map(|r| num(r, "requested_bps")).collect();
            rates.sort_by(f64::total_cmp);
            rates.dedup();
            let pacings = distinct(rs, "pacing");
            let mut series: Vec<XySeries> = Vec::new();
            for r in rs
                .iter()
                .filter(|r| text(r, "threads_mode") != Some("auto"))
            {
                let (Some(mss), Some(n), Some(got), Some(req)) = (
                    num(r, "mss"),
                    num(r, "threads"),
                    num(r, "achieved_bps"),
                    num(r, "requested_bps"),
                ) else {
                    continue;
                };
                let mut key = format!("MSS {mss:.0} B");
                if rates.len() > 1 {
                    let _ = write!(key, ", {:.2} Gbit/s asked", req / 1e9);
                }
                if pacings.len() > 1 {
                    let _ = write!(key, ", {}", text(r, "pacing").unwrap_or("?"));
                }
                // The spread of the 1-second windows.
                let windows: Vec<f64> = r
                    .get("windows_bps")
                    .and_then(Value::as_array)
                    .map_or(Vec::new(), |w| w.iter().filter_map(Value::as_f64).collect());
                let spread = (windows.len() > 1).then(|| {
                    let lo = windows.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = windows.iter().copied().fold(0.0f64, f64::max);
                    (lo / 1e9, hi / 1e9)
                });
                match series.iter_mut().find(|s| s.0 == key) {
                    Some(s) => s.1.push((n, got / 1e9, spread)),
                    None => series.push((key, vec![(n, got / 1e9, spread)])),
                }
            }
            let reference = (rates.len() == 1)
                .then(|| rs.iter().find_map(|r| num(r, "requested_bps")))
                .flatten()
                .map(|r| r / 1e9);
            let ref_label = reference.map(|r| format!("requested {r:.2} Gbit/s"));
            if !series.is_empty() {
                svgs.push((
                    "udp-rate.svg".into(),
                    xy_chart(
                        "Achieved UDP rate against sender threads",
                        "sender threads",
                        "delivered Gbit/s",
                        &series,
                        false,
                        true,
                        ref_label.as_deref().zip(reference),
                    )?,
                ));
                captions.push("Median of the 1-second windows of the delivered rate, per MSS; the bar spans the windows. Dashed: the requested rate.".into());
            }
            // Timelines: runs whose thread count or requested rate changed along the way.
            for (i, r) in rs.iter().enumerate() {
                let Some(points) = r.get("timeline").and_then(Value::as_array) else {
                    continue;
                };
                let get = |k: &str| -> Vec<f64> {
                    points.iter().map(|p| num(p, k).unwrap_or(0.0)).collect()
                };
                let (at, req, sent, threads) = (
                    get("at_s"),
                    get("requested_bps"),
                    get("sent_bps"),
                    get("threads"),
                );
                let changes = |v: &[f64]| v.windows(2).any(|w| w[0] != w[1]);
                if at.len() < 2
                    || !(changes(&req)
                        || changes(&threads)
                        || text(r, "threads_mode") == Some("auto"))
                {
                    continue;
                }
                let gb = |v: Vec<f64>| -> Vec<f64> { v.into_iter().map(|x| x / 1e9).collect() };
                svgs.push((
                    format!("udp-rate-timeline-{i}.svg"),
                    timeline_chart(
                        &format!(
                            "Timeline: MSS {:.0} B, {} pacing, {} threads",
                            num(r, "mss").unwrap_or(0.0),
                            text(r, "pacing").unwrap_or("?"),
                            text(r, "threads_mode").unwrap_or("?")
                        ),
                        &at,
                        &gb(req),
                        &gb(sent),
                        &threads,
                    )?,
                ));
                captions.push("Per manager interval: the requested rate (dashed), the rate the senders put out, and the number of sender threads the manager ran.".into());
            }
        }
        other => {
            // Hook: an experiment this report has no plot for yet (e.g. cycle): CSV and table.
            sentence = format!(
                "Experiment {other}: {} rows (see the table and CSV).",
                rs.len()
            );
        }
    }
    let plots = svgs
        .into_iter()
        .enumerate()
        .map(|(i, (file, svg))| Plot {
            file,
            svg,
            caption: captions.get(i).cloned().unwrap_or_default(),
        })
        .collect();
    Ok(Section { plots, sentence })
}

/// The section of one experiment's results; its SVG files are named after `stem` (the
/// experiment's name, or the suite's name for a second run of it).
pub fn section(v: &Value, stem: &str) -> Result<Section> {
    let name = text(v, "experiment").unwrap_or("unknown");
    let mut section = match crate::experiment::find(name) {
        Ok(experiment) => experiment.section(v.clone())?,
        Err(_) => legacy_section(v)?,
    };
    if stem != name {
        for plot in &mut section.plots {
            if let Some(rest) = plot.file.strip_prefix(name) {
                plot.file = format!("{stem}{rest}");
            }
        }
    }
    Ok(section)
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
pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:12px}.muted{color:#777}";

/// Writes the CSVs, the SVGs and index.html into `out` (results.json is the suite's).
pub fn write(out: &Path, suite: &SuiteInfo<'_>) -> Result<()> {
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ferry lab report</title><style>{CSS}</style></head><body>\n<h1>ferry lab report</h1>\n"
    );
    let first = suite.outcomes.iter().find_map(|o| o.result.as_ref());
    if let Some(m) = first.and_then(|v| v.get("machine")) {
        let s = |k: &str| {
            m.get(k).map_or(String::new(), |v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
        };
        let mem = m
            .get("memory_bytes")
            .and_then(Value::as_u64)
            .map_or("?".into(), |b| {
                format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
            });
        let _ = write!(
            html,
            "<p class=\"muted\">ferry {} · {} suite · {:.0} s · <code>{}</code></p>\n<h2>Machine</h2>\n<table><tr><th>host</th><td>{}</td></tr><tr><th>CPU</th><td>{}</td></tr><tr><th>CPUs online / allowed</th><td>{} / {}</td></tr><tr><th>memory</th><td>{}</td></tr><tr><th>kernel</th><td>{} {} ({})</td></tr><tr><th>virtualized</th><td>{}</td></tr><tr><th>clock source</th><td>{}</td></tr></table>\n",
            env!("CARGO_PKG_VERSION"),
            suite.level,
            suite.seconds,
            esc(&suite.command),
            esc(&s("hostname")),
            esc(&s("cpu_model")),
            esc(&s("cpus")),
            esc(&s("allowed_cpus")),
            mem,
            esc(&s("os")),
            esc(&s("kernel")),
            esc(&s("arch")),
            esc(&s("virtualized")),
            esc(&s("clocksource")),
        );
    }
    html.push_str("<h2>Experiments</h2>\n<table><tr><th>experiment</th><th>status</th><th>seconds</th><th>files</th></tr>\n");
    for o in suite.outcomes {
        let files = if o.result.is_some() {
            format!(
                "<a href=\"{0}.json\">{0}.json</a> · <a href=\"{0}.csv\">{0}.csv</a>",
                o.name
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            html,
            "<tr><td><a href=\"#{0}\">{0}</a></td><td>{1}</td><td>{2:.1}</td><td>{files}</td></tr>",
            o.name,
            esc(&o.status),
            o.seconds
        );
    }
    html.push_str("</table>\n<p class=\"muted\">All results: <a href=\"results.json\">results.json</a> (one object per experiment: <code>ferry_version</code>, <code>experiment</code>, <code>machine</code>, <code>config</code>, <code>rows</code>).</p>\n");

    for o in suite.outcomes {
        let Some(v) = &o.result else { continue };
        let _ = writeln!(html, "<h2 id=\"{0}\">{0}</h2>", o.name);
        let rs = rows(v);
        write_file(&out.join(format!("{}.csv", o.name)), &csv(rs))?;
        if !out.join(format!("{}.json", o.name)).exists() {
            write_file(
                &out.join(format!("{}.json", o.name)),
                &(serde_json::to_string_pretty(v)? + "\n"),
            )?;
        }
        if let Some(err) = v.pointer("/config/error").and_then(Value::as_str) {
            let _ = writeln!(
                html,
                "<p class=\"fail\">This experiment failed: {}</p>",
                esc(err)
            );
        }
        if !rs.is_empty() {
            match section(v, o.name) {
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
    use serde_json::json;

    /// The section and the SVG files it wrote.
    fn section_of(v: &Value, stem: &str) -> (Section, Vec<(String, String)>) {
        let sec = section(v, stem).unwrap();
        let svgs = sec
            .plots
            .iter()
            .map(|p| (p.file.clone(), p.svg.clone()))
            .collect();
        (sec, svgs)
    }

    fn svgs_of(v: &Value, stem: &str) -> Vec<(String, String)> {
        section_of(v, stem).1
    }

    fn rate_row(mss: u64, threads: u64, mode: &str, achieved: f64, timeline: Value) -> Value {
        json!({"mss": mss, "threads": threads, "threads_mode": mode, "pacing": "catch-up",
               "requested_bps": 3_000_000_000u64, "achieved_bps": achieved,
               "windows_bps": [achieved * 0.9, achieved], "timeline": timeline})
    }

    #[test]
    fn udp_rate_plots_rate_against_threads_and_timelines_where_the_pool_changed() {
        let flat = json!([{"at_s": 0.5, "requested_bps": 3e9, "sent_bps": 2e9, "threads": 1},
                          {"at_s": 1.0, "requested_bps": 3e9, "sent_bps": 2e9, "threads": 1}]);
        let fixed = json!({"experiment": "udp-rate", "rows": [
            rate_row(1472, 1, "fixed", 2.4e9, flat.clone()),
            rate_row(1472, 2, "fixed", 3.0e9, flat.clone()),
            rate_row(8972, 1, "fixed", 3.0e9, flat.clone()),
        ]});
        let svgs = svgs_of(&fixed, "udp-rate");
        let names: Vec<&str> = svgs.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            names,
            ["udp-rate.svg"],
            "fixed pools without changes have no timeline"
        );
        let svg = &svgs[0].1;
        for label in [
            "MSS 1472 B",
            "MSS 8972 B",
            "requested 3.00 Gbit/s",
            "sender threads",
        ] {
            assert!(svg.contains(label), "{label} missing");
        }
        let grew = json!([{"at_s": 0.5, "requested_bps": 1e9, "sent_bps": 1e9, "threads": 1},
                          {"at_s": 1.0, "requested_bps": 4e9, "sent_bps": 3e9, "threads": 2}]);
        let auto =
            json!({"experiment": "udp-rate", "rows": [rate_row(1472, 2, "auto", 3e9, grew)]});
        let svgs = svgs_of(&auto, "udp-rate-auto");
        let names: Vec<&str> = svgs.iter().map(|(f, _)| f.as_str()).collect();
        // A second run of one experiment gets its own file names.
        assert_eq!(names, ["udp-rate-auto-timeline-0.svg"]);
        assert!(svgs[0].1.contains("sender threads") && svgs[0].1.contains("requested"));
    }

    #[test]
    fn cycle_plots_the_median_over_repeats_beside_the_study() {
        let row = |t: &str, place: &str, ms: f64, repeat: u64, m: u64| {
            json!({"transport": t, "cycle_ms": ms, "cpu": 0.3, "placement": place,
                   "repeat": repeat, "max_multiplicity": m, "reached_limit": false})
        };
        let v = json!({"experiment": "cycle", "rows": [
            row("shm", "one-cpu", 1.0, 0, 500_000), row("shm", "one-cpu", 1.0, 1, 600_000),
            row("shm", "one-cpu", 1.0, 2, 550_000), row("udp", "one-cpu", 1.0, 0, 110_000),
            row("shm", "scheduler", 1.0, 0, 400_000), row("udp", "scheduler", 1.0, 0, 80_000),
            row("shm", "one-cpu", 10.0, 0, 900_000),
        ]});
        let (sec, svgs) = section_of(&v, "cycle");
        assert_eq!(svgs.len(), 1);
        assert_eq!(svgs[0].0, "cycle.svg");
        for label in [
            "shm, 0.3 CPU, both apps on one CPU",
            "udp, 0.3 CPU, placed by the kernel",
            &format!("{}: shm, 1 ms, 0.3 CPU", DOMINION.short),
            "cycle time (ms)",
        ] {
            assert!(svgs[0].1.contains(label), "{label} missing");
        }
        // The sentence: the median per placement, its ratio to the study and to udp.
        for part in [
            "shm at 1 ms, 0.3 CPU, both apps on one CPU: 550 000 u32 (2.75 × the study's 200 000), udp 110 000 u32, shm/udp 5.0 (medians of 3 repeats)",
            "shm at 1 ms, 0.3 CPU, placed by the kernel: 400 000 u32 (2.00 × the study's 200 000), udp 80 000 u32, shm/udp 5.0",
            "shm at 10 ms, 0.3 CPU, both apps on one CPU: 900 000 u32",
        ] {
            assert!(sec.sentence.contains(part), "{part:?} missing from {}", sec.sentence);
        }
    }

    #[test]
    fn cycle_at_one_cycle_time_is_a_bar_per_placement() {
        let row = |t: &str, place: &str, repeat: u64, m: u64| {
            json!({"transport": t, "cycle_ms": 1.0, "cpu": 0.3, "placement": place,
                   "repeat": repeat, "max_multiplicity": m, "reached_limit": false})
        };
        let mut first = row("shm", "one-cpu", 0, 500_000);
        first["trials"] = json!([{"multiplicity": 500_000, "success": false, "void": true},
                                 {"multiplicity": 500_000, "success": true, "void": false}]);
        let v = json!({"experiment": "cycle", "rows": [
            first, row("udp", "one-cpu", 0, 90_000),
            row("shm", "scheduler", 0, 350_000), row("udp", "scheduler", 0, 80_000),
            row("shm", "one-cpu", 1, 560_000), row("udp", "one-cpu", 1, 95_000),
            row("shm", "scheduler", 1, 380_000), row("udp", "scheduler", 1, 70_000),
        ]});
        let (sec, svgs) = section_of(&v, "cycle");
        assert_eq!(svgs.len(), 1);
        for label in [
            "Largest multiplicity at 1 ms",
            "both apps on one CPU",
            "placed by the kernel",
            "shm, 0.3 CPU",
            "udp, 0.3 CPU",
            &format!("{}: shm, 1 ms, 0.3 CPU", DOMINION.short),
            "530000",
        ] {
            assert!(svgs[0].1.contains(label), "{label} missing");
        }
        let caption = &sec.plots[0].caption;
        for part in [
            "shm, both apps on one CPU 500 000–560 000",
            "udp, placed by the kernel 70 000–80 000",
            "1 run(s) failed while the host stole CPU time",
        ] {
            assert!(caption.contains(part), "{part:?} missing from {caption}");
        }
    }
}
