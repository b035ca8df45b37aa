//! What a row of results measures, in one vocabulary for every experiment: ferry over one of its
//! transports (waiting as its name says, as topics or as a service), a raw baseline (the floor of
//! this machine), another system run in the same rounds, or a tool. Results, the command line and
//! the report call it the row's *transport*; each experiment measures some of the subjects
//! ([`Subjects`]) and refuses the others with the list of its own.

use std::collections::BTreeMap;

use ferry::{IpVersion, Qos, WaitStrategy};

use crate::error::{bail, Result};

crate::choice! {
    /// What a row measures.
    pub enum Subject: "transport" {
        /// ferry over shared memory, waiting as the experiment's wait says (adaptive where it
        /// has none).
        Shm = "shm",
        /// ferry over shared memory, the receiver spinning.
        ShmSpin = "shm-spin",
        /// ferry over shared memory, the receiver sleeping on a futex.
        ShmBlock = "shm-block",
        /// As shm-block, the reply waited for in a wait set beside idle subscribers.
        ShmBlockWaitSet = "shm-block-waitset",
        /// ferry's service (request and response) over shared memory, spinning.
        ShmSpinRr = "shm-spin-rr",
        /// ferry's service over shared memory, sleeping.
        ShmBlockRr = "shm-block-rr",
        /// ferry over UDP, IPv4.
        Udp4 = "udp4" | "udp",
        /// ferry over UDP, IPv4, with a domain key: every datagram authenticated and encrypted.
        Udp4Key = "udp4-key",
        /// ferry's service over UDP, IPv4.
        Udp4Rr = "udp4-rr",
        /// ferry over UDP, IPv6.
        Udp6 = "udp6",
        /// ferry's default for applications: shared memory on one host, UDP to other hosts.
        Auto = "auto",
        /// A baseline: two processes ping-ponging through raw shared memory, spinning.
        RawSpin = "raw-spin",
        /// A baseline: raw shared memory, sleeping on a futex.
        RawFutex = "raw-futex",
        /// A baseline: a plain UDP socket, one `send_to` per message.
        RawUdp4 = "raw-udp4",
        /// iceoryx2 publish/subscribe, its subscriber polled.
        Iceoryx2 = "iceoryx2",
        /// iceoryx2, its subscriber sleeping on its event service.
        Iceoryx2Block = "iceoryx2-block",
        /// iceoryx2's request/response.
        Iceoryx2Rr = "iceoryx2-rr",
        /// Zenoh publish/subscribe.
        Zenoh = "zenoh",
        /// Zenoh with its shared-memory provider.
        ZenohShm = "zenoh-shm",
        /// Zenoh's queryable (request/response).
        ZenohRr = "zenoh-rr",
        /// iperf3 over UDP.
        Iperf3 = "iperf3",
        /// iperf3 over TCP.
        Iperf3Tcp = "iperf3-tcp",
        /// The lab's own TCP stream.
        Tcp = "tcp",
        /// sockperf's throughput mode.
        Sockperf = "sockperf",
    }
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What kind of thing a subject is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// ferry's publish/subscribe.
    Ferry,
    /// ferry's services.
    FerryService,
    /// A raw baseline of the lab's own.
    Raw,
    /// Another system, run by `crates/ferry-peers`.
    Peer,
    /// A third-party tool (iperf3, sockperf) or the lab's TCP stream.
    Tool,
}

impl Subject {
    pub fn family(self) -> Family {
        use Subject::*;
        match self {
            Shm | ShmSpin | ShmBlock | ShmBlockWaitSet | Udp4 | Udp4Key | Udp6 | Auto => {
                Family::Ferry
            }
            ShmSpinRr | ShmBlockRr | Udp4Rr => Family::FerryService,
            RawSpin | RawFutex | RawUdp4 => Family::Raw,
            Iceoryx2 | Iceoryx2Block | Iceoryx2Rr | Zenoh | ZenohShm | ZenohRr => Family::Peer,
            Iperf3 | Iperf3Tcp | Tcp | Sockperf => Family::Tool,
        }
    }

    /// ferry's, as topics or as a service.
    pub fn is_ferry(self) -> bool {
        matches!(self.family(), Family::Ferry | Family::FerryService)
    }

    /// ferry's service (request and response) rather than topics.
    pub fn is_service(self) -> bool {
        self.family() == Family::FerryService
    }

    /// Another system, run by the `ferry-peers` binary.
    pub fn is_peer(self) -> bool {
        self.family() == Family::Peer
    }

    /// ferry's transport, for ferry's subjects.
    pub fn transport(self) -> Option<ferry::Transport> {
        use Subject::*;
        match self {
            Shm | ShmSpin | ShmBlock | ShmBlockWaitSet | ShmSpinRr | ShmBlockRr => {
                Some(ferry::Transport::Shm)
            }
            Udp4 | Udp4Key | Udp4Rr | Udp6 => Some(ferry::Transport::Udp),
            Auto => Some(ferry::Transport::Auto),
            _ => None,
        }
    }

    /// One of ferry's shared-memory subjects (they have rings to warm).
    pub fn is_ferry_shm(self) -> bool {
        self.transport() == Some(ferry::Transport::Shm)
    }

    /// One of ferry's UDP subjects.
    pub fn is_ferry_udp(self) -> bool {
        self.transport() == Some(ferry::Transport::Udp)
    }

    /// Whether its UDP datagrams are sealed with a domain key.
    pub fn keyed(self) -> bool {
        self == Subject::Udp4Key
    }

    /// The IP version of ferry's UDP subjects (auto's UDP: IPv4).
    pub fn ip_version(self) -> Option<IpVersion> {
        use Subject::*;
        match self {
            Udp4 | Udp4Key | Udp4Rr | Auto => Some(IpVersion::V4),
            Udp6 => Some(IpVersion::V6),
            _ => None,
        }
    }

    /// The wait its name says, for ferry's subjects that name one.
    pub fn wait(self) -> Option<WaitStrategy> {
        use Subject::*;
        match self {
            ShmSpin | ShmSpinRr => Some(WaitStrategy::Spin),
            ShmBlock | ShmBlockWaitSet | ShmBlockRr => Some(WaitStrategy::Block),
            _ => None,
        }
    }

    /// ferry's QoS for one of its subjects: the transport, the IP version, and the wait its
    /// name says, or `wait` where it says none. The experiment adds the rest (sizes, delivery,
    /// the MTU).
    pub fn qos(self, wait: WaitStrategy) -> Option<Qos> {
        let mut qos = Qos::default()
            .transport(self.transport()?)
            .wait(self.wait().unwrap_or(wait));
        if let Some(ip) = self.ip_version() {
            qos = qos.ip_version(ip);
        }
        Some(qos)
    }

    /// The third-party program behind a tool.
    pub fn program(self) -> Option<&'static str> {
        match self {
            Subject::Iperf3 | Subject::Iperf3Tcp => Some("iperf3"),
            Subject::Sockperf => Some("sockperf"),
            _ => None,
        }
    }
}

/// Each of `subjects` by name with what `describe` says it is, as a run's setup records them
/// (`transport_descriptions`): every experiment describes its subjects in its own words.
pub fn descriptions(
    subjects: &[Subject],
    describe: impl Fn(Subject) -> &'static str,
) -> BTreeMap<String, String> {
    subjects
        .iter()
        .map(|&s| (s.name().to_owned(), describe(s).to_owned()))
        .collect()
}

/// The subjects one experiment measures, in the order its help lists them.
#[derive(Debug, Clone, Copy)]
pub struct Subjects(pub &'static [Subject]);

impl Subjects {
    pub fn contains(&self, subject: Subject) -> bool {
        self.0.contains(&subject)
    }

    fn names(&self) -> String {
        self.0
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Reads one of them (a name or an alias), for the command line: another subject is
    /// refused with the list of these.
    pub fn parse(&self, text: &str) -> std::result::Result<Subject, String> {
        match text.parse::<Subject>() {
            Ok(s) if self.contains(s) => Ok(s),
            Ok(s) => Err(format!(
                "this experiment does not measure {:?}; valid transports: {}",
                s.name(),
                self.names()
            )),
            Err(_) => Err(format!(
                "unknown transport {:?}; valid transports: {}",
                text.trim(),
                self.names()
            )),
        }
    }

    /// Refuses a list (a configuration's, or a peer request's one) that is empty, names a
    /// subject twice, or names one not among these.
    pub fn check(&self, option: &str, list: &[Subject]) -> Result<()> {
        crate::distinct_list(option, list, |s| s.name().to_owned())?;
        if let Some(s) = list.iter().find(|s| !self.contains(**s)) {
            bail!(
                "{option}: this experiment does not measure {}; valid transports: {}",
                s.name(),
                self.names()
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_round_trip_through_json() {
        crate::args::tests::check::<Subject>();
    }

    #[test]
    fn each_family_is_what_its_questions_say() {
        for &s in Subject::ALL {
            assert_eq!(s.is_ferry(), s.transport().is_some(), "{s:?}");
            assert_eq!(
                s.is_ferry(),
                s.qos(WaitStrategy::Adaptive).is_some(),
                "{s:?}"
            );
            assert_eq!(
                s.program().is_some(),
                matches!(s, Subject::Iperf3 | Subject::Iperf3Tcp | Subject::Sockperf)
            );
            if s.wait().is_some() {
                assert!(s.is_ferry_shm(), "{s:?}");
            }
        }
        let q = Subject::Udp6.qos(WaitStrategy::Block).unwrap();
        assert_eq!(
            (q.transport, q.ip_version, q.wait),
            (ferry::Transport::Udp, IpVersion::V6, WaitStrategy::Block)
        );
        let q = Subject::ShmSpin.qos(WaitStrategy::Block).unwrap();
        assert_eq!(
            (q.transport, q.wait),
            (ferry::Transport::Shm, WaitStrategy::Spin)
        );
    }

    #[test]
    fn an_experiment_reads_its_own_subjects_and_refuses_the_others_with_its_list() {
        let these = Subjects(&[Subject::Shm, Subject::Udp4]);
        assert_eq!(these.parse("udp4"), Ok(Subject::Udp4));
        assert_eq!(these.parse(" udp"), Ok(Subject::Udp4), "an alias");
        assert_eq!(
            these.parse("tcp").unwrap_err(),
            "this experiment does not measure \"tcp\"; valid transports: shm, udp4"
        );
        assert_eq!(
            these.parse("carrier-pigeon").unwrap_err(),
            "unknown transport \"carrier-pigeon\"; valid transports: shm, udp4"
        );
        assert!(these.check("--transport", &[Subject::Shm]).is_ok());
        let e = these
            .check("--transport", &[Subject::Shm, Subject::Zenoh])
            .unwrap_err();
        assert!(e.to_string().contains("does not measure zenoh"), "{e}");
        let e = these
            .check("--transport", &[Subject::Shm, Subject::Shm])
            .unwrap_err();
        assert_eq!(e.to_string(), "--transport: shm is listed twice");
        assert!(these.check("--transport", &[]).is_err());
    }
}
