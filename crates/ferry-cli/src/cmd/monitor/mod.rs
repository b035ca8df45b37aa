//! `ferry monitor`: the running system in the browser. A sampler thread reads every topic's
//! directory each period (the counters the processes already keep: it never subscribes, never
//! publishes, changes nothing) and keeps the latest state as JSON; a small HTTP server serves
//! the page (from the binary: no network needed), that state (`/api/state`), a stream of it
//! (`/api/events`, server-sent events) and the latest lab report (`/lab/`).

mod http;
mod last;
mod state;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;

use ferry_cmd::error::{bail, note, Context, Result};
use ferry_cmd::signal;
use ferry_cmd::units::{parse_domain, parse_seconds};

#[derive(Debug, Args)]
pub struct MonitorArgs {
    /// Where to serve the page: loopback by default; another address serves only requests that
    /// carry the token printed at start (?token=...). Port 0 picks a free port
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8470")]
    pub listen: SocketAddr,

    /// Only topics of this domain [default: every domain]
    #[arg(long, value_name = "D", value_parser = parse_domain)]
    pub domain: Option<String>,

    /// How often the topics' counters are read, in seconds (0.1 to 10)
    #[arg(long, value_name = "S", default_value = "0.5", value_parser = parse_seconds)]
    pub period: Duration,

    /// The lab report to link (the directory `ferry lab` wrote)
    #[arg(long, value_name = "DIR", default_value = "ferry-report")]
    pub lab_report: PathBuf,
}

pub fn run(args: MonitorArgs) -> Result<()> {
    if args.period < Duration::from_millis(100) || args.period > Duration::from_secs(10) {
        bail!("--period is 0.1 to 10 seconds, not {:?}", args.period);
    }
    let listener =
        TcpListener::bind(args.listen).context(format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr().context("the listener's address")?;
    let token = (!http::is_loopback(&addr))
        .then(new_token)
        .transpose()
        .context("cannot make a token (/dev/urandom)")?;
    let latest = Arc::new(http::Latest::new());
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (latest, stop) = (Arc::clone(&latest), Arc::clone(&stop));
        let mut s = state::Sampler::new(args.domain.clone(), args.period);
        let period = args.period;
        // The first state before the first request.
        publish(&latest, s.sample())?;
        std::thread::Builder::new()
            .name("monitor-sampler".into())
            .spawn(move || {
                let mut next = Instant::now() + period;
                while !stop.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    if now < next {
                        // Few wake-ups: the watched processes may be spinning on every CPU.
                        std::thread::sleep((next - now).min(Duration::from_millis(250)));
                        continue;
                    }
                    next += period;
                    let _ = publish(&latest, s.sample());
                }
            })
            .context("cannot start the sampler")?
    };
    let url = match &token {
        Some(t) => format!("http://{addr}/?token={t}"),
        None => format!("http://{addr}/"),
    };
    note!(
        "ferry monitor: {} at {url}{}",
        match &args.domain {
            Some(d) => format!("domain {d}"),
            None => "every domain".to_owned(),
        },
        if token.is_some() {
            " (not loopback: every request needs this token)"
        } else {
            ""
        }
    );
    let site = Arc::new(http::Site {
        latest,
        token,
        lab: args.lab_report,
        stop: Arc::clone(&stop),
    });
    let server = {
        let site = Arc::clone(&site);
        std::thread::Builder::new()
            .name("monitor-accept".into())
            .spawn(move || http::serve(listener, site))
            .context("cannot start the server")?
    };
    while !signal::interrupted() && !server.is_finished() {
        std::thread::sleep(Duration::from_millis(250));
    }
    stop.store(true, Ordering::Relaxed);
    http::stop(&site, addr);
    let served = server.join();
    let _ = sampler.join();
    match served {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e).context("the server stopped"),
        Err(_) => bail!("the server stopped"),
    }
}

/// Makes `state` the latest: whole, and without histories for the event stream.
fn publish(latest: &http::Latest, state: state::State) -> serde_json::Result<()> {
    let whole = serde_json::to_string(&state)?;
    let event = serde_json::to_string(&state.without_history())?;
    latest.set(whole, event);
    Ok(())
}

/// 128 random bits as hex.
fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}
