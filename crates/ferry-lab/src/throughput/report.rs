//! The report's section and summary of a run on one host.

use super::results::median_of;
use super::results::{fmt_rate, Row};
use crate::chart::{line_chart, Plot, Section, SummaryLine};
use crate::error::Result;
use crate::stats::median;
use crate::studies::{cite, VORTEX_LITE};
use crate::subject::Subject;
use crate::units::format_size;

/// The transports of `rows` in the order they first appear, and their sizes in ascending order.
pub(super) fn transports_and_sizes(rows: &[Row]) -> (Vec<Subject>, Vec<usize>) {
    let mut transports: Vec<Subject> = Vec::new();
    for r in rows {
        if !transports.contains(&r.transport) {
            transports.push(r.transport);
        }
    }
    let mut sizes: Vec<usize> = rows.iter().map(|r| r.size_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    (transports, sizes)
}

pub(super) fn section(rows: &[Row]) -> Result<Section> {
    let (transports, sizes) = transports_and_sizes(rows);
    let series: Vec<(String, Vec<(f64, f64)>)> = transports
        .iter()
        .map(|&t| {
            let pts: Vec<(f64, f64)> = sizes
                .iter()
                .filter_map(|&s| median_of(rows, t, s, |r| r.delivered_gbps).map(|m| (s as f64, m)))
                .collect();
            (t.name().to_owned(), pts)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect();
    let mut plots = Vec::new();
    if !series.is_empty() {
        plots.push(Plot {
            file: "throughput.svg".to_owned(),
            svg: line_chart(
                "Throughput by message size",
                "message size",
                "delivered Gbit/s (median of rounds)",
                &series,
                &|y| format!("{y:.2}"),
            )?,
            caption: "Messages sent back to back to a subscriber in another process; median over the rounds; log axes.".to_owned(),
        });
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
    Ok(Section {
        plots,
        sentence: format!(
            "In {}, Vortex Lite reaches the ~950 Mbit/s of Gigabit Ethernet from messages under 2 KB (110 000 messages/s at 1 KB). Here, best delivered rates: {}.{}",
            cite(&VORTEX_LITE),
            best.join(", "),
            versus_peers(rows)
        ),
    })
}

/// " ferry (shm) against iceoryx2 in the same rounds ...": for each other system that ran beside
/// ferry's shared memory, ferry's delivered rate over the system's per size (the median over the
/// rounds of the per-round ratio); empty when none ran beside it.
pub(super) fn versus_peers(rows: &[Row]) -> String {
    let (transports, sizes) = transports_and_sizes(rows);
    let mut out = String::new();
    for peer in transports.into_iter().filter(|t| t.is_peer()) {
        let said: Vec<String> = sizes
            .iter()
            .filter_map(|&size| {
                let per_round: Vec<f64> = rows
                    .iter()
                    .filter(|r| r.transport == peer && r.size_bytes == size)
                    .filter_map(|r| r.ratios.get(&Subject::Shm))
                    .filter(|&&r| r > 0.0)
                    .map(|r| 1.0 / r)
                    .collect();
                median(per_round).map(|m| format!("{m:.2} × at {}", format_size(size)))
            })
            .collect();
        if !said.is_empty() {
            out.push_str(&format!(
                " ferry (shm) against {} in the same rounds (ferry's delivered rate over {}'s): {}.",
                peer.name(),
                peer.name(),
                said.join(", ")
            ));
        }
    }
    out
}

/// The Vortex Lite whitepaper's throughput figures beside ferry's UDP, the plain-UDP floor and
/// the best tool measured in the same run: the message rate at 1 KB, and the best rate below
/// 2 KB.
pub(super) fn summary(rows: &[Row]) -> Vec<SummaryLine> {
    let (transports, sizes) = transports_and_sizes(rows);
    let measured = |t: Subject| {
        rows.iter()
            .any(|r| r.transport == t && r.delivered_gbps.is_some())
    };
    let Some(ferry) = [Subject::Udp4, Subject::Udp6, Subject::Udp4Key]
        .into_iter()
        .find(|&t| transports.contains(&t) && measured(t))
    else {
        return Vec::new();
    };

    // Messages per second at 1 KB.
    let rate_at = |t: Subject| median_of(rows, t, 1024, |r| r.messages_per_s);
    let say_rate = |t: Subject, v: f64| format!("{}: {} msg/s", t.name(), fmt_rate(Some(v)));
    let rate = beside_floor_and_tools(
        format!("messages per second, 1 KB messages, {}", ferry.name()),
        ferry,
        rate_at,
        |v| v,
        say_rate,
        format!(
            "110 000 messages/s at 1 KB across Gigabit Ethernet ({})",
            cite(&VORTEX_LITE)
        ),
    );

    // The best delivered rate below 2 KB.
    let best_below_2k = |t: Subject| {
        sizes
            .iter()
            .filter(|&&s| s < 2048)
            .filter_map(|&s| median_of(rows, t, s, |r| r.delivered_gbps).map(|g| (s, g)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    };
    let say_gbps = |t: Subject, (s, g): (usize, f64)| {
        format!("{}: {g:.2} Gbit/s at {}", t.name(), format_size(s))
    };
    let best = beside_floor_and_tools(
        format!("best delivered rate below 2 KB, {}", ferry.name()),
        ferry,
        best_below_2k,
        |(_, g)| g,
        say_gbps,
        format!(
            "about 950 Mbit/s, the limit of Gigabit Ethernet, from messages under 2 KB ({})",
            cite(&VORTEX_LITE)
        ),
    );
    rate.into_iter().chain(best).collect()
}

/// A summary line of `figure` (said by `say`): ferry's, beside the plain-UDP floor's and the
/// best tool's (the highest `rank`) measured in the same run; `None` without ferry's.
fn beside_floor_and_tools<V: Copy>(
    what: String,
    ferry: Subject,
    figure: impl Fn(Subject) -> Option<V>,
    rank: impl Fn(V) -> f64,
    say: impl Fn(Subject, V) -> String,
    study: String,
) -> Option<SummaryLine> {
    let mine = figure(ferry)?;
    Some(SummaryLine {
        what,
        ferry: say(ferry, mine),
        floor: figure(Subject::RawUdp4).map(|v| say(Subject::RawUdp4, v)),
        best_peer: [Subject::Iperf3, Subject::Sockperf]
            .into_iter()
            .filter_map(|t| figure(t).map(|v| (t, v)))
            .max_by(|a, b| rank(a.1).total_cmp(&rank(b.1)))
            .map(|(t, v)| say(t, v)),
        study: Some(study),
    })
}
