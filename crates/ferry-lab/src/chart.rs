//! What an experiment draws for the report: box plots, line, scatter and bar charts
//! (plotters, SVG backend, no fonts needed: text stays SVG `<text>`), and the section and
//! summary lines an experiment hands the report ([`crate::report`] puts them on the page).

use std::fmt::Write as _;

use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::Result;
use crate::units::{format_ns, format_size};

pub(crate) const W: u32 = 960;
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
pub(crate) const GREY: RGBColor = RGBColor(150, 150, 150);
const FONT: &str = "sans-serif";

pub(crate) fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// An SVG document `size` pixels large, white, with what `draw` puts on it.
fn svg_document(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<()>,
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)?;
        draw(&root)?;
        root.present()?;
    }
    Ok(svg)
}

/// A chart on `area` with `title` above, label areas `x_labels` pixels high (x) and `y_labels`
/// wide (y), as the full-width charts have them.
fn titled<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
    x_labels: u32,
    y_labels: u32,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(title, (FONT, 22))
        .margin(16)
        .x_label_area_size(x_labels)
        .y_label_area_size(y_labels);
    builder
}

/// Draws the axes as configured, their labels and descriptions in the charts' type sizes.
fn draw_axes<X, Y>(mesh: &mut MeshStyle<'_, '_, X, Y, SVGBackend<'_>>) -> Result<()>
where
    X: Ranged + ValueFormatter<X::ValueType>,
    Y: Ranged + ValueFormatter<Y::ValueType>,
{
    mesh.label_style((FONT, 15))
        .axis_desc_style((FONT, 16))
        .draw()?;
    Ok(())
}

/// Draws the axes with `x_labels` labels on x and 8 on y, written by `x_fmt` and `y_fmt`, and
/// their descriptions, as [`draw_axes`] does.
fn draw_described_axes<'b, X, Y>(
    mesh: &mut MeshStyle<'_, 'b, X, Y, SVGBackend<'_>>,
    x_labels: usize,
    x_fmt: &'b dyn Fn(&f64) -> String,
    y_fmt: &'b dyn Fn(&f64) -> String,
    (x_desc, y_desc): (&str, &str),
) -> Result<()>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    draw_axes(
        mesh.x_labels(x_labels)
            .x_label_formatter(x_fmt)
            .y_labels(8)
            .y_label_formatter(y_fmt)
            .x_desc(x_desc)
            .y_desc(y_desc),
    )
}

/// Draws the legend at `position`, its text `font_size` pixels high, on a white box.
fn draw_legend<'a, 'b: 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, CT>,
    position: SeriesLabelPosition,
    font_size: u32,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, font_size))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// The label of the category at `x` on an axis of categories at 0, 1, 2...; none between them.
fn category_label(labels: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() < 0.01 && i >= 0.0 && (i as usize) < labels.len() {
        labels[i as usize].clone()
    } else {
        String::new()
    }
}

/// A line series' key in the legend: a short stroke in `style`.
fn line_key(style: ShapeStyle) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style)
}

/// A box or bar series' key in the legend: a small filled box of `color`.
fn box_key(color: RGBColor) -> impl Fn((i32, i32)) -> Rectangle<(i32, i32)> {
    move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], color.filled())
}

// ---------------------------------------------------------------------------------------------
// JSON helpers

/// A whole count with spaces between thousands: 1234567 → "1 234 567".
pub(crate) fn format_thousands(v: f64) -> String {
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

    /// Box p25 to p75 (p50 to p90 without them), whiskers min and p99, a dot at p99.9.
    pub(crate) fn of_quartiles(s: &crate::Summary, p25: Option<u64>, p75: Option<u64>) -> Glyph {
        let f = |v: u64| (v as f64).max(1.0);
        let (lo, hi) = match (p25, p75) {
            (Some(a), Some(b)) => (a, b),
            _ => (s.p50_ns, s.p90_ns),
        };
        Glyph {
            lo: f(lo),
            hi: f(hi),
            ..Glyph::of_summary(s)
        }
    }
}

/// A section of box plots by size and transport: the plot's file, title, y axis and caption.
pub(crate) struct SizeBoxes {
    pub(crate) file: &'static str,
    pub(crate) title: &'static str,
    pub(crate) y_desc: &'static str,
    pub(crate) caption: &'static str,
}

impl SizeBoxes {
    /// The section of `cells` (transport, size, box; none where it was not measured): the plot,
    /// and the sentence `sentence` makes of a phrase with every transport's p50 at the smallest
    /// and the largest size.
    pub(crate) fn section<'a>(
        &self,
        cells: impl IntoIterator<Item = (&'a str, usize, Option<Glyph>)>,
        sentence: impl FnOnce(&str) -> String,
    ) -> Result<Section> {
        let cells: Vec<_> = cells.into_iter().collect();
        let (svg, phrase) = size_boxes(self.title, self.y_desc, &cells)?;
        Ok(Section {
            plots: vec![Plot {
                file: self.file.to_owned(),
                svg,
                caption: self.caption.to_owned(),
            }],
            sentence: sentence(&phrase),
        })
    }
}

/// Box plots by size and transport from typed cells `(transport, size, summary)`, and a phrase
/// with every transport's p50 at the smallest and the largest size.
fn size_boxes(
    title: &str,
    y_desc: &str,
    cells: &[(&str, usize, Option<Glyph>)],
) -> Result<(String, String)> {
    let mut sizes: Vec<u64> = cells.iter().map(|c| c.1 as u64).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut transports: Vec<&str> = Vec::new();
    for c in cells {
        if !transports.contains(&c.0) {
            transports.push(c.0);
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

/// Box plots per size (x, categorical) and transport (colour) on a log y axis, like the
/// cpp-shm-stream experiments.
fn box_plot(
    title: &str,
    y_desc: &str,
    sizes: &[u64],
    series: &[(String, Vec<Option<Glyph>>)],
) -> Result<String> {
    svg_document((W, H), |root| {
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
        let mut chart = titled(root, title, 48, 86)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (lo / 1.5..hi * 1.5).log_scale())?;
        let labels: Vec<String> = sizes.iter().map(|&s| format_size(s as usize)).collect();
        draw_described_axes(
            chart.configure_mesh().disable_x_mesh(),
            n * 2 + 1,
            &|x| category_label(&labels, *x),
            &|y| format_ns(*y),
            ("message size", y_desc),
        )?;
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
                .legend(box_key(c));
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 15)
    })
}

/// A line chart with points; log axes where asked.
pub(crate) fn line_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
    y_fmt: &dyn Fn(f64) -> String,
) -> Result<String> {
    svg_document((W, H), |root| {
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
        let mut chart = titled(root, title, 48, 80)
            .build_cartesian_2d((x0.log2() - 0.5)..(x1.log2() + 0.5), (y0..y1).log_scale())?;
        // x is log2 of the size, so that the ticks fall on powers of two.
        let ticks = (x1.log2() - x0.log2()).round() as usize + 2;
        draw_described_axes(
            &mut chart.configure_mesh(),
            ticks * 2 + 1,
            &|x| {
                let i = x.round();
                if (x - i).abs() < 0.01 && i >= 0.0 {
                    format_size(2f64.powf(i) as usize)
                } else {
                    String::new()
                }
            },
            &|y| y_fmt(*y),
            (x_desc, y_desc),
        )?;
        for (i, (name, points)) in series.iter().enumerate() {
            let c = color(i);
            let points: Vec<(f64, f64)> = points.iter().map(|&(x, y)| (x.log2(), y)).collect();
            chart
                .draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))?
                .label(name.clone())
                .legend(line_key(c.stroke_width(3)));
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight, 15)
    })
}

/// One series of an x/y chart: its name and points `(x, y, spread)`, where `spread` is an
/// optional (low, high) drawn as an error bar.
pub(crate) type XySeries = (String, Vec<(f64, f64, Option<(f64, f64)>)>);

/// A line chart on linear axes (log y with `log_y`), points joined in x order, error bars where
/// a point has a spread, and an optional dashed horizontal reference line with its label.
pub(crate) fn xy_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[XySeries],
    log_y: bool,
    integer_x: bool,
    reference: Option<(&str, f64)>,
) -> Result<String> {
    svg_document((W, H), |root| {
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
        // One x (a single link rate, say): the point sits in the middle of an axis half its value
        // wide on either side, not on ticks a fraction apart.
        let pad = if x1 > x0 {
            ((x1 - x0) * 0.05).max(0.5)
        } else {
            (x0.abs() * 0.5).max(0.5)
        };
        let xr = (x0 - pad)..(x1 + pad);
        let x_span = (x0 - pad, x1 + pad);
        // Linear y: from 0 to a little above the largest value.
        let y_top = if y1 > 0.0 { y1 * 1.15 } else { 1.0 };
        let mut chart = titled(root, title, 48, 80);
        // Two code paths because log and linear y are different coordinate types.
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart;
                draw_described_axes(
                    &mut chart.configure_mesh(),
                    if integer_x {
                        (x1 - x0) as usize + 3
                    } else {
                        10
                    },
                    &|x| {
                        if !integer_x {
                            format_count(*x)
                        } else if (x - x.round()).abs() < 1e-6 {
                            format!("{x:.0}")
                        } else {
                            String::new()
                        }
                    },
                    &|y| format_count(*y),
                    (x_desc, y_desc),
                )?;
                if let Some((label, r)) = reference {
                    chart
                        .draw_series(DashedLineSeries::new(
                            vec![(x0 - pad, r), (x1 + pad, r)],
                            8,
                            6,
                            GREY.stroke_width(2),
                        ))?
                        .label(label.to_owned())
                        .legend(line_key(GREY.stroke_width(2)));
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
                        .legend(line_key(c.stroke_width(3)));
                    chart.draw_series(
                        pts.iter()
                            .map(|&(x, y, _)| Circle::new((x, y), 4, c.filled())),
                    )?;
                    chart.draw_series(pts.iter().filter_map(|&(x, _, spread)| {
                        let (lo, hi) = spread?;
                        Some(PathElement::new(vec![(x, lo), (x, hi)], c.stroke_width(2)))
                    }))?;
                }
                let position = if log_y {
                    SeriesLabelPosition::UpperRight
                } else {
                    let points: Vec<(f64, f64)> = series
                        .iter()
                        .flat_map(|(_, p)| p.iter().map(|&(x, y, _)| (x, y)))
                        .collect();
                    let labels = series.iter().map(|(name, _)| name.len());
                    let longest = labels.chain(reference.map(|(l, _)| l.len())).max();
                    let entries = series.len() + usize::from(reference.is_some());
                    free_corner(&points, x_span, y_top, entries, longest.unwrap_or(0))
                };
                draw_legend(&mut chart, position, 15)?;
            }};
        }
        if log_y {
            let lo = (y0 / 2.0).max(1e-9);
            let hi = (y1 * 2.0).max(lo * 10.0);
            draw!(chart.build_cartesian_2d(xr, (lo..hi).log_scale())?);
        } else {
            draw!(chart.build_cartesian_2d(xr, 0.0..y_top)?);
        }
        Ok(())
    })
}

/// The corner of a linear chart (x from `x.0` to `x.1`, y from 0 to `y_top`) where a legend of
/// `entries` lines, the longest `longest` characters, covers the fewest of `points`: upper
/// right, upper left, lower right, lower left, the first of those as free.
fn free_corner(
    points: &[(f64, f64)],
    x: (f64, f64),
    y_top: f64,
    entries: usize,
    longest: usize,
) -> SeriesLabelPosition {
    // The legend's size as a share of the plotting area (about 850 × 400 pixels): a line of
    // 20 pixels per entry, 8 pixels a character beside a 60-pixel key.
    let width = ((longest * 8 + 60) as f64 / 850.0).min(0.9) * (x.1 - x.0);
    let height = ((entries * 20 + 16) as f64 / 400.0).min(0.9) * y_top;
    let corners = [
        (
            SeriesLabelPosition::UpperRight,
            x.1 - width..=x.1,
            y_top - height..=y_top,
        ),
        (
            SeriesLabelPosition::UpperLeft,
            x.0..=x.0 + width,
            y_top - height..=y_top,
        ),
        (
            SeriesLabelPosition::LowerRight,
            x.1 - width..=x.1,
            0.0..=height,
        ),
        (
            SeriesLabelPosition::LowerLeft,
            x.0..=x.0 + width,
            0.0..=height,
        ),
    ];
    let covered = |(xs, ys): (
        &std::ops::RangeInclusive<f64>,
        &std::ops::RangeInclusive<f64>,
    )| {
        points
            .iter()
            .filter(|(px, py)| xs.contains(px) && ys.contains(py))
            .count()
    };
    corners
        .into_iter()
        .min_by_key(|(_, xs, ys)| covered((xs, ys)))
        .map_or(SeriesLabelPosition::UpperRight, |(p, _, _)| p)
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
pub(crate) fn timeline_chart(
    title: &str,
    at_s: &[f64],
    requested: &[f64],
    sent: &[f64],
    threads: &[f64],
) -> Result<String> {
    svg_document((W, H), |root| {
        let (top, bottom) = root.split_vertically(H * 62 / 100);
        let t1 = at_s.iter().copied().fold(0.0f64, f64::max).max(0.1);
        let r1 = requested
            .iter()
            .chain(sent)
            .copied()
            .fold(0.0f64, f64::max)
            .max(1e-3)
            * 1.2;
        let mut chart = titled(&top, title, 28, 80).build_cartesian_2d(0.0..t1, 0.0..r1)?;
        draw_axes(
            chart
                .configure_mesh()
                .x_labels(10)
                .y_labels(6)
                .y_desc("Gbit/s"),
        )?;
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
            .legend(line_key(GREY.stroke_width(2)));
        chart
            .draw_series(LineSeries::new(pts(sent), c.stroke_width(2)))?
            .label("sent (per interval)")
            .legend(line_key(c.stroke_width(3)));
        draw_legend(&mut chart, SeriesLabelPosition::LowerRight, 15)?;
        let n1 = threads.iter().copied().fold(1.0f64, f64::max) + 1.0;
        let mut lower = ChartBuilder::on(&bottom)
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..t1, 0.0..n1)?;
        draw_axes(
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
                .y_desc("sender threads"),
        )?;
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
        Ok(())
    })
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
    let x_fmt = |x: &f64| category_label(&b.categories, *x);
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
                    .legend(box_key(c));
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
                    .legend(line_key(RED.stroke_width(2)));
            }
            draw_legend(&mut $chart, SeriesLabelPosition::UpperLeft, 13)?;
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
    svg_document((width, H), |root| {
        let areas = root.split_evenly((1, panels.len().max(1)));
        for (a, p) in areas.iter().zip(panels) {
            draw_bars(a, p)?;
        }
        Ok(())
    })
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

impl Section {
    /// The section with its SVG files named after `stem` instead of the experiment's `name`
    /// (the suite names a second run of an experiment after its step: `latency-m2.svg`).
    pub fn named_after(mut self, name: &str, stem: &str) -> Section {
        if stem != name {
            for plot in &mut self.plots {
                if let Some(rest) = plot.file.strip_prefix(name) {
                    plot.file = format!("{stem}{rest}");
                }
            }
        }
        self
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_legend_goes_where_it_covers_the_fewest_points() {
        let corner = |points: &[(f64, f64)]| free_corner(points, (0.0, 10.0), 100.0, 3, 20);
        assert_eq!(corner(&[]), SeriesLabelPosition::UpperRight);
        // A line along the top at the right: the upper left is free.
        let right_high: Vec<(f64, f64)> = (5..=10).map(|x| (x as f64, 95.0)).collect();
        assert_eq!(corner(&right_high), SeriesLabelPosition::UpperLeft);
        // Along the whole top: the lower right.
        let high: Vec<(f64, f64)> = (0..=10).map(|x| (x as f64, 95.0)).collect();
        assert_eq!(corner(&high), SeriesLabelPosition::LowerRight);
        // Along the top and the bottom at the right: the lower left.
        let mut both = high.clone();
        both.extend((5..=10).map(|x| (x as f64, 5.0)));
        assert_eq!(corner(&both), SeriesLabelPosition::LowerLeft);
        // Everywhere: the fewest covered, the first of those.
        let all: Vec<(f64, f64)> = (0..=10)
            .flat_map(|x| (0..=10).map(move |y| (x as f64, y as f64 * 10.0)))
            .collect();
        assert_eq!(corner(&all), SeriesLabelPosition::UpperRight);
    }
}
