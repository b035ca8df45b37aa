//! Across a link (--hosts 2): the tables, plots and summary of a link run.

use super::options::Config;
use super::report::transports_and_sizes;
use super::results::{fmt_opt, LinkSetup, Row, RowDelivery, Setup};
use crate::chart::{Plot, Section, SummaryLine, XySeries};
use crate::error::Result;
use crate::stats::median;
use crate::studies::{cite, cite_first, PACED_UDP};
use crate::subject::Subject;
use crate::table::Table;
use crate::units::format_size;

/// Whether the rows were measured across links (`--hosts 2`).
pub(super) fn is_link_run(rows: &[Row]) -> bool {
    rows.iter().any(|r| r.link_rate_bps.is_some())
}

/// The links of `rows`, fastest first: (bps, name).
pub(super) fn links_of(rows: &[Row]) -> Vec<(u64, String)> {
    let mut links: Vec<(u64, String)> = rows
        .iter()
        .filter_map(|r| Some((r.link_rate_bps?, r.link_rate.clone()?)))
        .collect();
    links.sort_by_key(|l| std::cmp::Reverse(l.0));
    links.dedup_by_key(|l| l.0);
    links
}

/// What the rounds of one transport at one size on one link add up to.
pub(super) struct LinkCell<'a> {
    pub(super) rows: Vec<&'a Row>,
}

impl<'a> LinkCell<'a> {
    pub(super) fn of(rows: &'a [Row], bps: u64, t: Subject, size: usize) -> LinkCell<'a> {
        LinkCell {
            rows: rows
                .iter()
                .filter(|r| {
                    r.link_rate_bps == Some(bps) && r.transport == t && r.size_bytes == size
                })
                .collect(),
        }
    }

    pub(super) fn gbps(&self) -> Option<f64> {
        median(
            self.rows
                .iter()
                .filter_map(|r| r.delivered_gbps)
                .filter(|g| *g > 0.0)
                .collect(),
        )
    }

    /// The median over the rounds of the ratio to TCP measured in the same round (iperf3's, or
    /// the lab's own stream where iperf3 did not run).
    pub(super) fn to_tcp(&self) -> Option<f64> {
        let of = |t: Subject| {
            median(
                self.rows
                    .iter()
                    .filter_map(|r| r.ratios.get(&t).copied())
                    .collect(),
            )
        };
        of(Subject::Iperf3Tcp).or_else(|| of(Subject::Tcp))
    }

    /// The median over the rounds of a row's value.
    pub(super) fn median_of(&self, f: fn(&Row) -> Option<f64>) -> Option<f64> {
        median(self.rows.iter().filter_map(|r| f(r)).collect())
    }

    /// The sum over the rounds; `None` if a round lacks it.
    pub(super) fn sum(&self, f: fn(&Row) -> Option<u64>) -> Option<u64> {
        if self.rows.is_empty() {
            return None;
        }
        self.rows.iter().map(|r| f(r)).sum()
    }

    /// Link packets over the minimum, in percent, over all rounds.
    pub(super) fn extra_percent(&self) -> Option<f64> {
        let (link, min) = (
            self.sum(|r| r.link_packets)?,
            self.sum(|r| r.min_link_packets)?,
        );
        (min > 0).then(|| (link as f64 - min as f64) * 100.0 / min as f64)
    }

    pub(super) fn skipped(&self) -> Option<&str> {
        self.rows.first().and_then(|r| r.skipped.as_deref())
    }
}

pub(super) fn fmt_count(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// "udp4 (reliable)" for ferry's rows, the name for the others.
pub(super) fn row_name(t: Subject, rows: &[&Row]) -> String {
    match rows.first().map(|r| r.delivery) {
        Some(d @ (RowDelivery::Reliable | RowDelivery::Latest)) => {
            format!("{} ({})", t.name(), d.name())
        }
        _ => t.name().to_owned(),
    }
}

pub(super) fn render_link_table(args: &Config, setup: &Setup, rows: &[Row]) -> String {
    let periodic = rows.iter().any(|r| r.period_s.is_some());
    let mut header = vec![
        "link",
        "transport",
        ">size",
        ">Gbit/s",
        if periodic {
            ">× tcp"
        } else {
            ">× iperf3-tcp"
        },
        ">delivered",
        ">lost",
        ">repairs",
        ">link pkts",
        ">minimum",
        ">extra",
        ">tbf drops",
    ];
    if periodic {
        header.extend([">p50 ms", ">p99 ms", ">on link ms"]);
    }
    let mut table = Table::new(&header);
    for (bps, name) in links_of(rows) {
        for &t in &args.transports {
            for &size in &args.sizes {
                let cell = LinkCell::of(rows, bps, t, size);
                if cell.rows.is_empty() {
                    continue;
                }
                let mut cells = vec![name.clone(), row_name(t, &cell.rows), format_size(size)];
                if let Some(s) = cell.skipped() {
                    cells.extend(vec![String::new(); 8]);
                    cells.push(s.to_owned());
                    table.row(cells);
                    continue;
                }
                let repairs = match cell.sum(|r| r.retransmitted) {
                    Some(n) => n.to_string(),
                    None if t.is_ferry_udp() || t == Subject::Iperf3Tcp => "unknown".to_owned(),
                    None => "-".to_owned(),
                };
                cells.extend([
                    fmt_opt(cell.gbps(), 3),
                    cell.to_tcp()
                        .map_or_else(|| "-".to_owned(), |r| format!("{r:.2} ×")),
                    fmt_count(cell.sum(|r| r.messages_delivered)),
                    fmt_count(cell.sum(|r| r.lost)),
                    repairs,
                    fmt_count(cell.sum(|r| r.link_packets)),
                    fmt_count(cell.sum(|r| r.min_link_packets)),
                    cell.extra_percent()
                        .map_or_else(|| "-".to_owned(), |e| format!("{e:+.1} %")),
                    fmt_count(cell.sum(|r| r.link_drops)),
                ]);
                if periodic {
                    cells.extend([
                        fmt_opt(cell.median_of(|r| r.latency_p50_ms), 1),
                        fmt_opt(cell.median_of(|r| r.latency_p99_ms), 1),
                        fmt_opt(cell.median_of(|r| r.serialization_ms), 1),
                    ]);
                }
                table.row(cells);
            }
        }
    }
    let tbf = setup.link.as_ref().map_or_else(String::new, |l| {
        l.links
            .iter()
            .map(|k| {
                format!(
                    "{}: tbf burst {} B, latency {} ms",
                    k.link_rate, k.tbf.burst_bytes, k.tbf.latency_ms
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    });
    let schedule = match args.period {
        Some(p) => format!(
            ", one message every {} ms on a fixed schedule",
            fmt_opt(Some(p * 1e3), 1)
        ),
        None => String::new(),
    };
    let latency = if periodic {
        "\np50, p99 ms: a message's latency from its send call to the whole message's arrival (median of rounds); on link ms: its payload's time on the link at the link's rate (size × 8 / rate; the tbf lets its burst through at once, so a message can arrive sooner)."
    } else {
        ""
    };
    format!(
        "\nThroughput across a link (two network namespaces, a veth pair, tc tbf on both ends; {tbf}), {:.1} s per run{schedule}, {} interleaved rounds (Gbit/s and × TCP: median of rounds; counts: all rounds); {}.\nlink pkts: sent on by the tbf of the publisher's end; minimum: what the delivered messages need (ferry: ceil(size / 1424) datagrams each; TCP: bytes / 1448).{latency}\n\n{}",
        args.duration,
        args.rounds,
        setup.pinning.describe(),
        table.render()
    )
}

/// The plots (goodput against the link rate, one per size) and a sentence per link.
pub(super) fn link_section(rows: &[Row], setup: Option<&LinkSetup>) -> Result<Section> {
    let (transports, sizes) = transports_and_sizes(rows);
    let links = links_of(rows);
    let mut plots = Vec::new();
    let periodic = rows.iter().any(|r| r.period_s.is_some());
    for &size in sizes.iter().filter(|_| periodic) {
        plots.extend(latency_plot(rows, &transports, &links, size)?);
    }
    for &size in sizes.iter().filter(|_| !periodic) {
        let series = link_series(rows, &transports, &links, size, |cell| {
            let g: Vec<f64> = cell.rows.iter().filter_map(|r| r.delivered_gbps).collect();
            let lo = g.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = g.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            cell.gbps()
                .map(|m| (m * 1e3, (g.len() > 1).then_some((lo * 1e3, hi * 1e3))))
        });
        if series.is_empty() {
            continue;
        }
        plots.push(link_rate_plot(
            ("goodput", size),
            &format!("Goodput across a link, {} messages", format_size(size)),
            ("delivered Mbit/s (median of rounds)", false),
            &series,
            "Two network namespaces joined by a veth pair with a tbf of the link's rate on both ends; the publisher in one, the subscriber in the other; median over the rounds, the bar spans them.",
        )?);
    }
    let mut said = Vec::new();
    let ferry = [Subject::Udp4, Subject::Udp4Key]
        .into_iter()
        .find(|t| transports.contains(t));
    for (bps, name) in &links {
        let Some(ferry) = ferry else { break };
        let per_size: Vec<String> = sizes
            .iter()
            .filter_map(|&size| {
                let cell = LinkCell::of(rows, *bps, ferry, size);
                let g = cell.gbps()?;
                let tcp_name = if LinkCell::of(rows, *bps, Subject::Iperf3Tcp, size)
                    .rows
                    .is_empty()
                {
                    Subject::Tcp
                } else {
                    Subject::Iperf3Tcp
                };
                let tcp_cell = LinkCell::of(rows, *bps, tcp_name, size);
                let tcp = tcp_cell.gbps();
                let ratio = cell.to_tcp().map_or_else(
                    || "TCP did not run beside it".to_owned(),
                    |r| {
                        format!(
                            "{r:.2} × {}'s {:.3} Gbit/s",
                            tcp_name.name(),
                            tcp.unwrap_or(0.0)
                        )
                    },
                );
                let latency = match (
                    cell.median_of(|r| r.latency_p50_ms),
                    cell.median_of(|r| r.latency_p99_ms),
                    cell.median_of(|r| r.serialization_ms),
                ) {
                    (Some(p50), Some(p99), Some(wire)) if wire > 0.0 => format!(
                        ", a message's latency p50 {p50:.1} ms and p99 {p99:.1} ms against its {wire:.1} ms on the link ({:.2} ×){}",
                        p99 / wire,
                        tcp_cell
                            .median_of(|r| r.latency_p99_ms)
                            .map_or_else(String::new, |t| format!(
                                " (TCP's p99 {t:.1} ms)"
                            ))
                    ),
                    _ => String::new(),
                };
                let extra = cell.extra_percent().map_or_else(
                    || "packets on the link unknown".to_owned(),
                    |e| format!("{e:+.1} % packets on the link over the minimum its messages need"),
                );
                Some(format!(
                    "{} {:.3} Gbit/s at {}, {ratio}, {extra}{latency}",
                    row_name(ferry, &cell.rows),
                    g,
                    format_size(size)
                ))
            })
            .collect();
        if !per_size.is_empty() {
            said.push(format!(
                "On the {name} link, ferry's {}.",
                per_size.join("; ")
            ));
        }
    }
    let tbf = setup.map_or_else(String::new, |l| {
        let each: Vec<String> = l
            .links
            .iter()
            .map(|k| format!("{} burst {} B", k.link_rate, k.tbf.burst_bytes))
            .collect();
        format!(
            " (tbf latency {} ms; {})",
            l.links.first().map_or(0, |k| k.tbf.latency_ms),
            each.join(", ")
        )
    });
    let beside = match rows.iter().find_map(|r| r.period_s) {
        Some(p) => format!(
            "Messages go one every {:.0} ms on a fixed schedule, as a camera or a lidar sends them, and the lab's own TCP stream sends the same messages on the same schedule in the same rounds.",
            p * 1e3
        ),
        None => "iperf3 over TCP and over UDP run in the same rounds.".to_owned(),
    };
    Ok(Section {
        plots,
        sentence: format!(
            "This follows {}, \"{}\": UDP in 1472-byte datagrams (a 1500-byte MTU) across a real link, as the base of a reliable transport that must stand beside TCP. Here the link is a veth pair between two network namespaces limited by tc tbf{tbf}. {beside} {}",
            cite_first(&PACED_UDP),
            PACED_UDP.title,
            said.join(" ")
        ),
    })
}

/// One series per transport at `size`: against the link rate in Mbit/s, the value `point` gives
/// for the transport's cell on each link (and its spread), links without one left out.
pub(super) fn link_series(
    rows: &[Row],
    transports: &[Subject],
    links: &[(u64, String)],
    size: usize,
    point: impl Fn(&LinkCell<'_>) -> Option<(f64, Option<(f64, f64)>)>,
) -> Vec<crate::chart::XySeries> {
    transports
        .iter()
        .map(|&t| {
            let mut pts: Vec<_> = links
                .iter()
                .filter_map(|&(bps, _)| {
                    let (y, spread) = point(&LinkCell::of(rows, bps, t, size))?;
                    Some((bps as f64 / 1e6, y, spread))
                })
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (t.name().to_owned(), pts)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect()
}

/// `--period`: each transport's message latency against the link rate (the point its median
/// p50, the bar up to its p99), beside the message's time on the link.
pub(super) fn latency_plot(
    rows: &[Row],
    transports: &[Subject],
    links: &[(u64, String)],
    size: usize,
) -> Result<Option<Plot>> {
    let mut series = link_series(rows, transports, links, size, |cell| {
        let p50 = cell.median_of(|r| r.latency_p50_ms)?;
        let p99 = cell.median_of(|r| r.latency_p99_ms)?;
        Some((p50, Some((p50, p99))))
    });
    if series.is_empty() {
        return Ok(None);
    }
    let mut wire: Vec<_> = links
        .iter()
        .map(|&(bps, _)| (bps as f64 / 1e6, size as f64 * 8.0 / bps as f64 * 1e3, None))
        .collect();
    wire.sort_by(|a, b| a.0.total_cmp(&b.0));
    series.push(("time on the link".to_owned(), wire));
    link_rate_plot(
        ("latency", size),
        &format!("Latency of periodic {} messages across a link", format_size(size)),
        ("ms from send to arrival (log)", true),
        &series,
        "Each message sent on a fixed schedule; the point is the median over the rounds of its p50 latency, the bar reaches the p99; \"time on the link\" is the message's payload at the link's rate, what it takes at the least (less the tbf's burst, which passes at once).",
    )
    .map(Some)
}

/// A plot of `series` against the link rate, in the file `throughput-{what}-{size}.svg`; its
/// y axis described by `y_desc`, logarithmic with `log_y`.
fn link_rate_plot(
    (what, size): (&str, usize),
    title: &str,
    (y_desc, log_y): (&str, bool),
    series: &[XySeries],
    caption: &str,
) -> Result<Plot> {
    Ok(Plot {
        file: format!(
            "throughput-{what}-{}.svg",
            format_size(size).replace(' ', "")
        ),
        svg: crate::chart::xy_chart(
            title,
            "link rate (Mbit/s, tc tbf)",
            y_desc,
            series,
            log_y,
            false,
            None,
        )?,
        caption: caption.to_owned(),
    })
}

/// Per link: ferry's goodput beside TCP's and plain UDP's, at the largest size measured.
pub(super) fn link_summary(rows: &[Row]) -> Vec<SummaryLine> {
    let (transports, sizes) = transports_and_sizes(rows);
    let Some(ferry) = [Subject::Udp4, Subject::Udp4Key]
        .into_iter()
        .find(|t| transports.contains(t))
    else {
        return Vec::new();
    };
    let Some(&size) = sizes.last() else {
        return Vec::new();
    };
    let say = |bps: u64, t: Subject| {
        let cell = LinkCell::of(rows, bps, t, size);
        cell.gbps().map(|g| format!("{}: {g:.3} Gbit/s", t.name()))
    };
    links_of(rows)
        .into_iter()
        .filter_map(|(bps, name)| {
            let cell = LinkCell::of(rows, bps, ferry, size);
            let g = cell.gbps()?;
            let mut ferry_says = format!("{}: {g:.3} Gbit/s", ferry.name());
            if let Some(r) = cell.to_tcp() {
                ferry_says.push_str(&format!(" ({r:.2} × TCP)"));
            }
            if let Some(e) = cell.extra_percent() {
                ferry_says.push_str(&format!(", {e:+.1} % packets over the minimum"));
            }
            // Periodic messages: each one's latency beside its time on the link.
            let p99 = |t: Subject| LinkCell::of(rows, bps, t, size).median_of(|r| r.latency_p99_ms);
            let wire = cell.median_of(|r| r.serialization_ms);
            if let (Some(p), Some(w)) = (p99(ferry), wire) {
                ferry_says.push_str(&format!(
                    "; a message's p99 latency {p:.1} ms against its {w:.1} ms on the link"
                ));
            }
            let tcp_periodic = p99(Subject::Tcp).map(|p| {
                let g = LinkCell::of(rows, bps, Subject::Tcp, size).gbps();
                format!(
                    "tcp (same schedule): {} Gbit/s, p99 latency {p:.1} ms",
                    fmt_opt(g, 3)
                )
            });
            let what = if wire.is_some() {
                format!(
                    "periodic {} messages across a {name} link: goodput and latency",
                    format_size(size)
                )
            } else {
                format!(
                    "goodput across a {name} link, {} messages",
                    format_size(size)
                )
            };
            Some(SummaryLine {
                what,
                ferry: ferry_says,
                floor: say(bps, Subject::RawUdp4),
                best_peer: tcp_periodic
                    .or_else(|| say(bps, Subject::Iperf3Tcp))
                    .or_else(|| say(bps, Subject::Iperf3)),
                study: Some(format!(
                    "1472-byte UDP datagrams across a 10 Gbit/s link ({})",
                    cite(&PACED_UDP)
                )),
            })
        })
        .collect()
}
