//! `ferry-zenoh`: joins the ferry topics of a domain to Zenoh, both ways.

use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use zenoh::Wait;

use ferry_zenoh::bridge::{Bridge, Options};

/// Joins the ferry topics of a domain to Zenoh, both ways: topic T of domain D is the Zenoh key
/// ferry/D/T. Messages published into ferry on this host go out to Zenoh; messages put on those
/// keys in Zenoh (by another bridge, or any Zenoh application) are published into ferry here. A
/// message never goes back to where it came from.
#[derive(Debug, Parser)]
#[command(name = "ferry-zenoh", version)]
struct Args {
    /// The ferry domain [default: FERRY_DOMAIN, or "default"]
    #[arg(long, value_name = "D")]
    domain: Option<String>,

    /// Topics to bridge, as a Zenoh key expression over topic names (* one level, ** any number
    /// of levels); repeat for more
    #[arg(long = "topics", value_name = "PATTERN", default_value = "**")]
    topics: Vec<String>,

    /// A Zenoh router or peer to connect to, such as tcp/192.0.2.1:7447; repeat for more
    #[arg(long, value_name = "ENDPOINT")]
    connect: Vec<String>,

    /// Where to accept Zenoh sessions (other bridges, Zenoh clients), such as tcp/0.0.0.0:7447;
    /// repeat for more
    #[arg(long, value_name = "ENDPOINT")]
    listen: Vec<String>,

    /// The Zenoh session's mode [default: client when --connect is given without --listen (a
    /// Zenoh router routes for its clients, not between its peers), peer otherwise]
    #[arg(long, value_enum)]
    mode: Option<Mode>,

    /// A Zenoh configuration file (JSON5) to start from (TLS, access control, …); the options
    /// above apply on top of it
    #[arg(long, value_name = "FILE")]
    zenoh_config: Option<std::path::PathBuf>,

    /// Do not look for Zenoh peers by multicast (connect only where --connect says)
    #[arg(long)]
    no_multicast_scouting: bool,

    /// How the bridge reads ferry topics: latest never holds a publisher back (a slow Zenoh
    /// link skips messages, counted as lost); reliable holds it back instead
    #[arg(long, value_name = "latest|reliable", default_value = "latest")]
    delivery: ferry::Delivery,

    /// Which ferry ends the bridge joins: shm, this host's (one bridge per host, never a loop);
    /// auto, also the hosts its UDP reaches (run one bridge per such group of hosts)
    #[arg(long, value_name = "shm|udp|auto", default_value = "shm")]
    transport: ferry::Transport,

    /// The largest message carried either way (K, M suffixes); larger ones are refused, counted
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = parse_size)]
    max_message_size: usize,

    /// The most topics bridged each way; more are refused, counted
    #[arg(long, value_name = "N", default_value_t = 256)]
    max_topics: usize,

    /// Forward up to K of the messages a ferry publisher kept (`ferry pub --history N`) when
    /// the bridge finds it already running, so that what it published before the bridge saw
    /// its topic reaches Zenoh too (this host's publishers and, over UDP, at most 8192 of other
    /// hosts' publishers)
    #[arg(long, value_name = "K", default_value_t = 64)]
    history: usize,

    /// How often the domain's topics are looked at for new ones, in seconds
    #[arg(long, value_name = "S", default_value_t = 0.5, value_parser = parse_seconds)]
    scan_interval: f64,

    /// Stop after this many seconds [default: run until Ctrl-C or SIGTERM]
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    duration: Option<f64>,

    /// Print the counts at the end as JSON on standard output
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    Peer,
    Client,
    Router,
}

impl Args {
    fn mode(&self) -> Mode {
        self.mode
            .unwrap_or(if !self.connect.is_empty() && self.listen.is_empty() {
                Mode::Client
            } else {
                Mode::Peer
            })
    }
}

fn parse_size(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let (digits, scale) = match t.as_bytes().last() {
        Some(b'K' | b'k') => (&t[..t.len() - 1], 1 << 10),
        Some(b'M' | b'm') => (&t[..t.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|&n| n >= 1)
        .ok_or_else(|| format!("invalid size {text:?}: expected bytes such as 65536, 64K or 1M"))
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= 1e7)
        .ok_or_else(|| format!("invalid seconds {text:?}: expected a number above 0, such as 0.5"))
}

/// The first SIGINT or SIGTERM, 0 before one.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    // Relaxed: a flag with no data behind it; the main loop polls it.
    let _ = SIGNAL.compare_exchange(0, signal, Ordering::Relaxed, Ordering::Relaxed);
}

/// SIGINT and SIGTERM end the run cleanly (ferry segments given back, counts printed); a second
/// one ends the process at once (`SA_RESETHAND`).
fn install_signals() -> Result<(), String> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `sigaction` is plain data; all zeroes is no flags, an empty mask, no restorer.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESETHAND;
        // SAFETY: `action` is initialised and outlives the call; the handler only does an
        // atomic compare-and-swap, which is async-signal-safe.
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
            return Err(format!(
                "cannot install a signal handler: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// The Zenoh configuration the options describe.
fn zenoh_config(args: &Args) -> Result<zenoh::Config, String> {
    let mut config = match &args.zenoh_config {
        Some(path) => zenoh::Config::from_file(path).map_err(|e| {
            format!(
                "cannot read the Zenoh configuration {}: {e}",
                path.display()
            )
        })?,
        None => zenoh::Config::default(),
    };
    let json_list = |items: &[String]| {
        let quoted: Vec<String> = items
            .iter()
            .map(|e| format!("\"{}\"", e.replace('\\', "\\\\").replace('"', "\\\"")))
            .collect();
        format!("[{}]", quoted.join(","))
    };
    let mode = match args.mode() {
        Mode::Peer => "\"peer\"",
        Mode::Client => "\"client\"",
        Mode::Router => "\"router\"",
    };
    let mut set = |key: &str, value: String| {
        config
            .insert_json5(key, &value)
            .map_err(|e| format!("invalid Zenoh setting {key} = {value}: {e}"))
    };
    set("mode", mode.into())?;
    if !args.connect.is_empty() {
        set("connect/endpoints", json_list(&args.connect))?;
    }
    if !args.listen.is_empty() {
        set("listen/endpoints", json_list(&args.listen))?;
    }
    if args.no_multicast_scouting {
        set("scouting/multicast/enabled", "false".into())?;
    }
    Ok(config)
}

fn run(args: Args) -> Result<(), String> {
    let mut config =
        ferry::NodeConfig::from_env().map_err(|e| format!("invalid ferry settings: {e}"))?;
    if let Some(domain) = &args.domain {
        config = config.with_domain(domain);
    }
    let domain = config.domain().to_owned();
    ferry::admin::validate_domain(&domain).map_err(|e| e.to_string())?;
    let options = Options {
        domain: domain.clone(),
        patterns: args.topics.clone(),
        delivery: args.delivery,
        transport: args.transport,
        max_message: args.max_message_size,
        max_topics: args.max_topics,
        scan: Duration::from_secs_f64(args.scan_interval),
        history: args.history,
    };
    let session = zenoh::open(zenoh_config(&args)?)
        .wait()
        .map_err(|e| format!("cannot open the Zenoh session: {e}"))?;
    let mut bridge = Bridge::start(options, config, session.clone())?;
    eprintln!(
        "ferry-zenoh: ready: domain {domain}, topics {}, Zenoh {} ({:?})",
        args.topics.join(" "),
        session.zid(),
        args.mode()
    );
    let deadline = args
        .duration
        .map(|s| Instant::now() + Duration::from_secs_f64(s));
    bridge.run(|| {
        // Relaxed: see `on_signal`.
        SIGNAL.load(Ordering::Relaxed) != 0 || deadline.is_some_and(|d| Instant::now() >= d)
    });
    let counts = bridge.stop();
    let _ = session.close().wait();
    if args.json {
        println!("{}", counts.to_json());
    } else {
        eprint!("{}", counts.to_text());
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(e) = install_signals() {
        eprintln!("ferry-zenoh: {e}");
        return ExitCode::FAILURE;
    }
    match run(args) {
        // Relaxed: see `on_signal`.
        Ok(()) => match SIGNAL.load(Ordering::Relaxed) {
            0 => ExitCode::SUCCESS,
            // What a shell reports for a process a signal ended, after a clean stop.
            s => ExitCode::from(128 + s as u8),
        },
        Err(e) => {
            eprintln!("ferry-zenoh: {e}");
            ExitCode::FAILURE
        }
    }
}
