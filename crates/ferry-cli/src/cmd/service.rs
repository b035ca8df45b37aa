//! `ferry serve` and `ferry call`: a test server for a service, and a client that calls it and
//! prints each response's round-trip time.

use std::time::{Duration, Instant};

use clap::Args;

use super::{wait_words, write_numbered, TransportOpt, POLL_SLICE};
use ferry_cmd::error::{bail, note, Context, Result};
use ferry_cmd::signal;
use ferry_cmd::stats::Summary;
use ferry_cmd::units::{
    count, format_ns, format_size, parse_domain, parse_max_size, parse_message_size, parse_rate,
    parse_seconds,
};

/// The options `serve` and `call` share.
#[derive(Debug, Args)]
pub struct ServiceOpts {
    #[command(flatten)]
    pub transport: TransportOpt,

    /// How to wait for requests (serve) or responses (call)
    #[arg(long, value_parser = wait_words(), default_value_t = ferry::WaitStrategy::Adaptive)]
    pub wait: ferry::WaitStrategy,

    /// The largest request (and, for serve, response) in bytes, with an optional K, M or G suffix
    #[arg(long, value_name = "BYTES", default_value = "1M", value_parser = parse_max_size)]
    pub max_size: usize,

    /// Across hosts (UDP): a server (call) or client (serve) not heard from for S seconds is
    /// gone, 0.3 to 3600; a call then ends at once with "server gone"
    #[arg(long, value_name = "S", default_value = "3", value_parser = parse_seconds)]
    pub lease: Duration,

    /// Domain: only services of one domain see each other [default: $FERRY_DOMAIN, else
    /// "default"]
    #[arg(long, value_name = "D", value_parser = parse_domain)]
    pub domain: Option<String>,
}

impl ServiceOpts {
    fn node_and_qos(&self, name: &str) -> Result<(ferry::Node, ferry::Qos)> {
        let node = super::node(name, self.domain.as_deref())?;
        let qos = ferry::Qos::default()
            .transport(self.transport.into())
            .wait(self.wait)
            .max_message_size(self.max_size.max(1))
            .lease(self.lease)
            .send_timeout(SEND_TIMEOUT);
        Ok((node, qos))
    }
}

/// How long one response (serve) or request (call) may wait for room in a reliable ring
/// before the command gives up on it.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Service to serve (1 to 64 letters, digits and _ - . /)
    pub service: String,

    /// Answer each request with its own bytes (the default)
    #[arg(long, conflicts_with = "size")]
    pub echo: bool,

    /// Answer each request with BYTES bytes (K, M or G suffix; the request's id, u64 little endian,
    /// first when it fits) instead of echoing it
    #[arg(long, value_name = "BYTES", value_parser = parse_message_size)]
    pub size: Option<usize>,

    /// Wait this long before each answer (e.g. 10ms): a slow server
    #[arg(long, value_name = "DURATION", value_parser = parse_seconds)]
    pub delay: Option<Duration>,

    /// Exit after answering N requests [default: until Ctrl-C]
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,

    /// Print nothing per request
    #[arg(long)]
    pub quiet: bool,

    #[command(flatten)]
    pub opts: ServiceOpts,
}

pub fn serve(args: ServeArgs) -> Result<()> {
    let (node, qos) = args.opts.node_and_qos("ferry-serve")?;
    if let Some(size) = args.size {
        if size > args.opts.max_size {
            bail!(
                "--size {} exceeds --max-size {} (the largest response this server sends)",
                format_size(size),
                format_size(args.opts.max_size)
            );
        }
    }
    let mut server = node.server(&args.service, &qos).context(format!(
        "cannot serve service {} in domain {}",
        ferry::quoted_name(&args.service),
        node.domain()
    ))?;
    note!(
        "serving {:?} (domain {}): {}{}",
        args.service,
        node.domain(),
        args.size
            .map_or("echoing each request".to_owned(), |s| format!(
                "answering {} per request",
                format_size(s)
            )),
        args.delay
            .map_or(String::new(), |d| format!(", after {d:?} each"))
    );
    let (mut answered, mut gone) = (0u64, 0u64);
    while args.count.map_or(true, |c| answered + gone < c) {
        if signal::interrupted() {
            break;
        }
        let Some(request) = server.recv_request(POLL_SLICE)? else {
            continue;
        };
        let (client, id, len) = (request.client(), request.id(), request.len());
        let to = request.reply_to();
        if !args.quiet {
            println!("request {id} from client {client}: {len} bytes");
        }
        if let Some(delay) = args.delay {
            // Answered later: the request is let go now (an echo keeps a copy), its client
            // keeps waiting.
            let body = match args.size {
                Some(size) => {
                    let mut body = vec![0u8; size];
                    write_numbered(&mut body, id.get());
                    body
                }
                None => request.to_vec(),
            };
            drop(request);
            if signal::sleep(delay).is_err() {
                break;
            }
            tally(server.respond(to, &body)?, &mut answered, &mut gone);
        } else {
            let size = args.size.unwrap_or(len);
            let echo = args.size.is_none();
            let outcome = request.respond_with(size, |input, output| {
                if echo {
                    output.copy_from_slice(input);
                } else {
                    write_numbered(output, id.get());
                }
            })?;
            tally(outcome, &mut answered, &mut gone);
        }
    }
    note!(
        "answered {}; {} dropped because their client had gone",
        count(answered, "request", "requests"),
        count(gone, "answer", "answers")
    );
    Ok(())
}

fn tally(outcome: ferry::service::Responded, answered: &mut u64, gone: &mut u64) {
    match outcome {
        ferry::service::Responded::Sent => *answered += 1,
        ferry::service::Responded::ClientGone => *gone += 1,
    }
}

#[derive(Debug, Args)]
pub struct CallArgs {
    /// Service to call (1 to 64 letters, digits and _ - . /)
    pub service: String,

    /// Send requests of BYTES bytes (K, M or G suffix), filled with the call's number
    #[arg(long, value_name = "BYTES", default_value = "64", value_parser = parse_message_size, conflicts_with = "data")]
    pub size: usize,

    /// Send this text as each request instead (responses are then printed as text)
    #[arg(long, value_name = "TEXT")]
    pub data: Option<String>,

    /// Number of calls
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub count: u64,

    /// Calls per second, on absolute deadlines; 0 calls again as soon as an answer came
    #[arg(long, value_name = "HZ", default_value = "0", value_parser = parse_rate)]
    pub rate: f64,

    /// How long each call waits for its response, e.g. 1 or 500ms; one that gets none is
    /// counted and the next call goes out (the command then exits non-zero)
    #[arg(long, value_name = "DURATION", default_value = "5", value_parser = parse_seconds)]
    pub timeout: Duration,

    /// Wait up to S seconds for a server to appear [default: fail at once without one]
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub wait_server: Option<Duration>,

    /// Print nothing per call, only the summary
    #[arg(long)]
    pub quiet: bool,

    #[command(flatten)]
    pub opts: ServiceOpts,
}

pub fn call(args: CallArgs) -> Result<()> {
    let (node, qos) = args.opts.node_and_qos("ferry-call")?;
    let len = args.data.as_ref().map_or(args.size, String::len);
    // Before the request is made: a size past the limit is refused without allocating it.
    if len > qos.max_message_size {
        bail!(
            "a request of {} is larger than this client's limit of {} (raise --max-size; the \
             server needs as large a --max-size to take it)",
            format_size(len),
            format_size(qos.max_message_size)
        );
    }
    let body = match &args.data {
        Some(text) => text.as_bytes().to_vec(),
        None => vec![0u8; args.size],
    };
    let mut client = node.client(&args.service, &qos).context(format!(
        "cannot call service {} in domain {}",
        ferry::quoted_name(&args.service),
        node.domain()
    ))?;
    if let Some(wait) = args.wait_server {
        client.wait_for_server(wait);
    }
    let mut round_trips = Vec::with_capacity(args.count.min(1 << 20) as usize);
    let mut timed_out = 0u64;
    let start = Instant::now();
    let mut body = body;
    for i in 0..args.count {
        if signal::interrupted() {
            break;
        }
        if args.rate > 0.0 {
            let due = start + Duration::from_secs_f64(i as f64 / args.rate);
            if signal::sleep(due.saturating_duration_since(Instant::now())).is_err() {
                break;
            }
        }
        if args.data.is_none() {
            write_numbered(&mut body, i);
        }
        let t0 = Instant::now();
        let response = match client.call(&body, args.timeout) {
            Ok(response) => response,
            Err(ferry::CallError::Timeout { request, .. }) => {
                // Counted, and the next call goes out: a response that comes late is dropped
                // (and counted in `ferry stats`).
                timed_out += 1;
                if !args.quiet {
                    println!(
                        "request {request}: no response within {}",
                        format_ns(args.timeout.as_nanos() as f64)
                    );
                }
                continue;
            }
            Err(e) => bail!(
                "call {} of {}: {} ({})",
                i + 1,
                args.count,
                call_error(&e, &args),
                summary_so_far(&mut round_trips.clone(), timed_out)
            ),
        };
        let rtt = t0.elapsed();
        round_trips.push(rtt.as_nanos() as u64);
        if !args.quiet {
            // As text, the first 80 characters.
            let shown = match &args.data {
                Some(_) => {
                    let text = String::from_utf8_lossy(&response);
                    let cut: String = text.chars().take(80).collect();
                    let more = if cut.len() < text.len() { "…" } else { "" };
                    format!(" {cut:?}{more}")
                }
                None => String::new(),
            };
            println!(
                "response {} ({} bytes) in {}{shown}",
                response.request(),
                response.len(),
                format_ns(rtt.as_nanos() as f64)
            );
        }
    }
    let summary = summary_so_far(&mut round_trips, timed_out);
    if timed_out > 0 {
        bail!("{summary}");
    }
    note!("{summary}");
    Ok(())
}

/// A call's error in the command line's words (its flags, not the library's settings).
fn call_error(e: &ferry::CallError, args: &CallArgs) -> String {
    match e {
        ferry::CallError::NoServer { service } => match args.wait_server {
            Some(wait) => format!(
                "no server for service {service} appeared within {} (start one: `ferry serve \
                 {service}`)",
                format_ns(wait.as_nanos() as f64)
            ),
            None => format!(
                "no server for service {service}: start one (`ferry serve {service}`), or wait \
                 for it with --wait-server S"
            ),
        },
        ferry::CallError::TooLarge {
            service,
            request,
            len,
            max,
        } => format!(
            "the server of service {service} refused request {request}: its {} exceed the \
             server's limit of {} (the server's --max-size)",
            format_size(*len),
            format_size(*max)
        ),
        other => other.to_string(),
    }
}

/// "N calls answered, round trip p50 … p99 … max …", and the calls that timed out.
fn summary_so_far(round_trips: &mut [u64], timed_out: u64) -> String {
    let late = match timed_out {
        0 => String::new(),
        n => format!("; {} timed out", count(n, "call", "calls")),
    };
    if round_trips.is_empty() {
        return format!("no call answered{late}");
    }
    let s = Summary::of(round_trips);
    format!(
        "{} answered, round trip p50 {}, p99 {}, max {}{late}",
        count(s.samples as u64, "call", "calls"),
        format_ns(s.p50_ns as f64),
        format_ns(s.p99_ns as f64),
        format_ns(s.max_ns as f64)
    )
}
