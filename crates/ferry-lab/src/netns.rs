//! Two hosts on one machine: two network namespaces joined by a veth pair with an IPv4 address
//! at each end (a private 10.N.x.0/24), optionally limited to a rate by a `tc tbf` on both ends.
//! [`Pair`] removes both namespaces when dropped (deleting a namespace destroys its end of the
//! veth pair, and with it the pair), and removes, before it makes its own, the namespaces that an
//! earlier process of the same prefix left behind when it died.
//!
//! Everything here needs root (CAP_NET_ADMIN) and the `ip` command (iproute2), and `tc` for a
//! rate; [`missing`] says what this machine lacks. The lab's `hubs` experiment runs its two
//! hosts on a [`Pair`]; tests use it to run a lab and its agent on "two machines".

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{bail, note, Context, Result};

// ---------------------------------------------------------------------------------------------
// Link rates

/// A link rate in bits per second (`tc tbf rate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkRate {
    pub bps: u64,
}

impl LinkRate {
    /// `100mbit`, `1gbit`, `1500kbit`: the largest unit that divides the rate.
    pub fn name(self) -> String {
        let b = self.bps;
        if b % 1_000_000_000 == 0 {
            format!("{}gbit", b / 1_000_000_000)
        } else if b % 1_000_000 == 0 {
            format!("{}mbit", b / 1_000_000)
        } else if b % 1000 == 0 {
            format!("{}kbit", b / 1000)
        } else {
            format!("{b}bit")
        }
    }

    /// The tbf bucket: 2 ms of traffic, at least 32 KiB (a few full frames and small bursts).
    pub fn burst_bytes(self) -> u64 {
        (self.bps / 8 / 500).max(32 * 1024)
    }
}

impl std::fmt::Display for LinkRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl std::str::FromStr for LinkRate {
    type Err = String;

    fn from_str(text: &str) -> Result<LinkRate, String> {
        parse_link_rate(text)
    }
}

/// Link rates in a configuration, as their names (`100mbit`): `#[serde(with = "netns::rate_list")]`
/// on a `Vec<LinkRate>` (with `#[schemars(with = "Vec<String>")]`).
pub mod rate_list {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{parse_link_rate, LinkRate};

    pub fn serialize<S: Serializer>(rates: &[LinkRate], s: S) -> Result<S::Ok, S::Error> {
        rates
            .iter()
            .map(|r| r.name())
            .collect::<Vec<_>>()
            .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<LinkRate>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|text| parse_link_rate(text).map_err(D::Error::custom))
            .collect()
    }
}

/// The queue a tbf may hold before it drops, as tc's `latency`.
pub const TBF_LATENCY_MS: u64 = 50;

/// Reads a rate such as `100mbit`, `1gbit`, `500kbit`, `100M`, `1G` (8 kbit to 100 Gbit).
pub fn parse_link_rate(text: &str) -> Result<LinkRate, String> {
    let invalid = || {
        format!(
            "invalid link rate {text:?}: expected bits per second such as 100mbit, 1gbit, \
             500kbit (or 100M, 1G)"
        )
    };
    let lower = text.trim().to_ascii_lowercase();
    let body = lower.strip_suffix("bit").unwrap_or(&lower);
    let (number, scale) = match body.as_bytes().last() {
        Some(b'k') => (&body[..body.len() - 1], 1e3),
        Some(b'm') => (&body[..body.len() - 1], 1e6),
        Some(b'g') => (&body[..body.len() - 1], 1e9),
        _ => (body, 1.0),
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(invalid());
    }
    let value: f64 = number.parse().map_err(|_| invalid())?;
    let bps = value * scale;
    if !(bps.is_finite() && (8_000.0..=100e9).contains(&bps)) {
        return Err(format!(
            "link rate {text:?} is out of range (8kbit to 100gbit)"
        ));
    }
    Ok(LinkRate {
        bps: bps.round() as u64,
    })
}

// ---------------------------------------------------------------------------------------------
// Tools

/// Finds an executable by name in PATH, then in the sbin directories root's PATH has.
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Runs `tool args` to completion; an error with its standard error if it fails.
fn run_tool(tool: &Path, args: &[&str]) -> Result<()> {
    tool_output(tool, args).map(drop)
}

/// Runs `tool args` to completion and returns its standard output; an error with its standard
/// error if it fails.
fn tool_output(tool: &Path, args: &[&str]) -> Result<Vec<u8>> {
    let command = format!("{} {}", tool.display(), args.join(" "));
    described_tool_output(tool, args, &command)
}

/// [`tool_output`], its failure naming the command as `command`.
fn described_tool_output(tool: &Path, args: &[&str], command: &str) -> Result<Vec<u8>> {
    let out = Command::new(tool)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context(format!("cannot run {}", tool.display()))?;
    if !out.status.success() {
        bail!(
            "{command} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// What making a [`Pair`] needs that this machine lacks, each said in a few words (empty: none).
/// `rate`: whether a link rate is wanted (it needs `tc`).
pub fn missing(rate: bool) -> Vec<String> {
    let mut missing = Vec::new();
    if !rustix::process::geteuid().is_root() {
        missing.push(
            "root (creating network namespaces and veth pairs needs CAP_NET_ADMIN)".to_owned(),
        );
    }
    if find_tool("ip").is_none() {
        missing.push("the ip command (iproute2), not found in PATH or /usr/sbin, /sbin".to_owned());
    }
    if rate && find_tool("tc").is_none() {
        missing.push(
            "the tc command (iproute2) for a link rate, not found in PATH or /usr/sbin, /sbin"
                .to_owned(),
        );
    }
    missing
}

/// Refuses `--hosts 2` where this machine lacks what making a [`Pair`] needs ([`missing`]),
/// with `instead` said after the root requirement ("run as root, or use --hosts 1").
pub fn check_two_hosts(rate: bool, instead: &str) -> Result<()> {
    let mut missing = missing(rate);
    if !missing.is_empty() {
        if let Some(root) = missing.iter_mut().find(|m| m.starts_with("root")) {
            root.push_str("; ");
            root.push_str(instead);
        }
        bail!("--hosts 2 needs {}", missing.join("; and "));
    }
    Ok(())
}

/// The network namespaces that exist (`ip netns list`), by name.
pub fn list(ip: &Path) -> Result<Vec<String>> {
    let out = tool_output(ip, &["netns", "list"])?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect())
}

// ---------------------------------------------------------------------------------------------
// The pair

/// How to make a [`Pair`].
#[derive(Debug, Clone)]
pub struct Spec<'a> {
    /// The namespaces are named `{prefix}{pid}-{n}-a` and `-b` (`n` counts the pairs this
    /// process made). Namespaces of this prefix whose process has gone are removed first.
    pub prefix: &'a str,
    /// The veth ends are named `{device}{pid}a` and `b` (they live in the namespaces only, so
    /// two pairs never clash); at most 6 characters, for the kernel's 15.
    pub device: &'a str,
    /// The second byte of the subnet: 10.`net`.x.0/24 (x from the process id).
    pub net: u8,
    /// A `tc tbf` with this rate on both veth ends (the egress of each).
    pub rate: Option<LinkRate>,
}

/// Two network namespaces and the veth pair between them; removed on drop.
#[derive(Debug)]
pub struct Pair {
    ip: PathBuf,
    /// The namespaces' names (side A, side B).
    pub ns: [String; 2],
    /// The veth ends (in A, in B).
    pub dev: [String; 2],
    /// The ends' IPv4 addresses (prefix length 24).
    pub addr: [Ipv4Addr; 2],
    /// The subnet, as `10.N.x.0/24`.
    pub subnet: String,
    /// The link rate, if one was set.
    pub rate: Option<LinkRate>,
    /// The `tc` commands run for it, as text.
    pub tc: Vec<String>,
}

/// Pairs made by this process, for unique names.
static PAIRS: AtomicU32 = AtomicU32::new(0);

impl Pair {
    /// One pair per link rate, each as `spec` says with that rate, made one after the other:
    /// those made are removed (dropped) if a later one fails.
    pub fn create_per_rate(spec: &Spec<'_>, rates: &[LinkRate]) -> Result<Vec<Pair>> {
        rates
            .iter()
            .map(|&rate| {
                Pair::create(&Spec {
                    rate: Some(rate),
                    ..spec.clone()
                })
            })
            .collect()
    }

    /// Makes the pair: both namespaces, the veth pair (made inside A with its peer in B: it never
    /// exists outside them), addresses, links up (loopback included), and the rate if asked for.
    /// Whatever was made is removed again if a later step fails.
    pub fn create(spec: &Spec<'_>) -> Result<Pair> {
        let missing = missing(spec.rate.is_some());
        if !missing.is_empty() {
            bail!("two network namespaces need {}", missing.join("; and "));
        }
        if spec.device.len() > 6 {
            bail!("the veth name prefix {:?} is too long", spec.device);
        }
        let ip = find_tool("ip").expect("checked by `missing`");
        sweep_stale(&ip, spec.prefix);
        let pid = std::process::id();
        // Relaxed: only uniqueness matters.
        let n = PAIRS.fetch_add(1, Ordering::Relaxed);
        let third = (pid % 250 + 1) as u8;
        let mut pair = Pair {
            ip,
            ns: [
                format!("{}{pid}-{n}-a", spec.prefix),
                format!("{}{pid}-{n}-b", spec.prefix),
            ],
            dev: [
                format!("{}{pid}a", spec.device),
                format!("{}{pid}b", spec.device),
            ],
            addr: [
                Ipv4Addr::new(10, spec.net, third, 1),
                Ipv4Addr::new(10, spec.net, third, 2),
            ],
            subnet: format!("10.{}.{third}.0/24", spec.net),
            rate: spec.rate,
            tc: Vec::new(),
        };
        // From here on, drop removes whatever was made. A namespace that `netns add` did not
        // make is not ours to remove: make them one by one.
        let ip = pair.ip.clone();
        let ipr = |a: &[&str]| run_tool(&ip, a);
        let made = ipr(&["netns", "add", &pair.ns[0]]);
        if let Err(e) = made {
            pair.ns = [String::new(), String::new()];
            return Err(e);
        }
        if let Err(e) = ipr(&["netns", "add", &pair.ns[1]]) {
            pair.ns[1] = String::new();
            return Err(e);
        }
        ipr(&[
            "-n",
            &pair.ns[0],
            "link",
            "add",
            &pair.dev[0],
            "type",
            "veth",
            "peer",
            "name",
            &pair.dev[1],
            "netns",
            &pair.ns[1],
        ])?;
        for s in 0..2 {
            let cidr = format!("{}/24", pair.addr[s]);
            ipr(&["-n", &pair.ns[s], "addr", "add", &cidr, "dev", &pair.dev[s]])?;
            ipr(&["-n", &pair.ns[s], "link", "set", &pair.dev[s], "up"])?;
            ipr(&["-n", &pair.ns[s], "link", "set", "lo", "up"])?;
        }
        if let Some(rate) = spec.rate {
            let tc = find_tool("tc").expect("checked by `missing`");
            for s in 0..2 {
                let args = [
                    "-n".to_owned(),
                    pair.ns[s].clone(),
                    "qdisc".to_owned(),
                    "add".to_owned(),
                    "dev".to_owned(),
                    pair.dev[s].clone(),
                    "root".to_owned(),
                    "tbf".to_owned(),
                    "rate".to_owned(),
                    format!("{}bit", rate.bps),
                    "burst".to_owned(),
                    rate.burst_bytes().to_string(),
                    "latency".to_owned(),
                    format!("{TBF_LATENCY_MS}ms"),
                ];
                let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                run_tool(&tc, &refs)?;
                pair.tc.push(format!("tc {}", args.join(" ")));
            }
        }
        Ok(pair)
    }

    /// The `ip` executable the pair was made with.
    pub fn ip(&self) -> &Path {
        &self.ip
    }

    /// Where a lab peer runs in namespace `side` (0: A, 1: B).
    pub fn place(&self, side: usize) -> crate::peer::Place {
        crate::peer::Place {
            netns: Some((self.ip.clone(), self.ns[side].clone())),
            remote: None,
        }
    }

    /// A command that runs `program` in namespace `side` (0: A, 1: B), through `ip netns exec`.
    pub fn command(&self, side: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(&self.ip);
        c.args(["netns", "exec", &self.ns[side]]).arg(program);
        c
    }

    /// The counters of the root qdisc on side `side`'s veth end (its egress), from
    /// `tc -s -j qdisc show`. A link without a rate has no qdisc that counts (veth's default is
    /// `noqueue`): an error then.
    pub fn qdisc_counts(&self, side: usize) -> Result<QdiscCounts> {
        let Some(tc) = find_tool("tc") else {
            bail!("the tc command (iproute2) is not found in PATH or /usr/sbin, /sbin");
        };
        let (ns, dev) = (&self.ns[side], &self.dev[side]);
        let args = ["-n", ns, "-s", "-j", "qdisc", "show", "dev", dev];
        let command = format!("tc -s -j qdisc show dev {dev} in {ns}");
        parse_qdisc_counts(&described_tool_output(&tc, &args, &command)?)
    }
}

// ---------------------------------------------------------------------------------------------
// A /dev/shm of its own

/// The mount namespace of this process: the inode of `/proc/self/ns/mnt`.
pub fn mount_namespace() -> Result<u64> {
    rustix::fs::stat("/proc/self/ns/mnt")
        .map(|s| s.st_ino)
        .context("cannot read /proc/self/ns/mnt")
}

/// Gives this process a /dev/shm of its own, a fresh tmpfs, as a host of its own has: the
/// ferry processes of one side then share no shared-memory directory with those of the other
/// side, and meet only over the link. Only in a mount namespace other than `lab` (the lab's
/// main process's, from [`mount_namespace`]): `ip netns exec` starts every process in one of
/// its own (whose mounts do not reach the machine's), and the tmpfs goes with it when the
/// process ends. In the lab's own namespace this would hide the machine's /dev/shm: refused.
pub fn private_dev_shm(lab: u64) -> Result<()> {
    let mine = mount_namespace()?;
    if mine == lab {
        bail!(
            "this process shares the lab's mount namespace (it was not started with ip netns \
             exec): it will not mount a /dev/shm of its own over the machine's"
        );
    }
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL in a constant");
    let (source, target, kind, options) = (c("tmpfs"), c("/dev/shm"), c("tmpfs"), c("mode=1777"));
    // SAFETY: mount(2) with four NUL-terminated strings that live until it returns, and flags
    // that are plain bits; it touches no memory of this process besides reading them.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            kind.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            options.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error())
            .context("cannot mount a tmpfs of this process's own on /dev/shm (needs root)");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Qdisc counters

/// What a qdisc has passed on and dropped since it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QdiscCounts {
    /// Packets sent on (a GSO packet counts as its segments).
    pub packets: u64,
    pub bytes: u64,
    /// Packets dropped (a full queue).
    pub drops: u64,
}

impl QdiscCounts {
    /// What passed between `self` (before) and `after`; an error if a counter went back (the
    /// qdisc was replaced meanwhile).
    pub fn until(self, after: QdiscCounts) -> Result<QdiscCounts> {
        match (
            after.packets.checked_sub(self.packets),
            after.bytes.checked_sub(self.bytes),
            after.drops.checked_sub(self.drops),
        ) {
            (Some(packets), Some(bytes), Some(drops)) => Ok(QdiscCounts {
                packets,
                bytes,
                drops,
            }),
            _ => {
                bail!("the qdisc's counters went back ({self:?} then {after:?}): was it replaced?")
            }
        }
    }
}

/// The most `tc -s -j qdisc show dev X` may print: one device has a few qdiscs of a few
/// hundred bytes each.
const MAX_QDISC_JSON: usize = 64 * 1024;

/// One qdisc as `tc -j` shows it (only what is read; the rest is ignored).
#[derive(serde::Deserialize)]
struct QdiscJson {
    kind: String,
    packets: u64,
    bytes: u64,
    drops: u64,
}

/// Reads the root qdisc's counters from `tc -s -j qdisc show dev X`'s output. Output that is
/// too long, not JSON, without counters, or without a root qdisc that counts (`noqueue`) is an
/// error.
pub fn parse_qdisc_counts(json: &[u8]) -> Result<QdiscCounts> {
    if json.len() > MAX_QDISC_JSON {
        bail!(
            "tc printed {} bytes for one device's qdiscs (at most {MAX_QDISC_JSON} expected)",
            json.len()
        );
    }
    let qdiscs: Vec<serde_json::Value> =
        serde_json::from_slice(json).context("tc's qdisc list is not a JSON array")?;
    let Some(root) = qdiscs
        .into_iter()
        .find(|q| q.get("root").and_then(serde_json::Value::as_bool) == Some(true))
    else {
        bail!("tc shows no root qdisc on the device");
    };
    if root.get("kind").and_then(serde_json::Value::as_str) == Some("noqueue") {
        bail!("the device's root qdisc is noqueue, which counts nothing (no link rate was set)");
    }
    let q: QdiscJson = serde_json::from_value(root).context(
        "tc's root qdisc has no kind, packets, bytes and drops counters (whole numbers)",
    )?;
    if q.kind.is_empty() {
        bail!("tc's root qdisc has no kind");
    }
    Ok(QdiscCounts {
        packets: q.packets,
        bytes: q.bytes,
        drops: q.drops,
    })
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in self.ns.iter().filter(|ns| !ns.is_empty()) {
            if let Err(e) = run_tool(&self.ip, &["netns", "del", ns]) {
                if !e.to_string().contains("No such file") {
                    note!("ferry lab: cannot remove network namespace {ns}: {e}");
                }
            }
        }
    }
}

/// The process id in the name of a namespace of `prefix` (`{prefix}{pid}-…`), if it is one.
fn owner(name: &str, prefix: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?;
    let (pid, side) = rest.split_once('-')?;
    if side.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Removes namespaces of `prefix` that an earlier process left (its process no longer exists).
pub fn sweep_stale(ip: &Path, prefix: &str) {
    let Ok(names) = list(ip) else {
        return;
    };
    for name in names {
        let Some(pid) = owner(&name, prefix) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            note!("ferry lab: removing network namespace {name} left by an earlier run");
            let _ = run_tool(ip, &["netns", "del", &name]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_rates() {
        assert_eq!(parse_link_rate("100mbit").unwrap().bps, 100_000_000);
        assert_eq!(parse_link_rate("1gbit").unwrap().bps, 1_000_000_000);
        assert_eq!(parse_link_rate("1G").unwrap().bps, 1_000_000_000);
        assert_eq!(parse_link_rate("500kbit").unwrap().bps, 500_000);
        assert_eq!(parse_link_rate("1.5gbit").unwrap().bps, 1_500_000_000);
        assert_eq!(parse_link_rate("100mbit").unwrap().name(), "100mbit");
        assert_eq!(parse_link_rate("1500mbit").unwrap().name(), "1500mbit");
        assert_eq!(parse_link_rate("1gbit").unwrap().name(), "1gbit");
        for bad in [
            "", "mbit", "100mbps", "-1mbit", "1x", "0", "1bit", "1000gbit",
        ] {
            assert!(parse_link_rate(bad).is_err(), "{bad:?} should be refused");
        }
        let r = parse_link_rate("100mbit").unwrap();
        assert!(r.burst_bytes() >= 32 * 1024);
    }

    #[test]
    fn stale_names() {
        assert_eq!(owner("ferry-hubs-123-0-a", "ferry-hubs-"), Some(123));
        // The names of earlier versions: `{prefix}{pid}-a`.
        assert_eq!(owner("ferry-hubs-123-b", "ferry-hubs-"), Some(123));
        assert_eq!(owner("ferry-hubs-x-a", "ferry-hubs-"), None);
        assert_eq!(owner("ferry-hubs-123", "ferry-hubs-"), None);
        assert_eq!(owner("other-123-a", "ferry-hubs-"), None);
    }

    #[test]
    fn qdisc_counters() {
        let tbf = br#"[{"kind":"tbf","handle":"8007:","root":true,"refcnt":3,
            "options":{"rate":12500000,"burst":32762,"lat":50000},"bytes":12942347,
            "packets":8571,"drops":2,"overlimits":9894,"requeues":0,"backlog":0,"qlen":0}]"#;
        let c = parse_qdisc_counts(tbf).unwrap();
        assert_eq!((c.packets, c.bytes, c.drops), (8571, 12_942_347, 2));
        let before = QdiscCounts {
            packets: 71,
            bytes: 1000,
            drops: 0,
        };
        assert_eq!(before.until(c).unwrap().packets, 8500);
        assert!(c.until(before).is_err(), "counters that went back");
        // A child qdisc beside the root one is not the root's count.
        let two = br#"[{"kind":"bfifo","parent":"8007:1","packets":5,"bytes":5,"drops":0},
            {"kind":"tbf","root":true,"packets":7,"bytes":70,"drops":1}]"#;
        assert_eq!(parse_qdisc_counts(two).unwrap().packets, 7);
        let noqueue = br#"[{"kind":"noqueue","handle":"0:","root":true,"refcnt":2,
            "options":{},"bytes":0,"packets":0,"drops":0}]"#;
        assert!(parse_qdisc_counts(noqueue)
            .unwrap_err()
            .to_string()
            .contains("noqueue"));
        let huge =
            br#"[{"kind":"tbf","root":true,"packets":184467440737095516160,"bytes":1,"drops":0}]"#;
        let negative = br#"[{"kind":"tbf","root":true,"packets":-1,"bytes":1,"drops":0}]"#;
        let fraction = br#"[{"kind":"tbf","root":true,"packets":1.5,"bytes":1,"drops":0}]"#;
        let float = br#"[{"kind":"tbf","root":true,"packets":1e400,"bytes":1,"drops":0}]"#;
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let long = format!("[{}]", " ".repeat(MAX_QDISC_JSON));
        for bad in [
            &tbf[..tbf.len() / 2],
            b"",
            b"garbage",
            b"{}",
            b"[]",
            b"[1, 2]",
            br#"[{"kind":"tbf","root":true}]"#,
            br#"[{"kind":"tbf","root":false,"packets":1,"bytes":1,"drops":0}]"#,
            br#"[{"kind":"tbf","root":true,"packets":"7","bytes":1,"drops":0}]"#,
            huge,
            negative,
            fraction,
            float,
            deep.as_bytes(),
            long.as_bytes(),
            &[0xff, 0xfe, 0x00],
        ] {
            assert!(
                parse_qdisc_counts(bad).is_err(),
                "{:?} should be refused",
                String::from_utf8_lossy(&bad[..bad.len().min(80)])
            );
        }
    }

    #[test]
    fn a_pair_that_was_never_made_removes_nothing() {
        // Dropping one with a missing tool and no names: quietly nothing.
        drop(Pair {
            ip: PathBuf::from("/nonexistent/ip"),
            ns: [String::new(), String::new()],
            dev: ["a".into(), "b".into()],
            addr: [Ipv4Addr::LOCALHOST; 2],
            subnet: String::new(),
            rate: None,
            tc: Vec::new(),
        });
    }
}
