//! Plain-text tables with aligned columns, and output to standard output that tolerates a closed
//! pipe (`ferry echo | head`).

use std::io::{self, Write};
use std::os::fd::AsFd;

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;

use crate::error::Result;

/// Columns of text; numeric-looking columns are right-aligned.
pub struct Table {
    headers: Vec<String>,
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with `headers`; a header starting with `>` is right-aligned (the `>` is dropped).
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers
                .iter()
                .map(|h| h.trim_start_matches('>').to_owned())
                .collect(),
            right: headers.iter().map(|h| h.starts_with('>')).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let columns = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let empty = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = row.get(i).unwrap_or(&empty);
                if i > 0 {
                    line.push_str("  ");
                }
                if self.right[i] {
                    line.push_str(&format!("{cell:>width$}"));
                } else {
                    line.push_str(&format!("{cell:<width$}"));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Writes `text` to standard output. Returns `Ok(false)` when the reader closed the pipe (the
/// command should stop quietly), an error for any other failure, and `signal::check`'s error when
/// Ctrl-C or SIGTERM arrives while a reader that stopped reading holds the output back.
pub fn print_out(text: &str) -> Result<bool> {
    let mut out = io::stdout().lock();
    // What `println!` left in the standard library's buffer goes first (usually nothing: it
    // flushes at each newline).
    if let Err(e) = out.flush() {
        return write_failed(e);
    }
    // Then straight to the file descriptor: `write_all` retries a write that a signal
    // interrupted, and would wait for a stalled reader for ever.
    let fd = out.as_fd();
    let slice = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: crate::signal::POLL.as_nanos() as _,
    };
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        let mut fds = [PollFd::new(&fd, PollFlags::OUT)];
        match rustix::event::poll(&mut fds, Some(&slice)) {
            Ok(0) => {
                crate::signal::check()?;
                continue;
            }
            Ok(_) => {}
            Err(Errno::INTR) => continue,
            Err(e) => return write_failed(e.into()),
        }
        // Once a pipe polls writable, PIPE_BUF bytes go in without blocking.
        let chunk = &rest[..rest.len().min(PIPE_BUF)];
        match rustix::io::write(fd, chunk) {
            Ok(n) => rest = &rest[n..],
            Err(Errno::INTR | Errno::AGAIN) => crate::signal::check()?,
            Err(e) => return write_failed(e.into()),
        }
    }
    Ok(true)
}

/// The atomic write size of a pipe on Linux (the smallest POSIX allows is 512).
const PIPE_BUF: usize = 4096;

fn write_failed(e: io::Error) -> Result<bool> {
    if e.kind() == io::ErrorKind::BrokenPipe {
        return Ok(false);
    }
    Err(crate::error::Error::msg(format!(
        "cannot write to standard output: {e}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns() {
        let mut t = Table::new(&["name", ">n"]);
        t.row(vec!["a".into(), "1".into()]);
        t.row(vec!["long".into(), "100".into()]);
        assert_eq!(t.render(), "name    n\na       1\nlong  100\n");
    }
}
