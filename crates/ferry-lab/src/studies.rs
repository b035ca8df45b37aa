//! The five published studies the lab reproduces, named once. Every text a user reads (help,
//! log lines, results JSON, the report) names a study by its title and authors through these
//! constants, never by an internal number.

/// A published study: what it is called and who wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Study {
    /// A stable identifier (lowercase, ASCII), for file names and JSON.
    pub key: &'static str,
    /// The title as the document gives it.
    pub title: &'static str,
    /// Who wrote it and where, as cited in parentheses.
    pub authors: &'static str,
    /// How a sentence names it, e.g. "the Vortex Lite performance whitepaper".
    pub short: &'static str,
}

/// The cyclic writer/reader test of the Dominion middleware: the largest u32 array per cycle
/// time under a CPU budget, over shared memory and over UDP.
pub const DOMINION: Study = Study {
    key: "dominion",
    title: "Performance Comparison Analysis of Data-Exchange Efficiency in Middleware Systems with UDP and Shared Memory",
    authors: "Giuliano Scollo, TU Braunschweig and DLR",
    short: "the Dominion UDP/shared-memory study",
};

/// The Roundtrip and Flood demonstrators over 4 DDS hubs, on one host and on two.
pub const DDS_HUBS: Study = Study {
    key: "dds-hubs",
    title: "DDS Performance Study",
    authors: "DDS-Demonstrators project, team Hurricane, Sogeti",
    short: "the DDS Roundtrip/Flood performance study",
};

/// Paced multithreaded UDP senders at a 1500-byte MTU and a manager that adds threads.
pub const PACED_UDP: Study = Study {
    key: "paced-udp",
    title: "High-speed UDP Data Transmission with Multithreading and Automatic Resource Allocation",
    authors: "Dmytro Syzov, Dmitry Kachan, Eduard Siemens, Anhalt University of Applied Sciences",
    short: "the multithreaded paced UDP study",
};

/// Vortex Lite's latency, throughput and footprint figures.
pub const VORTEX_LITE: Study = Study {
    key: "vortex-lite",
    title: "Vortex Lite Whitepaper: Performance and Footprint Characteristics",
    authors: "ADLINK",
    short: "the Vortex Lite performance whitepaper",
};

/// A wait-free spinning and a blocking shared-memory ring-buffer stream against UDP IPv4/IPv6.
pub const SHM_STREAM: Study = Study {
    key: "shm-stream",
    title: "共有メモリを用いたストリームの実験 (Experiments with streams over shared memory)",
    authors: "Kenta Kabashima, MusicScience37",
    short: "the cpp-shm-stream shared-memory stream experiments",
};

/// All five, in the order the lab's documentation lists them.
pub const ALL: [&Study; 5] = [&DOMINION, &DDS_HUBS, &PACED_UDP, &VORTEX_LITE, &SHM_STREAM];

/// How a sentence names a study: "the Vortex Lite performance whitepaper (ADLINK)".
pub fn cite(study: &Study) -> String {
    format!("{} ({})", study.short, study.authors)
}

/// [`cite`] at the start of a sentence: "The Vortex Lite performance whitepaper (ADLINK)".
pub fn cite_first(study: &Study) -> String {
    let c = cite(study);
    let mut chars = c.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => c,
    }
}

/// The full reference: "Authors: Title".
pub fn reference(study: &Study) -> String {
    format!("{}: {}", study.authors, study.title)
}

/// The list of references that ends `ferry lab --help`.
pub fn help() -> String {
    let mut s = String::from("The studies the lab reproduces:");
    for study in ALL {
        s.push_str("\n  ");
        s.push_str(&reference(study));
    }
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Words of the project's own bookkeeping that no user has heard of.
    const INTERNAL_WORDS: [&str; 5] = ["seed", "brief", "study-00", "study 00", "lab contract"];

    pub(crate) fn assert_clean(what: &str, text: &str) {
        // ASCII lowercase keeps byte offsets, so the excerpt lines up.
        let lower = text.to_ascii_lowercase();
        for word in INTERNAL_WORDS {
            if let Some(at) = lower.find(word) {
                let from = lower[..at]
                    .char_indices()
                    .rev()
                    .nth(60)
                    .map_or(0, |(i, _)| i);
                let to = (at + 60..lower.len())
                    .find(|&i| lower.is_char_boundary(i))
                    .unwrap_or(lower.len());
                panic!("{what} says {word:?}: ...{}...", &text[from..to]);
            }
        }
    }

    /// The source before its unit tests (which may name the words they forbid).
    fn before_tests(source: &str) -> &str {
        source.split("#[cfg(test)]").next().unwrap()
    }

    #[test]
    fn report_and_study_sources_use_no_internal_words() {
        assert_clean("report.rs", before_tests(include_str!("report.rs")));
        assert_clean("chart.rs", before_tests(include_str!("chart.rs")));
        assert_clean("studies.rs", before_tests(include_str!("studies.rs")));
    }

    #[test]
    fn readme_lists_every_study_by_title_and_authors() {
        let readme: String = include_str!("../../../README.md")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for study in ALL {
            assert!(
                readme.contains(study.title),
                "README lacks {:?}",
                study.title
            );
            assert!(
                readme.contains(study.authors),
                "README lacks {:?}",
                study.authors
            );
        }
    }

    #[test]
    fn cite_names_the_study_and_its_authors() {
        assert_eq!(
            cite(&VORTEX_LITE),
            "the Vortex Lite performance whitepaper (ADLINK)"
        );
        assert_eq!(
            cite_first(&VORTEX_LITE),
            "The Vortex Lite performance whitepaper (ADLINK)"
        );
        assert!(reference(&PACED_UDP).starts_with("Dmytro Syzov, Dmitry Kachan, Eduard Siemens"));
    }

    #[test]
    fn keys_are_distinct_and_plain() {
        for (i, a) in ALL.iter().enumerate() {
            assert!(a.key.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'));
            for b in &ALL[i + 1..] {
                assert_ne!(a.key, b.key);
            }
        }
    }
}
