//! The command's error type: a message for the user, built from any error with optional context.

use std::fmt;

/// The message of the error that `signal::check` returns when Ctrl-C or SIGTERM came.
pub const INTERRUPTED: &str = "interrupted (Ctrl-C or SIGTERM)";

/// An error to print as `ferry: error: <message>`.
pub struct Error(String);

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn msg(message: impl Into<String>) -> Error {
        Error(message.into())
    }

    /// Whether this is `signal::check`'s error (possibly with context before it): the command
    /// stopped because Ctrl-C or SIGTERM asked it to.
    pub fn is_interruption(&self) -> bool {
        self.0.ends_with(INTERRUPTED)
    }
}

// `Error` deliberately does not implement `std::error::Error`, so that every error type converts
// into it with `?`.
impl<E: std::error::Error> From<E> for Error {
    fn from(e: E) -> Error {
        Error(e.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Adds what was being done to an error: `context: cause`.
pub trait Context<T> {
    fn context(self, what: impl fmt::Display) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error(format!("{what}: {}", e.into())))
    }
}

/// Returns early with an error built like `format!`.
#[macro_export]
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::msg(format!($($arg)*)))
    };
}
pub use crate::bail;

/// Prints a line to standard error, ignoring a closed stream (unlike `eprintln!`, never panics).
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub use crate::note;
