//! A node's configuration as a value: its domain, the mode of the shared memory it creates, the
//! impairment of its UDP traffic, its domain key and how discovery finds other hosts.
//! [`NodeConfig::from_env`] is the one place ferry reads its environment variables.

use std::cell::RefCell;
use std::ffi::OsString;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

use crate::udp::discovery::{self, DiscoveryConfig};
use crate::udp::impair::ImpairConfig;
use crate::{DomainKey, Error};

/// The domain of a node when none is named.
pub const DEFAULT_DOMAIN: &str = "default";
/// The mode of the shared memory a node creates unless told otherwise: its owner's alone.
pub const DEFAULT_SHM_MODE: u32 = 0o600;

/// How a node is set up; [`Node::with_config`](crate::Node::with_config) makes one from it.
/// `Default` reads nothing: the domain `default`, owner-only shared memory, no impairment, no
/// key, and discovery that reaches no other host. [`NodeConfig::from_env`] starts from the
/// `FERRY_*` variables instead (what `Node::new` does); the `with_*` methods change one setting.
///
/// ```no_run
/// use ferry::{Impairment, Node, NodeConfig};
/// let config = NodeConfig::from_env()?
///     .with_domain("test")
///     .with_impairment(Some(Impairment::parse("loss=5%,seed=1")?));
/// let node = Node::with_config("lossy", config)?;
/// # Ok::<(), ferry::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfig {
    domain: String,
    shm_mode: u32,
    impairment: Option<Impairment>,
    key: Option<DomainKey>,
    discovery: DiscoveryConfig,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            domain: DEFAULT_DOMAIN.to_owned(),
            shm_mode: DEFAULT_SHM_MODE,
            impairment: None,
            key: None,
            discovery: DiscoveryConfig::default(),
        }
    }
}

impl NodeConfig {
    /// The configuration the `FERRY_*` variables describe, every unset (or empty) one at its
    /// default; the one place ferry reads its environment.
    ///
    /// | variable | setting | unset |
    /// |---|---|---|
    /// | `FERRY_DOMAIN` | [`NodeConfig::with_domain`] | `default` |
    /// | `FERRY_SHM_MODE` | [`NodeConfig::with_shm_mode`] (octal, read and write bits only) | `0600` |
    /// | `FERRY_IMPAIR` | [`NodeConfig::with_impairment`] ([`Impairment::parse`]) | none |
    /// | `FERRY_KEY_FILE` | [`NodeConfig::with_key`] (the file, read by [`DomainKey::from_file`]) | no key |
    /// | `FERRY_DISCOVERY_PORT`, `FERRY_PEERS`, `FERRY_DISCOVERY`, `FERRY_DISCOVERY_GROUP`, `FERRY_DISCOVERY_IFACE`, `FERRY_DISCOVERY_MAX_REMOTES`, `FERRY_DISCOVERY_MAX_PER_SOURCE`, `FERRY_DISCOVERY_MAX_AGENTS` | [`NodeConfig::with_discovery`] (the fields of [`DiscoveryConfig`]) | reaches no other host |
    ///
    /// A value it cannot understand is an error ([`Error::InvalidConfig`]) that names the
    /// variable and says what to write, never a silent default; the error names every such
    /// variable at once. The domain's name is checked when a node is made with it.
    pub fn from_env() -> Result<NodeConfig, Error> {
        NodeConfig::from_vars(|name| std::env::var_os(name), true)
    }

    /// As [`NodeConfig::from_env`] without reading `FERRY_KEY_FILE`: for the constructors that
    /// are given the key.
    pub(crate) fn from_env_without_key() -> Result<NodeConfig, Error> {
        NodeConfig::from_vars(|name| std::env::var_os(name), false)
    }

    /// The configuration the variables `var` gives describe (`None`: unset).
    fn from_vars(
        var: impl Fn(&str) -> Option<OsString>,
        read_key: bool,
    ) -> Result<NodeConfig, Error> {
        // Variables that are not UTF-8 (each is a problem of its own).
        let not_text = RefCell::new(Vec::new());
        let text = |name: &str| -> Option<String> {
            let v = var(name)?;
            match v.into_string() {
                Ok(s) if s.trim().is_empty() => None,
                Ok(s) => Some(s.trim().to_owned()),
                Err(_) => {
                    not_text.borrow_mut().push(format!(
                        "{name} is not valid UTF-8; set it again, or unset it"
                    ));
                    None
                }
            }
        };
        let mut problems = Vec::new();
        let mut c = NodeConfig::default();
        if let Some(d) = text("FERRY_DOMAIN") {
            match crate::names::validate_domain(&d) {
                Ok(()) => c.domain = d,
                Err(e) => problems.push(format!("FERRY_DOMAIN: {e}; set it to one, or unset it")),
            }
        }
        if let Some(m) = text("FERRY_SHM_MODE") {
            match parse_mode(&m) {
                Some(mode) => c.shm_mode = mode,
                None => problems.push(format!(
                    "FERRY_SHM_MODE='{m}' is not an octal mode of read and write bits that lets \
                     its owner read and write; set it to one such as 0660 (the group may read and \
                     write), or unset it for 0600"
                )),
            }
        }
        if let Some(spec) = text("FERRY_IMPAIR") {
            match ImpairConfig::parse(&spec) {
                Ok(cfg) => c.impairment = Some(Impairment(cfg)),
                Err(e) => problems.push(format!("FERRY_IMPAIR: {e}")),
            }
        }
        c.discovery = discovery::config_from_vars(&text, &mut problems);
        problems.append(&mut not_text.borrow_mut());
        if !problems.is_empty() {
            return Err(Error::InvalidConfig(problems.join("; ")));
        }
        if read_key {
            if let Some(path) = var("FERRY_KEY_FILE").filter(|p| !p.is_empty()) {
                let key = DomainKey::from_file(Path::new(&path))
                    .map_err(|e| Error::InvalidConfig(format!("FERRY_KEY_FILE: {e}")))?;
                c.key = Some(key);
            }
        }
        Ok(c)
    }

    /// The domain: only topics of one domain see each other (checked when a node is made:
    /// 1 to 32 letters, digits, `_` and `-`).
    pub fn with_domain(mut self, domain: &str) -> NodeConfig {
        domain.clone_into(&mut self.domain);
        self
    }

    /// The mode of the shared-memory segments the node creates (read and write bits only, the
    /// owner's both; 0600 by default). Other users' segments are refused whatever it allows.
    pub fn with_shm_mode(mut self, mode: u32) -> NodeConfig {
        self.shm_mode = mode;
        self
    }

    /// Loss, duplication, reordering and delay to inject into the node's UDP datagrams (`None`:
    /// none). Every UDP endpoint of the node applies it; nothing else is affected.
    pub fn with_impairment(mut self, impairment: Option<Impairment>) -> NodeConfig {
        self.impairment = impairment;
        self
    }

    /// The domain key that authenticates and encrypts the node's UDP traffic (`None`: in the
    /// clear). Every node of the domain must use the same key.
    pub fn with_key(mut self, key: Option<DomainKey>) -> NodeConfig {
        self.key = key;
        self
    }

    /// How discovery finds UDP endpoints on other hosts.
    pub fn with_discovery(mut self, discovery: DiscoveryConfig) -> NodeConfig {
        self.discovery = discovery;
        self
    }

    pub fn domain(&self) -> &str {
        &self.domain
    }

    pub fn shm_mode(&self) -> u32 {
        self.shm_mode
    }

    pub fn impairment(&self) -> Option<&Impairment> {
        self.impairment.as_ref()
    }

    pub fn key(&self) -> Option<&DomainKey> {
        self.key.as_ref()
    }

    pub fn discovery(&self) -> &DiscoveryConfig {
        &self.discovery
    }

    /// The impairment to apply, if it changes anything.
    pub(crate) fn active_impairment(&self) -> Option<&ImpairConfig> {
        self.impairment
            .as_ref()
            .map(|i| &i.0)
            .filter(|c| c.is_active())
    }

    /// Checks every setting, and puts the peers of discovery in the form it compares them in.
    pub(crate) fn validated(mut self) -> Result<NodeConfig, Error> {
        crate::shm::topic::validate_domain(&self.domain)?;
        if self.shm_mode & !0o666 != 0 || self.shm_mode & 0o600 != 0o600 {
            return Err(Error::InvalidConfig(format!(
                "shared-memory mode {:#o} must let its owner read and write (0600 at least) and \
                 have no bits but read and write (0666 at most)",
                self.shm_mode
            )));
        }
        if self.key.is_some() {
            crate::udp::crypto::available()?;
        }
        let d = &mut self.discovery;
        let mut problems = Vec::new();
        if d.port == 0 {
            problems
                .push("the discovery port is 0; give the port every host's discovery uses".into());
        }
        if !d.group.is_multicast() {
            problems.push(format!(
                "the discovery group {} is not an IPv4 multicast address",
                d.group
            ));
        }
        let limits = d.limits;
        if limits.max_remotes == 0 || limits.max_per_source == 0 || limits.max_agents == 0 {
            problems.push("every discovery limit must be at least 1".into());
        }
        let mut peers = Vec::new();
        for p in &d.peers {
            match discovery::check_peer(*p) {
                Ok(a) if !peers.contains(&a) => peers.push(a),
                Ok(_) => {}
                Err(why) => problems.push(format!("discovery peer {p}: {why}")),
            }
        }
        d.peers = peers;
        if !problems.is_empty() {
            return Err(Error::InvalidConfig(problems.join("; ")));
        }
        Ok(self)
    }
}

/// An octal mode of read and write bits (`0660`, `660`, `0o660`).
fn parse_mode(text: &str) -> Option<u32> {
    let digits = text.strip_prefix("0o").unwrap_or(text);
    u32::from_str_radix(digits, 8)
        .ok()
        .filter(|m| *m & !0o666 == 0 && *m & 0o600 == 0o600)
}

/// Loss (independent or in bursts), duplication, reordering, delay and jitter that ferry injects
/// into a node's UDP datagrams, on send, receive or both: for tests and experiments (there is no
/// `tc netem` everywhere). Seeded, so that a run repeats. `FERRY_IMPAIR` holds one as text.
#[derive(Debug, Clone, PartialEq)]
pub struct Impairment(ImpairConfig);

impl Impairment {
    /// Parses a spec such as
    /// `loss=5%,burst=0.01/0.3/0.5,dup=1%,reorder=2%/200us,delay=1ms,jitter=100us,seed=42,dir=send`:
    /// comma-separated `key=value` items, each key at most once. An empty spec, `off` or `none`
    /// injects nothing. The error quotes the item it could not read and the whole syntax.
    pub fn parse(spec: &str) -> Result<Impairment, Error> {
        ImpairConfig::parse(spec)
            .map(Impairment)
            .map_err(|e| Error::InvalidConfig(e.to_string()))
    }

    /// Whether it changes anything.
    pub fn is_active(&self) -> bool {
        self.0.is_active()
    }

    /// The long-run fraction of datagrams it loses.
    pub fn expected_loss(&self) -> f64 {
        self.0.expected_loss()
    }
}

impl FromStr for Impairment {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Impairment, Error> {
        Impairment::parse(spec)
    }
}

/// The spec, in a form that parses back to the same impairment.
impl fmt::Display for Impairment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddr};

    use super::*;
    use crate::udp::discovery::{DiscoveryLimits, DEFAULT_GROUP, DEFAULT_PORT};

    /// The configuration `vars` describe (the environment is not read).
    fn from(vars: &[(&str, &str)]) -> Result<NodeConfig, Error> {
        NodeConfig::from_vars(
            |name| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| OsString::from(v))
            },
            true,
        )
    }

    /// The message of the error `vars` give.
    fn problems(vars: &[(&str, &str)]) -> String {
        match from(vars) {
            Err(Error::InvalidConfig(p)) => p,
            other => panic!("{vars:?} gave {other:?}"),
        }
    }

    /// Discovery settings from `vars` alone, and the problems they have.
    fn discovery(vars: &[(&str, &str)]) -> (DiscoveryConfig, Vec<String>) {
        let mut problems = Vec::new();
        let c = discovery::config_from_vars(
            &|name| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
            },
            &mut problems,
        );
        (c, problems)
    }

    #[test]
    fn nothing_set_is_the_default() {
        assert_eq!(from(&[]).unwrap(), NodeConfig::default());
        let empty = [
            ("FERRY_DOMAIN", ""),
            ("FERRY_IMPAIR", " "),
            ("FERRY_KEY_FILE", ""),
        ];
        assert_eq!(
            from(&empty).unwrap(),
            NodeConfig::default(),
            "empty is unset"
        );
        let c = NodeConfig::default();
        assert_eq!((c.domain(), c.shm_mode()), ("default", 0o600));
        assert!(c.impairment().is_none() && c.key().is_none());
        assert!(!c.discovery().reaches_other_hosts());
    }

    #[test]
    fn every_variable_is_read() {
        let c = from(&[
            ("FERRY_DOMAIN", "lab"),
            ("FERRY_SHM_MODE", "0660"),
            ("FERRY_IMPAIR", "loss=5%,seed=1"),
            ("FERRY_PEERS", "10.0.0.2"),
        ])
        .unwrap();
        assert_eq!(c.domain(), "lab");
        assert_eq!(c.shm_mode(), 0o660);
        assert_eq!(c.impairment().unwrap().to_string(), "loss=0.05,seed=1");
        assert!(c.active_impairment().is_some());
        assert_eq!(c.discovery().peers, ["10.0.0.2:7650".parse().unwrap()]);
        assert_eq!(
            from(&[("FERRY_SHM_MODE", "0o640")]).unwrap().shm_mode(),
            0o640
        );
        let off = from(&[("FERRY_IMPAIR", "off")]).unwrap();
        assert!(off.impairment().is_some() && off.active_impairment().is_none());
    }

    #[test]
    fn bad_values_are_errors_that_name_the_variable() {
        let p = problems(&[
            ("FERRY_SHM_MODE", "0777"),
            ("FERRY_IMPAIR", "loss=lots"),
            ("FERRY_DISCOVERY_PORT", "0"),
        ]);
        let at = |what: &str| p.find(what).unwrap_or_else(|| panic!("{what} in {p}"));
        assert_eq!(at("FERRY_SHM_MODE='0777'"), 0, "{p}");
        assert!(at("FERRY_IMPAIR: bad impairment spec") < at("FERRY_DISCOVERY_PORT='0'"));
        assert!(problems(&[("FERRY_SHM_MODE", "rw")]).contains("0660"));
        // A key file that is not there is an error too, unless the key is given.
        let missing = [("FERRY_KEY_FILE", "/nonexistent/ferry.key")];
        let e = from(&missing).expect_err("a key file that is not there");
        assert!(e.to_string().contains("FERRY_KEY_FILE: "), "{e}");
        // Each error names its variable.
        assert!(problems(&[("FERRY_DOMAIN", "a b")]).starts_with("FERRY_DOMAIN: invalid domain"));
    }

    #[test]
    fn discovery_is_parsed_from_values_and_problems_say_what_to_do() {
        let (c, p) = discovery(&[]);
        assert_eq!(c, DiscoveryConfig::default());
        assert!(p.is_empty());
        assert!(
            !c.reaches_other_hosts(),
            "nothing set reaches no other host"
        );

        let (c, p) = discovery(&[
            ("FERRY_DISCOVERY_PORT", "7700"),
            (
                "FERRY_PEERS",
                " 10.0.0.2, 10.0.0.3:7800 ,,10.0.0.2,::ffff:10.0.0.4",
            ),
        ]);
        assert_eq!(c.port, 7700);
        let want: Vec<SocketAddr> = ["10.0.0.2:7700", "10.0.0.3:7800", "10.0.0.4:7700"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        assert_eq!(c.peers, want, "the default port applies, duplicates go");
        assert!(p.is_empty(), "{p:?}");
        assert!(c.reaches_other_hosts());
        assert!(!c.multicast);

        let (c, _) = discovery(&[("FERRY_DISCOVERY", "multicast")]);
        assert!(c.multicast && c.peers.is_empty() && c.reaches_other_hosts());

        let (c, p) = discovery(&[
            ("FERRY_DISCOVERY_MAX_REMOTES", "4096"),
            ("FERRY_DISCOVERY_MAX_PER_SOURCE", "0"),
            ("FERRY_DISCOVERY_MAX_AGENTS", "many"),
        ]);
        let want = DiscoveryLimits {
            max_remotes: 4096,
            ..DiscoveryLimits::default()
        };
        assert_eq!(c.limits, want);
        assert_eq!(p.len(), 2, "{p:#?}");
        assert!(p.iter().all(|p| p.contains("set it to")));

        let (c, p) = discovery(&[
            ("FERRY_DISCOVERY_PORT", "0"),
            ("FERRY_DISCOVERY", "Multicast"),
            ("FERRY_DISCOVERY_GROUP", "10.0.0.1"),
            ("FERRY_DISCOVERY_IFACE", "eth0"),
            (
                "FERRY_PEERS",
                "host-b,10.0.0.2:0,[::1]:7650,0.0.0.0,239.1.1.1,255.255.255.255",
            ),
        ]);
        assert_eq!(c.port, DEFAULT_PORT);
        assert!(!c.multicast, "only the exact word turns multicast on");
        assert_eq!(
            (c.group, c.interface),
            (DEFAULT_GROUP, Ipv4Addr::UNSPECIFIED)
        );
        assert!(c.peers.is_empty(), "{:?}", c.peers);
        assert_eq!(c.limits, DiscoveryLimits::default());
        assert_eq!(p.len(), 10, "{p:#?}");
        for p in &p {
            assert!(p.starts_with("FERRY_"), "names the variable: {p}");
            assert!(
                p.contains("set it") || p.contains("give") || p.contains("write"),
                "says what to do: {p}"
            );
        }
    }

    #[test]
    fn settings_made_in_the_program_are_checked() {
        let ok = NodeConfig::default().with_domain("x").validated().unwrap();
        assert_eq!(ok.domain(), "x");
        let bad_domain = NodeConfig::default().with_domain("a/b").validated();
        assert!(matches!(bad_domain, Err(Error::InvalidName { .. })));
        // Bits other than read and write, or an owner who could not use its own segments.
        for mode in [0o4600, 0, 0o400, 0o066, 0o200] {
            let bad_mode = NodeConfig::default().with_shm_mode(mode).validated();
            assert!(
                matches!(bad_mode, Err(Error::InvalidConfig(_))),
                "{mode:#o}"
            );
        }
        assert!(parse_mode("0400").is_none() && parse_mode("0660") == Some(0o660));
        let mut d = DiscoveryConfig {
            peers: vec![
                "[::ffff:10.0.0.2]:7650".parse().unwrap(),
                "10.0.0.2:7650".parse().unwrap(),
            ],
            ..DiscoveryConfig::default()
        };
        let c = NodeConfig::default().with_discovery(d.clone()).validated();
        let want: SocketAddr = "10.0.0.2:7650".parse().unwrap();
        assert_eq!(c.unwrap().discovery().peers, [want], "IPv4 form, once");
        d.peers = vec!["[::1]:7650".parse().unwrap()];
        let c = NodeConfig::default().with_discovery(d).validated();
        assert!(matches!(c, Err(Error::InvalidConfig(m)) if m.contains("IPv4")));
    }

    #[test]
    fn an_impairment_spec_parses_back_from_its_text() {
        let i = Impairment::parse("loss=5%,reorder=2%/200us,seed=42").unwrap();
        assert!(i.is_active());
        assert!((i.expected_loss() - 0.05).abs() < 1e-12);
        assert_eq!(i.to_string().parse::<Impairment>().unwrap(), i);
        assert!(!Impairment::parse("none").unwrap().is_active());
        let e = Impairment::parse("loss=5%,loss=1%")
            .unwrap_err()
            .to_string();
        assert!(e.contains("given twice") && e.contains("key=value"), "{e}");
    }
}
