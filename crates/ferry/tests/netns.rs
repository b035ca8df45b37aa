//! Two hosts on one machine: network namespaces joined by a veth pair (10.201.x.0/24, inside
//! namespaces this test creates and removes). A UDP publisher in one, subscribers in both; they
//! find each other by multicast discovery confined to the namespaces. Needs root (CAP_NET_ADMIN)
//! and `ip`; skips with a message otherwise.

use std::process::{Child, Command};
use std::time::Duration;

mod common;
use common::*;

#[test]
#[ignore = "entry point of child processes started by the other tests"]
fn child_entry() {
    run_child();
}

/// Two namespaces and the veth pair between them; removed on drop.
struct Hosts {
    a: String,
    b: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
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

impl Hosts {
    fn create(tag: u32) -> Result<Hosts, String> {
        let (a, b) = (format!("ferryA{tag}"), format!("ferryB{tag}"));
        let (va, vb) = (format!("fva{tag}"), format!("fvb{tag}"));
        let hosts = Hosts {
            a: a.clone(),
            b: b.clone(),
        };
        ip(&["netns", "add", &a])?;
        ip(&["netns", "add", &b])?;
        ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb])?;
        ip(&["link", "set", &va, "netns", &a])?;
        ip(&["link", "set", &vb, "netns", &b])?;
        for (ns, dev, addr) in [(&a, &va, "10.201.0.1/24"), (&b, &vb, "10.201.0.2/24")] {
            ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            // Multicast (discovery) goes over the veth only.
            ip(&["-n", ns, "route", "add", "224.0.0.0/4", "dev", dev])?;
        }
        Ok(hosts)
    }

    /// Starts this test binary as a child in namespace `ns`.
    fn spawn(&self, ns: &str, role: &str, iface: &str, vars: &[(&str, String)]) -> Child {
        let mut cmd = child_command(&["ip", "netns", "exec", ns], role, vars);
        cmd.env("FERRY_DISCOVERY", "multicast")
            .env("FERRY_DISCOVERY_IFACE", iface);
        cmd.spawn().expect("spawn child in namespace")
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.a]);
        let _ = ip(&["netns", "del", &self.b]);
    }
}

#[test]
#[ignore = "needs root"]
fn a_publisher_on_one_host_serves_subscribers_on_both() {
    two_hosts("udp");
}

#[test]
#[ignore = "needs root"]
fn auto_uses_shared_memory_on_one_host_and_udp_across() {
    two_hosts("auto");
}

fn two_hosts(transport: &str) {
    assert_eq!(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() },
        0,
        "network namespaces need root: run this test as root (CI does)"
    );
    let hosts = Hosts::create({
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        (std::process::id() % 10_000) * 10 + N.fetch_add(1, Ordering::Relaxed)
    })
    .unwrap_or_else(|e| panic!("cannot create network namespaces: {e}"));
    let dom = domain("netns");
    let vars = |extra: &[(&'static str, String)]| {
        let mut v = topic_vars(
            (
                &dom,
                "data",
                &format!("{transport},block,reliable,max=65536,timeout=60000"),
            ),
            &[("COUNT", "300".to_owned()), ("MAXSIZE", "65536".to_owned())],
        );
        v.extend(extra.iter().cloned());
        v
    };
    let sub_a = hosts.spawn(&hosts.a, "subscriber", "10.201.0.1", &vars(&[]));
    let sub_b = hosts.spawn(&hosts.b, "subscriber", "10.201.0.2", &vars(&[]));
    // The publisher waits until it knows both: one through the shared-memory directory (same
    // host), one through discovery (the other host).
    let publ = hosts.spawn(
        &hosts.a,
        "publisher",
        "10.201.0.1",
        &vars(&[("WAIT_SUBS", "2".into())]),
    );
    let (pub_ok, _) = finish(publ, Duration::from_secs(120));
    let (a_ok, a_lines) = finish(sub_a, Duration::from_secs(120));
    let (b_ok, b_lines) = finish(sub_b, Duration::from_secs(120));
    assert!(
        pub_ok && a_ok && b_ok,
        "publisher {pub_ok}, subscriber A {a_ok}, subscriber B {b_ok}"
    );
    assert_eq!(
        result_of(&a_lines),
        (300, 0, 299),
        "same-host subscriber: everything, in order"
    );
    assert_eq!(
        result_of(&b_lines),
        (300, 0, 299),
        "other-host subscriber: everything, in order"
    );
    drop(hosts);
}
