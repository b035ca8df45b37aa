//! The messages that go round the ring: a sequence number, a phase, and the pattern byte of both.

use super::options::HEADER;
use crate::error::Result;
use crate::Dir;
use ferry::Publisher;

pub(super) const PROBE: u64 = 1;
pub(super) const WARMUP: u64 = 2;
pub(super) const DATA: u64 = 3;

pub(super) fn pattern_of(phase: u64, seq: u64) -> u8 {
    crate::pattern(seq.wrapping_add(phase << 40), Dir::Ping)
}

pub(super) fn write_message(buf: &mut [u8], phase: u64, seq: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    buf[8..HEADER].copy_from_slice(&phase.to_le_bytes());
    crate::fill(&mut buf[HEADER..], pattern_of(phase, seq));
}

/// (phase, seq) of a message, if it has a header.
pub(super) fn header(buf: &[u8]) -> Option<(u64, u64)> {
    let seq = u64::from_le_bytes(buf.get(..8)?.try_into().ok()?);
    let phase = u64::from_le_bytes(buf.get(8..HEADER)?.try_into().ok()?);
    Some((phase, seq))
}

/// Whether every byte of message (phase, seq) is right and it has `size` bytes.
pub(super) fn intact(buf: &[u8], size: usize, phase: u64, seq: u64) -> bool {
    buf.len() == size && crate::check(&buf[HEADER..], pattern_of(phase, seq))
}

pub(super) fn send(out: &mut Publisher, size: usize, phase: u64, seq: u64) -> Result<()> {
    let mut loan = out.loan(size)?;
    write_message(loan.as_mut_slice(), phase, seq);
    loan.send()?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
