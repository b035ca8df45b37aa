//! Two sites on one machine, for the bridge's tests and its cost measurement: two network
//! namespaces, each with a /dev/shm of its own (a directory bound over /dev/shm in each process's
//! mount namespace), so that the sites share nothing but the links made here:
//!
//! - [`Links::ThroughHere`]: each site is joined by a veth pair to the caller's namespace only
//!   (site A 10.N.1.2, the caller 10.N.1.1; site B 10.N.2.2, the caller 10.N.2.1); A has no
//!   route to B.
//! - [`Links::Direct`]: one veth pair joins the sites (A 10.N.0.1, B 10.N.0.2).
//!
//! Everything is removed on drop. Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and `ip`.

use std::process::Command;

/// How the sites are linked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    ThroughHere,
    Direct,
}

/// One site.
#[derive(Debug)]
pub struct Site {
    /// Its network namespace.
    pub ns: String,
    /// The directory its processes see as /dev/shm.
    pub shm: String,
    /// Its address on its link.
    pub addr: String,
    /// The address at the other end of its link (the caller's, or the other site's).
    pub other_end: String,
}

/// Sites A and B.
#[derive(Debug)]
pub struct Sites {
    pub a: Site,
    pub b: Site,
}

/// Runs `ip ARGS`; the error says what failed.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Gives `dev`, in `site`'s namespace, the site's address (/24) and brings it up.
fn address(site: &Site, dev: &str) -> Result<(), String> {
    let addr = format!("{}/24", site.addr);
    ip(&["-n", &site.ns, "addr", "add", &addr, "dev", dev])?;
    ip(&["-n", &site.ns, "link", "set", dev, "up"])
}

impl Sites {
    /// Makes the sites; `net` picks the private 10.`net`.x.x addresses, `tag` the names (unique
    /// per process: namespaces fzA`tag`, fzB`tag`).
    pub fn create(links: Links, net: u8, tag: u32) -> Result<Sites, String> {
        let site = |name: &str, addr: String, other_end: String| Site {
            ns: format!("fz{name}{tag}"),
            shm: format!("/dev/shm/ferry-zenoh-site-{name}{tag}"),
            addr,
            other_end,
        };
        let sites = match links {
            Links::ThroughHere => Sites {
                a: site("A", format!("10.{net}.1.2"), format!("10.{net}.1.1")),
                b: site("B", format!("10.{net}.2.2"), format!("10.{net}.2.1")),
            },
            Links::Direct => Sites {
                a: site("A", format!("10.{net}.0.1"), format!("10.{net}.0.2")),
                b: site("B", format!("10.{net}.0.2"), format!("10.{net}.0.1")),
            },
        };
        for s in [&sites.a, &sites.b] {
            let _ = ip(&["netns", "del", &s.ns]);
            let _ = std::fs::remove_dir_all(&s.shm);
            std::fs::create_dir(&s.shm).map_err(|e| format!("{}: {e}", s.shm))?;
            ip(&["netns", "add", &s.ns])?;
            ip(&["-n", &s.ns, "link", "set", "lo", "up"])?;
        }
        match links {
            Links::ThroughHere => {
                for (s, n) in [(&sites.a, 1), (&sites.b, 2)] {
                    let (here, there) = (format!("fzh{n}{tag}"), format!("fzs{n}{tag}"));
                    ip(&["link", "add", &here, "type", "veth", "peer", "name", &there])?;
                    ip(&["link", "set", &there, "netns", &s.ns])?;
                    ip(&["addr", "add", &format!("{}/24", s.other_end), "dev", &here])?;
                    ip(&["link", "set", &here, "up"])?;
                    address(s, &there)?;
                }
            }
            Links::Direct => {
                let (va, vb) = (format!("fza{tag}"), format!("fzb{tag}"));
                ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb])?;
                for (s, dev) in [(&sites.a, &va), (&sites.b, &vb)] {
                    ip(&["link", "set", dev, "netns", &s.ns])?;
                    address(s, dev)?;
                }
            }
        }
        Ok(sites)
    }

    /// A command that runs `program` in `site`: in its network namespace, with its /dev/shm
    /// bound over the host's in the process's own mount namespace (`ip netns exec` makes one,
    /// whose mounts nobody else sees).
    pub fn command(site: &Site, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &site.ns, "sh", "-c"])
            .arg("mount --bind \"$0\" /dev/shm && exec \"$@\"")
            .arg(&site.shm)
            .arg(program);
        cmd
    }
}

impl Drop for Sites {
    fn drop(&mut self) {
        for s in [&self.a, &self.b] {
            // Deleting a namespace removes its ends of the veth pairs, and with them the pairs.
            let _ = ip(&["netns", "del", &s.ns]);
            let _ = std::fs::remove_dir_all(&s.shm);
        }
    }
}
