//! The monitor's HTTP server: GET only, one request per connection, on std's TCP with httparse
//! reading the request head. Every request is hostile input: the head is read within a time
//! and size bound, at most `MAX_CONNECTIONS` are served at once (more are answered 503 and
//! closed), at most `MAX_STREAMS` of them event streams, and a listener that is not on loopback
//! serves nothing without its token.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 32;
/// Event streams (`/api/events`) open at once.
pub const MAX_STREAMS: usize = 8;
/// The largest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

const INDEX_HTML: &str = include_str!("page/index.html");
const MONITOR_JS: &str = include_str!("page/monitor.js");
const MONITOR_CSS: &str = include_str!("page/monitor.css");

/// The latest state as JSON: whole (`/api/state`) and without histories (each event), with
/// its sequence number (which event streams wait on).
pub struct Latest {
    pub json: Mutex<Versions>,
    pub changed: Condvar,
}

pub struct Versions {
    seq: u64,
    whole: Arc<String>,
    event: Arc<String>,
}

impl Latest {
    pub fn new() -> Latest {
        let empty = Arc::new("{}".to_owned());
        Latest {
            json: Mutex::new(Versions {
                seq: 0,
                whole: Arc::clone(&empty),
                event: empty,
            }),
            changed: Condvar::new(),
        }
    }

    pub fn set(&self, whole: String, event: String) {
        let mut g = self.json.lock().unwrap_or_else(|p| p.into_inner());
        g.seq += 1;
        g.whole = Arc::new(whole);
        g.event = Arc::new(event);
        self.changed.notify_all();
    }

    fn whole(&self) -> Arc<String> {
        let g = self.json.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(&g.whole)
    }

    fn event(&self) -> (u64, Arc<String>) {
        let g = self.json.lock().unwrap_or_else(|p| p.into_inner());
        (g.seq, Arc::clone(&g.event))
    }

    /// The next event after `seen`, waiting at most `wait`.
    fn next(&self, seen: u64, wait: Duration) -> Option<(u64, Arc<String>)> {
        let g = self.json.lock().unwrap_or_else(|p| p.into_inner());
        let (g, _) = self
            .changed
            .wait_timeout_while(g, wait, |g| g.seq == seen)
            .unwrap_or_else(|p| p.into_inner());
        (g.seq != seen).then(|| (g.seq, Arc::clone(&g.event)))
    }
}

/// What the server serves.
pub struct Site {
    pub latest: Arc<Latest>,
    /// Required on every request when set (a listener beyond loopback).
    pub token: Option<String>,
    /// The lab report's directory, served under /lab/ when it holds an index.html.
    pub lab: PathBuf,
    pub stop: Arc<std::sync::atomic::AtomicBool>,
}

/// Serves `site` on `listener` until `site.stop` is set and a connection arrives (`stop` makes
/// one): the accept blocks, so an idle monitor wakes for nothing.
pub fn serve(listener: TcpListener, site: Arc<Site>) -> std::io::Result<()> {
    let active = Arc::new(AtomicUsize::new(0));
    let streams = Arc::new(AtomicUsize::new(0));
    while !site.stop.load(Ordering::Relaxed) {
        let (mut conn, _) = match listener.accept() {
            Ok(c) => c,
            Err(_) => {
                // Out of descriptors, say: a moment before the next.
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if site.stop.load(Ordering::Relaxed) {
            break;
        }
        if active.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
            let _ = respond(
                &mut conn,
                503,
                "text/plain",
                b"too many connections\n",
                false,
            );
            continue;
        }
        active.fetch_add(1, Ordering::Relaxed);
        let (site, active, streams) =
            (Arc::clone(&site), Arc::clone(&active), Arc::clone(&streams));
        let spawned = std::thread::Builder::new()
            .name("monitor-http".into())
            .spawn(move || {
                handle(conn, &site, &streams);
                active.fetch_sub(1, Ordering::Relaxed);
            });
        if spawned.is_err() {
            // The thread was not made; its connection is closed with it.
            continue;
        }
    }
    Ok(())
}

/// Reads the request head (bounded in size and time) and answers it.
fn handle(mut conn: TcpStream, site: &Site, streams: &AtomicUsize) {
    let _ = conn.set_read_timeout(Some(HEAD_TIMEOUT));
    let _ = conn.set_write_timeout(Some(Duration::from_secs(10)));
    let mut buf = vec![0u8; MAX_HEAD];
    let mut len = 0;
    let (method, target, auth, cookie) = loop {
        if len == buf.len() {
            let _ = respond(
                &mut conn,
                431,
                "text/plain",
                b"request head too large\n",
                false,
            );
            return;
        }
        match conn.read(&mut buf[len..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => len += n,
        }
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..len]) {
            Ok(httparse::Status::Complete(_)) => {
                let auth = header_values(req.headers, "authorization")
                    .next()
                    .flatten()
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .map(str::to_owned);
                let cookie = header_values(req.headers, "cookie")
                    .flatten()
                    .flat_map(|v| v.split(';'))
                    .find_map(|c| c.trim().strip_prefix("ferry_token="))
                    .map(str::to_owned);
                break (
                    req.method.unwrap_or("").to_owned(),
                    req.path.unwrap_or("/").to_owned(),
                    auth,
                    cookie,
                );
            }
            Ok(httparse::Status::Partial) => continue,
            Err(_) => {
                let _ = respond(&mut conn, 400, "text/plain", b"bad request\n", false);
                return;
            }
        }
    };
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        let _ = respond(&mut conn, 405, "text/plain", b"GET only\n", false);
        return;
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    if let Some(token) = &site.token {
        // The token in the query (the address printed at start), a header, or the cookie the
        // first such request sets (so the lab report's images load too).
        let given = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("token="))
            .map(str::to_owned)
            .or(auth)
            .or(cookie);
        if !given.is_some_and(|g| same(g.as_bytes(), token.as_bytes())) {
            let _ = respond(
                &mut conn,
                401,
                "text/plain",
                b"a token is needed: ?token=...\n",
                false,
            );
            return;
        }
    }
    let cookie = site.token.as_deref();
    let _ = match path {
        "/" | "/index.html" => respond_with(
            &mut conn,
            200,
            "text/html; charset=utf-8",
            INDEX_HTML.as_bytes(),
            head_only,
            cookie,
        ),
        "/monitor.js" => respond(
            &mut conn,
            200,
            "text/javascript; charset=utf-8",
            MONITOR_JS.as_bytes(),
            head_only,
        ),
        "/monitor.css" => respond(
            &mut conn,
            200,
            "text/css; charset=utf-8",
            MONITOR_CSS.as_bytes(),
            head_only,
        ),
        "/api/state" => {
            let json = site.latest.whole();
            respond(
                &mut conn,
                200,
                "application/json",
                json.as_bytes(),
                head_only,
            )
        }
        "/api/lab" => {
            let there = site.lab.join("index.html").is_file();
            let body = format!(
                "{{\"report\":{}}}",
                if there { "\"/lab/index.html\"" } else { "null" }
            );
            respond(
                &mut conn,
                200,
                "application/json",
                body.as_bytes(),
                head_only,
            )
        }
        "/api/last" => {
            let (domain, topic) = (param(query, "domain"), param(query, "topic"));
            let (status, body) = match (domain, topic) {
                (Some(d), Some(t)) => match super::last::last(&d, &t) {
                    Ok(last) => (200, serde_json::to_string(&last).unwrap_or_default()),
                    Err(e) => (
                        400,
                        serde_json::json!({ "error": e.to_string() }).to_string(),
                    ),
                },
                _ => (
                    400,
                    r#"{"error":"/api/last needs ?domain=D&topic=T"}"#.to_owned(),
                ),
            };
            respond(
                &mut conn,
                status,
                "application/json",
                body.as_bytes(),
                head_only,
            )
        }
        "/api/events" => {
            if streams.fetch_add(1, Ordering::Relaxed) >= MAX_STREAMS {
                streams.fetch_sub(1, Ordering::Relaxed);
                respond(
                    &mut conn,
                    503,
                    "text/plain",
                    b"too many event streams\n",
                    false,
                )
            } else {
                let r = stream_events(&mut conn, site);
                streams.fetch_sub(1, Ordering::Relaxed);
                r
            }
        }
        p if p.starts_with("/lab/") => serve_lab(&mut conn, &site.lab, &p[5..], head_only),
        _ => respond(&mut conn, 404, "text/plain", b"not found\n", false),
    };
}

/// The values of the headers named `name` (in any case), in order, each as text (`None` where
/// it is not UTF-8).
fn header_values<'a>(
    headers: &'a [httparse::Header<'a>],
    name: &'a str,
) -> impl Iterator<Item = Option<&'a str>> {
    headers
        .iter()
        .filter(move |h| h.name.eq_ignore_ascii_case(name))
        .map(|h| std::str::from_utf8(h.value).ok())
}

/// The value of `key` in a query string, percent-decoded; `None` when it is absent or does not
/// decode to UTF-8.
fn param(query: &str, key: &str) -> Option<String> {
    let raw = query
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))?;
    let mut out = Vec::with_capacity(raw.len());
    let mut bytes = raw.bytes();
    while let Some(b) = bytes.next() {
        out.push(match b {
            b'+' => b' ',
            b'%' => {
                let hi = (bytes.next()? as char).to_digit(16)?;
                let lo = (bytes.next()? as char).to_digit(16)?;
                (hi * 16 + lo) as u8
            }
            b => b,
        });
    }
    String::from_utf8(out).ok()
}

/// Compares without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Server-sent events: each new state as one `data:` line, until the client goes or the
/// monitor stops.
fn stream_events(conn: &mut TcpStream, site: &Site) -> std::io::Result<()> {
    conn.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n\
          Connection: close\r\n\r\n",
    )?;
    let (mut seen, json) = site.latest.event();
    write!(conn, "data: {json}\n\n")?;
    while !site.stop.load(Ordering::Relaxed) {
        match site.latest.next(seen, Duration::from_secs(1)) {
            Some((n, json)) => {
                seen = n;
                write!(conn, "data: {json}\n\n")?;
            }
            // A comment keeps the connection alive, and finds a client that went.
            None => conn.write_all(b": idle\n\n")?,
        }
    }
    Ok(())
}

/// A file of the lab report: a plain name in its directory (no path separators, no dot files),
/// as the report writes them.
fn serve_lab(conn: &mut TcpStream, dir: &Path, name: &str, head_only: bool) -> std::io::Result<()> {
    let name = if name.is_empty() { "index.html" } else { name };
    let plain = name.len() <= 128
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let kind = match name.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("csv") => "text/csv; charset=utf-8",
        Some("json") => "application/json",
        Some("png") => "image/png",
        _ => "",
    };
    if !plain || kind.is_empty() {
        return respond(conn, 404, "text/plain", b"not found\n", false);
    }
    match std::fs::read(dir.join(name)) {
        Ok(body) => respond(conn, 200, kind, &body, head_only),
        Err(_) => respond(
            conn,
            404,
            "text/plain",
            b"no lab report here: run `ferry lab`\n",
            false,
        ),
    }
}

fn respond(
    conn: &mut TcpStream,
    status: u16,
    kind: &str,
    body: &[u8],
    head_only: bool,
) -> std::io::Result<()> {
    respond_with(conn, status, kind, body, head_only, None)
}

/// As `respond`, setting the token's cookie on a success when `cookie` is given.
fn respond_with(
    conn: &mut TcpStream,
    status: u16,
    kind: &str,
    body: &[u8],
    head_only: bool,
    cookie: Option<&str>,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Service Unavailable",
    };
    write!(
        conn,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n",
        body.len()
    )?;
    if let Some(token) = cookie.filter(|_| status == 200) {
        write!(
            conn,
            "Set-Cookie: ferry_token={token}; HttpOnly; SameSite=Strict; Path=/\r\n"
        )?;
    }
    conn.write_all(b"\r\n")?;
    if !head_only {
        conn.write_all(body)?;
    }
    conn.flush()
}

/// Whether a listener on `addr` reaches this host only.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// Stops a server listening on `addr`: sets `stop`, then connects once so that its accept
/// returns and sees it.
pub fn stop(site: &Site, addr: SocketAddr) {
    site.stop.store(true, Ordering::Relaxed);
    let to = if addr.ip().is_unspecified() {
        SocketAddr::new(
            if addr.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            },
            addr.port(),
        )
    } else {
        addr
    };
    let _ = TcpStream::connect_timeout(&to, Duration::from_secs(1));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(addr: SocketAddr, head: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(head.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    /// A query's values are percent-decoded; a broken escape or bytes that are not UTF-8
    /// give no value (the request is then answered 400), never a panic.
    #[test]
    fn query_values_are_decoded_and_broken_ones_refused() {
        let q = "domain=robot&topic=sensors%2Fimu+raw&x=%E2%9C%93";
        assert_eq!(param(q, "domain").as_deref(), Some("robot"));
        assert_eq!(param(q, "topic").as_deref(), Some("sensors/imu raw"));
        assert_eq!(param(q, "x").as_deref(), Some("\u{2713}"));
        assert_eq!(param(q, "absent"), None);
        for bad in ["topic=%", "topic=%2", "topic=%zz", "topic=%ff", "topic=%C3"] {
            assert_eq!(param(bad, "topic"), None, "{bad}");
        }
        // A key that only begins like another is not it.
        assert_eq!(param("topics=a", "topic"), None);
    }

    #[test]
    fn a_listener_with_a_token_serves_only_requests_that_carry_it() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let site = Arc::new(Site {
            latest: Arc::new(Latest::new()),
            token: Some("5ec7e7".into()),
            lab: PathBuf::from("/nonexistent"),
            stop: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        });
        let server = {
            let site = Arc::clone(&site);
            std::thread::spawn(move || serve(listener, site))
        };
        let status = |r: &str| r.split(' ').nth(1).unwrap_or("").to_owned();
        assert_eq!(status(&ask(addr, "GET /api/state HTTP/1.1\r\n\r\n")), "401");
        assert_eq!(
            status(&ask(addr, "GET /api/state?token=5ec7e8 HTTP/1.1\r\n\r\n")),
            "401"
        );
        let page = ask(addr, "GET /?token=5ec7e7 HTTP/1.1\r\n\r\n");
        assert_eq!(status(&page), "200");
        assert!(
            page.contains("Set-Cookie: ferry_token=5ec7e7; HttpOnly"),
            "{page}"
        );
        let with_cookie = "GET /api/state HTTP/1.1\r\nCookie: a=b; ferry_token=5ec7e7\r\n\r\n";
        assert_eq!(status(&ask(addr, with_cookie)), "200");
        let bearer = "GET /api/state HTTP/1.1\r\nAuthorization: Bearer 5ec7e7\r\n\r\n";
        assert_eq!(status(&ask(addr, bearer)), "200");
        stop(&site, addr);
        server.join().unwrap().unwrap();
    }
}
