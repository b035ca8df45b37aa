//! Parsing and printing of sizes, durations, rates and names given on the command line.

use std::time::Duration;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
const GIB: usize = 1 << 30;

/// A byte count: digits with an optional K, M or G suffix (powers of 1024), optionally followed
/// by `B` or `iB`, in any case: `32`, `1K`, `4MiB`.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let invalid = || {
        format!(
            "invalid size {text:?}: expected a whole number of bytes with an optional K, M or G \
             suffix (1K = 1024), e.g. 32, 1K, 4M"
        )
    };
    let lower = text.trim().to_ascii_lowercase();
    let body = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (digits, unit) = match body.as_bytes().last() {
        Some(b'k') => (&body[..body.len() - 1], KIB),
        Some(b'm') => (&body[..body.len() - 1], MIB),
        Some(b'g') => (&body[..body.len() - 1], GIB),
        _ => (body, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    // All digits: a parse that fails is a number past what a size can be.
    let n: usize = digits
        .parse()
        .map_err(|_| format!("size {text:?} is too large"))?;
    n.checked_mul(unit)
        .ok_or_else(|| format!("size {text:?} is too large"))
}

/// The largest message size the command line takes: what a ring record can describe (a 32-bit
/// length, less its header), a little under 4 GiB.
pub const MAX_MESSAGE: usize = u32::MAX as usize - 64;

/// A message's size: as [`parse_size`], at most [`MAX_MESSAGE`].
pub fn parse_message_size(text: &str) -> Result<usize, String> {
    let n = parse_size(text)?;
    if n > MAX_MESSAGE {
        return Err(format!(
            "size {text:?} is too large: a message is at most {} bytes (just under 4 GiB)",
            MAX_MESSAGE
        ));
    }
    Ok(n)
}

/// A limit on message sizes: as [`parse_message_size`], at least 1 byte.
pub fn parse_max_size(text: &str) -> Result<usize, String> {
    match parse_message_size(text)? {
        0 => Err("a limit on message sizes is at least 1 byte".to_owned()),
        n => Ok(n),
    }
}

/// `32 B`, `1 KiB`, `1.5 KiB`, `1 MiB`.
pub fn format_size(bytes: usize) -> String {
    let (unit, name) = match bytes {
        b if b >= GIB => (GIB, "GiB"),
        b if b >= MIB => (MIB, "MiB"),
        b if b >= KIB => (KIB, "KiB"),
        _ => return format!("{bytes} B"),
    };
    if bytes % unit == 0 {
        format!("{} {name}", bytes / unit)
    } else {
        format!("{:.1} {name}", bytes as f64 / unit as f64)
    }
}

/// Seconds as a decimal number, optionally with an `s` or `ms` suffix: `10`, `2.5`, `500ms`.
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        (t, 1.0)
    };
    let invalid = || {
        format!("invalid duration {text:?}: expected seconds greater than 0, e.g. 10, 2.5 or 500ms")
    };
    let value: f64 = number.trim().parse().map_err(|_| invalid())?;
    let secs = value * scale;
    if !secs.is_finite() || secs <= 0.0 {
        return Err(invalid());
    }
    if secs < 1e-6 {
        return Err(format!("duration {text:?} is too short (at least 1 µs)"));
    }
    if secs > 1e7 {
        return Err(format!(
            "duration {text:?} is too long (at most 10000000 s)"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Messages per second: 0 (as fast as possible), or from one a million seconds (1e-6) to one
/// billion. The lower bound keeps a message's due time, `count / rate` seconds on, a time the
/// clock can count.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    let value: f64 = text.trim().parse().map_err(|_| {
        format!("invalid rate {text:?}: expected messages per second, e.g. 10, 0.5 or 0 (as fast as possible)")
    })?;
    if !(value == 0.0 || (1e-6..=1e9).contains(&value)) {
        return Err(format!(
            "invalid rate {text:?}: must be 0 (as fast as possible) or between 0.000001 and \
             1000000000"
        ));
    }
    Ok(value)
}

/// A domain name as the library accepts it.
pub fn parse_domain(text: &str) -> Result<String, String> {
    let config = ferry::NodeConfig::default().with_domain(text);
    ferry::Node::with_config("ferry", config)
        .map(|_| text.to_owned())
        .map_err(|e| e.to_string())
}

/// `n` and the noun, singular for one: "1 message", "2 messages".
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Nanoseconds with three significant digits: `85 ns`, `1.23 µs`, `540 µs`, `1.20 ms`.
pub fn format_ns(ns: f64) -> String {
    if ns < 1e3 {
        return format!("{ns:.0} ns");
    }
    let (value, unit) = if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    if value < 10.0 {
        format!("{value:.2} {unit}")
    } else if value < 100.0 {
        format!("{value:.1} {unit}")
    } else {
        format!("{value:.0} {unit}")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_say_one_in_the_singular() {
        assert_eq!(super::count(1, "message", "messages"), "1 message");
        assert_eq!(super::count(0, "message", "messages"), "0 messages");
        assert_eq!(super::count(2, "time", "times"), "2 times");
    }

    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("32"), Ok(32));
        assert_eq!(parse_size("1K"), Ok(1024));
        assert_eq!(parse_size("1k"), Ok(1024));
        assert_eq!(parse_size("32KiB"), Ok(32 * 1024));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("2mb"), Ok(2 << 20));
        assert_eq!(parse_size("100B"), Ok(100));
        for bad in [
            "",
            "K",
            "-1",
            "+5",
            "1.5K",
            "12X",
            "1KK",
            "99999999999999999999",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(parse_size("99999999999999G").is_err());
        assert_eq!(parse_message_size("0"), Ok(0));
        assert_eq!(parse_max_size("4M"), Ok(4 << 20));
        assert!(parse_max_size("0").unwrap_err().contains("at least 1 byte"));
        for big in ["4G", "10G"] {
            assert!(parse_max_size(big)
                .unwrap_err()
                .contains("just under 4 GiB"));
            assert!(parse_message_size(big).is_err());
        }
        assert_eq!(parse_message_size("3G"), Ok(3 << 30));
        // A whole number past what a size can be is said to be too large, not malformed.
        for huge in ["99999999999999999999", "99999999999999G"] {
            let e = parse_size(huge).unwrap_err();
            assert!(e.contains("too large"), "{e}");
        }
        assert_eq!(format_size(32), "32 B");
        assert_eq!(format_size(1024), "1 KiB");
        assert_eq!(format_size(1536), "1.5 KiB");
        assert_eq!(format_size(1 << 20), "1 MiB");
    }

    #[test]
    fn durations_and_rates() {
        assert_eq!(parse_seconds("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_seconds("2.5s"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_seconds("500ms"), Ok(Duration::from_millis(500)));
        for bad in ["0", "-1", "x", "inf", "NaN", "", "1e-300", "0.0000001"] {
            assert!(parse_seconds(bad).is_err(), "{bad:?} should be refused");
        }
        assert_eq!(parse_seconds("1e-6"), Ok(Duration::from_micros(1)));
        assert_eq!(parse_rate("0"), Ok(0.0));
        assert_eq!(parse_rate("0.5"), Ok(0.5));
        assert_eq!(parse_rate("1e-6"), Ok(1e-6));
        for bad in ["-1", "x", "inf", "NaN", "1e10", "1e-7", "1e-300", "-0.5"] {
            assert!(parse_rate(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn nanoseconds() {
        assert_eq!(format_ns(85.0), "85 ns");
        assert_eq!(format_ns(1234.0), "1.23 µs");
        assert_eq!(format_ns(54_321.0), "54.3 µs");
        assert_eq!(format_ns(540_000.0), "540 µs");
        assert_eq!(format_ns(1_200_000.0), "1.20 ms");
    }
}
