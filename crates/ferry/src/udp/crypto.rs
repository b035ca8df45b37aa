//! The domain key: opt-in authentication and encryption of every UDP datagram ferry sends
//! (frames and discovery alike), with replay protection.
//!
//! ```text
//! sealed datagram
//! 0  u16 magic 0x4659 ("FY")  2 u8 version  3 u8 kind 0x80 (sealed)
//! 4  u64 sender id (random per sending socket)   12 u64 counter (per sender, from 0)
//! 20 ciphertext of the plain datagram   ..  16-byte tag
//! ```
//! The AEAD is AEGIS-128L (the `aegis` crate; AES-NI found at run time), chosen on figures: on
//! this project's machines it seals a 1 424-byte frame in about 130 ns, against 220 ns for
//! AES-128-GCM in `ring`, the fastest of the others (docs/RESULTS.md). Each sender seals with its
//! own keys, derived from the domain key, its sender id and the counter's epoch (a new key every
//! 2^24 datagrams) with HKDF-SHA256, so that the nonce (the counter) never repeats under one key
//! however many processes share the domain key. The 20-byte header is the associated data: a changed
//! byte anywhere fails the tag. A receiver keeps, per sender, the highest counter it accepted and
//! a window of the 1 024 before it; a datagram outside the window or seen before is refused.
//! A sender whose datagram did not authenticate leaves no state behind, so forged sender ids
//! cannot fill the table (it is bounded all the same).

use std::collections::VecDeque;
use std::path::Path;

#[cfg(feature = "domain-key")]
use aegis::aegis128l::Aegis128L;
#[cfg(feature = "domain-key")]
use ring::hkdf;

use super::frame::{MAGIC, VERSION};
use super::ids::{id_map, IdMap};
use super::refusal::Refusal;
use crate::Error;

/// The kind byte of a sealed datagram (never a plain frame's).
pub const KIND_SEALED: u8 = 0x80;
/// Header bytes of a sealed datagram.
pub const SEAL_HEADER: usize = 20;
/// Bytes of the tag that ends a sealed datagram.
pub const SEAL_TAG: usize = 16;
/// Bytes sealing adds to a datagram: header and tag.
pub const SEAL_OVERHEAD: usize = SEAL_HEADER + SEAL_TAG;
/// Counters a receiver accepts out of order behind the highest it saw from a sender.
pub const REPLAY_WINDOW: u64 = 1024;
/// Senders a receiver keeps keys and replay windows for; the least recently heard goes first.
pub const MAX_SENDERS: usize = 1024;
/// A sender's key changes every 2^EPOCH_BITS datagrams.
pub const EPOCH_BITS: u32 = 24;

fn epoch(counter: u64) -> u64 {
    counter >> EPOCH_BITS
}

#[cfg(feature = "domain-key")]
const KEY_LABEL: &[u8] = b"ferry domain key v1: AEGIS-128L datagram key";

/// A domain's shared secret: 32 bytes. Every process of the domain that has it can send and
/// receive; nothing without it is accepted.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct DomainKey([u8; 32]);

impl DomainKey {
    pub fn from_bytes(bytes: [u8; 32]) -> DomainKey {
        DomainKey(bytes)
    }

    /// Reads a key file: 32 raw bytes, or 64 hexadecimal digits (surrounding whitespace
    /// ignored). Make one with `head -c 32 /dev/urandom > ferry.key`; keep it `0600`.
    ///
    /// Only a regular file is read, and no more of it than a key file can hold: a device, a
    /// FIFO or a large file named by mistake is an error, never a hang or a read without end.
    pub fn from_file(path: &Path) -> Result<DomainKey, Error> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        /// More than any key file holds (64 hex digits and whitespace).
        const MAX_KEY_FILE: u64 = 4096;
        available()?;
        let io = |e| Error::io(format!("read the domain key {}", path.display()), e);
        // Non-blocking: opening a FIFO to read would otherwise wait for a writer.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(io)?;
        if !file.metadata().map_err(io)?.is_file() {
            return Err(Error::InvalidConfig(format!(
                "{} is not a regular file; a domain key is a file of 32 bytes or 64 hexadecimal \
                 digits",
                path.display()
            )));
        }
        let mut bytes = Vec::new();
        file.take(MAX_KEY_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        if bytes.len() as u64 > MAX_KEY_FILE {
            return Err(Error::InvalidConfig(format!(
                "{} is longer than {MAX_KEY_FILE} bytes, far more than a domain key (32 bytes, or \
                 64 hexadecimal digits)",
                path.display()
            )));
        }
        DomainKey::parse(&bytes).ok_or_else(|| {
            Error::InvalidConfig(format!(
                "{} is not a domain key: it must hold 32 bytes, or 64 hexadecimal digits \
                 (make a new one with `head -c 32 /dev/urandom > ferry.key`)",
                path.display()
            ))
        })
    }

    fn parse(bytes: &[u8]) -> Option<DomainKey> {
        if let Ok(raw) = <[u8; 32]>::try_from(bytes) {
            return Some(DomainKey(raw));
        }
        let text = std::str::from_utf8(bytes).ok()?.trim();
        if text.len() != 64 {
            return None;
        }
        let mut key = [0u8; 32];
        for (i, k) in key.iter_mut().enumerate() {
            *k = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(DomainKey(key))
    }

    /// An authentication tag (HMAC-SHA-256) of `message` for `purpose`, under a key derived
    /// from this one for that purpose alone: for control channels beside the datagrams (the
    /// lab's agent), which must not share keys with them or with each other.
    pub fn tag(&self, purpose: &str, message: &[u8]) -> Result<[u8; 32], Error> {
        available()?;
        #[cfg(feature = "domain-key")]
        {
            let mut tag = [0u8; 32];
            tag.copy_from_slice(ring::hmac::sign(&self.purpose_key(purpose), message).as_ref());
            Ok(tag)
        }
        #[cfg(not(feature = "domain-key"))]
        {
            let _ = (purpose, message);
            unreachable!("available() refused")
        }
    }

    /// Whether `tag` is `tag(purpose, message)`, compared in constant time.
    pub fn verify_tag(&self, purpose: &str, message: &[u8], tag: &[u8]) -> bool {
        #[cfg(feature = "domain-key")]
        return ring::hmac::verify(&self.purpose_key(purpose), message, tag).is_ok();
        #[cfg(not(feature = "domain-key"))]
        {
            let _ = (purpose, message, tag);
            false
        }
    }

    #[cfg(feature = "domain-key")]
    fn purpose_key(&self, purpose: &str) -> ring::hmac::Key {
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, b"ferry purpose key").extract(&self.0);
        let info = [purpose.as_bytes()];
        let okm = prk
            .expand(&info, ring::hmac::HMAC_SHA256)
            .expect("an HMAC key is a valid HKDF output length");
        ring::hmac::Key::from(okm)
    }

    /// The AEAD key of one sender in one epoch.
    #[cfg(feature = "domain-key")]
    fn sender_key(&self, sender: u64, epoch: u64) -> SenderKey {
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &sender.to_le_bytes()).extract(&self.0);
        let epoch = epoch.to_le_bytes();
        let info = [KEY_LABEL, &epoch];
        let mut key = [0u8; 16];
        prk.expand(&info, KeyLen)
            .and_then(|okm| okm.fill(&mut key))
            .expect("16 bytes are a valid HKDF output length");
        SenderKey(key)
    }

    /// Without the `domain-key` feature no `Sealer` or `Opener` can be made (their
    /// constructors say so), so nothing asks for a sender key.
    #[cfg(not(feature = "domain-key"))]
    fn sender_key(&self, _: u64, _: u64) -> SenderKey {
        unreachable!("no Sealer or Opener exists without the domain-key feature")
    }
}

/// Whether this build can use a domain key (the `domain-key` feature, on by default).
pub fn available() -> Result<(), Error> {
    #[cfg(not(feature = "domain-key"))]
    return Err(no_cipher());
    #[cfg(feature = "domain-key")]
    Ok(())
}

/// The error of a build without the cipher.
#[cfg(not(feature = "domain-key"))]
fn no_cipher() -> Error {
    Error::InvalidConfig(
        "this ferry was built without the domain-key feature: no domain key can be used \
         (build ferry with its default features)"
            .into(),
    )
}

/// The length of an AEGIS-128L key, as HKDF asks for it.
#[cfg(feature = "domain-key")]
struct KeyLen;

#[cfg(feature = "domain-key")]
impl hkdf::KeyType for KeyLen {
    fn len(&self) -> usize {
        16
    }
}

/// One sender's AEGIS-128L key of one epoch.
#[cfg(feature = "domain-key")]
#[derive(Clone)]
struct SenderKey([u8; 16]);

/// Without the cipher, no key of a sender can exist.
#[cfg(not(feature = "domain-key"))]
#[derive(Clone)]
struct SenderKey(std::convert::Infallible);

#[cfg(not(feature = "domain-key"))]
impl SenderKey {
    fn seal(&self, _: u64, _: &[u8], _: &mut [u8]) -> [u8; SEAL_TAG] {
        match self.0 {}
    }

    fn open(&self, _: u64, _: &[u8], _: &mut [u8], _: &[u8; SEAL_TAG]) -> bool {
        match self.0 {}
    }
}

#[cfg(feature = "domain-key")]
impl SenderKey {
    /// Encrypts `body` where it lies, authenticating `head` with it; returns the tag.
    fn seal(&self, counter: u64, head: &[u8], body: &mut [u8]) -> [u8; SEAL_TAG] {
        Aegis128L::<SEAL_TAG>::new(&self.0, &nonce(counter)).encrypt_in_place(body, head)
    }

    /// Checks `tag` over `head` and `body`, then decrypts `body` where it lies.
    fn open(&self, counter: u64, head: &[u8], body: &mut [u8], tag: &[u8; SEAL_TAG]) -> bool {
        Aegis128L::<SEAL_TAG>::new(&self.0, &nonce(counter))
            .decrypt_in_place(body, tag, head)
            .is_ok()
    }
}

impl std::fmt::Debug for DomainKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DomainKey(…)")
    }
}

/// The 128-bit nonce of a datagram: its counter (unique under the sender's key of the epoch).
#[cfg(feature = "domain-key")]
fn nonce(counter: u64) -> [u8; 16] {
    let mut n = [0u8; 16];
    n[..8].copy_from_slice(&counter.to_le_bytes());
    n
}

/// Seals the datagrams of one sending socket.
pub struct Sealer {
    id: u64,
    domain: DomainKey,
    key: SenderKey,
    counter: u64,
}

// Without the cipher these are never reached (no Sealer or Opener can be made).
#[cfg_attr(not(feature = "domain-key"), allow(unreachable_code, unused_variables))]
impl Sealer {
    /// A sealer with a fresh random sender id.
    pub fn new(key: &DomainKey) -> Result<Sealer, Error> {
        available()?;
        let id = super::ids::new_id()?;
        Ok(Sealer {
            id,
            domain: key.clone(),
            key: key.sender_key(id, 0),
            counter: 0,
        })
    }

    /// Appends `plain` sealed to `out`.
    pub fn seal_into(&mut self, plain: &[u8], out: &mut Vec<u8>) {
        let counter = self.next_counter();
        let start = out.len();
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.push(VERSION);
        out.push(KIND_SEALED);
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&counter.to_le_bytes());
        out.extend_from_slice(plain);
        let (head, body) = out[start..].split_at_mut(SEAL_HEADER);
        let tag = self.key.seal(counter, head, body);
        out.extend_from_slice(&tag);
    }

    /// Seals, where it lies, a datagram written with [`SEAL_HEADER`] free bytes before it and
    /// [`SEAL_TAG`] after it (no copy).
    pub fn seal_in_place(&mut self, datagram: &mut [u8]) {
        assert!(datagram.len() >= SEAL_OVERHEAD, "no room to seal in");
        let counter = self.next_counter();
        datagram[..2].copy_from_slice(&MAGIC.to_le_bytes());
        datagram[2] = VERSION;
        datagram[3] = KIND_SEALED;
        datagram[4..12].copy_from_slice(&self.id.to_le_bytes());
        datagram[12..20].copy_from_slice(&counter.to_le_bytes());
        let (head, rest) = datagram.split_at_mut(SEAL_HEADER);
        let (body, tag_room) = rest.split_at_mut(rest.len() - SEAL_TAG);
        let tag = self.key.seal(counter, head, body);
        tag_room.copy_from_slice(&tag);
    }

    /// Seals, where they lie, datagrams of `segment` bytes back to back (the last may be
    /// shorter), each written with room around it as [`Sealer::seal_in_place`] needs.
    pub fn seal_segments(&mut self, data: &mut [u8], segment: usize) {
        for d in data.chunks_mut(segment.max(1)) {
            self.seal_in_place(d);
        }
    }

    fn next_counter(&mut self) -> u64 {
        let counter = self.counter;
        self.counter += 1;
        if counter > 0 && counter.trailing_zeros() >= EPOCH_BITS {
            self.key = self.domain.sender_key(self.id, epoch(counter));
        }
        counter
    }
}

struct SenderState {
    /// The key of the newest epoch heard, and of one other (for datagrams reordered across a
    /// change of key).
    key: (u64, SenderKey),
    previous: Option<(u64, SenderKey)>,
    highest: u64,
    /// Bit `i` set: counter `highest - i` was accepted.
    seen: [u64; (REPLAY_WINDOW / 64) as usize],
    last_used: u64,
}

impl SenderState {
    /// Whether `counter` is new (not seen, not behind the window).
    fn fresh(&self, counter: u64) -> bool {
        if counter > self.highest {
            return true;
        }
        let back = self.highest - counter;
        back < REPLAY_WINDOW && self.seen[(back / 64) as usize] & (1 << (back % 64)) == 0
    }

    fn accept(&mut self, counter: u64) {
        if counter > self.highest {
            let shift = counter - self.highest;
            if shift >= REPLAY_WINDOW {
                self.seen = [0; (REPLAY_WINDOW / 64) as usize];
            } else {
                // Move the window by `shift` bits: bit i becomes bit i + shift.
                let (words, bits) = ((shift / 64) as usize, (shift % 64) as u32);
                let old = self.seen;
                for (i, w) in self.seen.iter_mut().enumerate() {
                    let from = i.checked_sub(words);
                    let hi = from.map_or(0, |j| old[j] << bits);
                    let lo = match (from.and_then(|j| j.checked_sub(1)), bits) {
                        (Some(j), b) if b > 0 => old[j] >> (64 - b),
                        _ => 0,
                    };
                    *w = hi | lo;
                }
            }
            self.highest = counter;
        }
        let back = self.highest - counter;
        self.seen[(back / 64) as usize] |= 1 << (back % 64);
    }
}

/// Opens sealed datagrams: authenticates, decrypts, refuses replays.
pub struct Opener {
    key: DomainKey,
    senders: IdMap<SenderState>,
    /// Senders in order of first acceptance, to evict the least recently heard.
    order: VecDeque<u64>,
    uses: u64,
}

// Without the cipher these are never reached (no Sealer or Opener can be made).
#[cfg_attr(not(feature = "domain-key"), allow(unreachable_code, unused_variables))]
impl Opener {
    /// Fails only in a build without the `domain-key` feature.
    pub fn new(key: &DomainKey) -> Result<Opener, Error> {
        available()?;
        Ok(Opener {
            key: key.clone(),
            senders: id_map(),
            order: VecDeque::new(),
            uses: 0,
        })
    }

    /// Senders remembered (at most [`MAX_SENDERS`]).
    #[cfg(any(test, feature = "internals"))]
    pub fn senders(&self) -> usize {
        self.senders.len()
    }

    /// Opens `datagram` into `plain` (cleared first). A datagram that is not sealed, does not
    /// authenticate, or was seen before is refused with the reason to count.
    pub fn open(&mut self, datagram: &[u8], plain: &mut Vec<u8>) -> Result<(), Refusal> {
        plain.clear();
        plain.extend_from_slice(datagram);
        let r = self.open_in_place(plain)?;
        plain.truncate(r.end);
        plain.drain(..r.start);
        Ok(())
    }

    /// Opens `datagram` where it lies (no copy): returns where in it the plain datagram is.
    pub fn open_in_place(
        &mut self,
        datagram: &mut [u8],
    ) -> Result<std::ops::Range<usize>, Refusal> {
        if datagram.len() < SEAL_OVERHEAD
            || datagram[..2] != MAGIC.to_le_bytes()
            || datagram[2] != VERSION
            || datagram[3] != KIND_SEALED
        {
            return Err(Refusal::Unauthenticated);
        }
        let sender = u64::from_le_bytes(datagram[4..12].try_into().expect("8 bytes"));
        let counter = u64::from_le_bytes(datagram[12..20].try_into().expect("8 bytes"));
        if let Some(s) = self.senders.get(&sender) {
            if !s.fresh(counter) {
                return Err(Refusal::Stale);
            }
        }
        let (head, rest) = datagram.split_at_mut(SEAL_HEADER);
        let (body, tag) = rest.split_at_mut(rest.len() - SEAL_TAG);
        let tag: &[u8; SEAL_TAG] = (&*tag).try_into().expect("SEAL_TAG bytes");
        let e = epoch(counter);
        let known = self.senders.get(&sender).and_then(|s| {
            [Some(&s.key), s.previous.as_ref()]
                .into_iter()
                .flatten()
                .find(|k| k.0 == e)
                .map(|k| &k.1)
        });
        let len = body.len();
        let opened = match known {
            Some(key) => key.open(counter, head, body, tag),
            None => {
                // A sender (or an epoch of it) not heard before: its key is derived, and kept
                // only if the datagram authenticates.
                let key = self.key.sender_key(sender, e);
                let ok = key.open(counter, head, body, tag);
                if ok {
                    self.remember(sender, e, key);
                }
                ok
            }
        };
        if !opened {
            return Err(Refusal::Unauthenticated);
        }
        self.uses += 1;
        let s = self.senders.get_mut(&sender).expect("remembered above");
        s.accept(counter);
        s.last_used = self.uses;
        Ok(SEAL_HEADER..SEAL_HEADER + len)
    }

    fn remember(&mut self, sender: u64, epoch: u64, key: SenderKey) {
        if let Some(s) = self.senders.get_mut(&sender) {
            // Another epoch of a known sender: the newest key stays current.
            if epoch > s.key.0 {
                s.previous = Some(std::mem::replace(&mut s.key, (epoch, key)));
            } else {
                s.previous = Some((epoch, key));
            }
            return;
        }
        if self.senders.len() >= MAX_SENDERS {
            // The least recently heard of the oldest few goes.
            let victim = self
                .order
                .iter()
                .take(16)
                .copied()
                .min_by_key(|id| self.senders.get(id).map_or(0, |s| s.last_used));
            if let Some(v) = victim {
                self.senders.remove(&v);
                self.order.retain(|id| *id != v);
            }
        }
        self.senders.insert(
            sender,
            SenderState {
                key: (epoch, key),
                previous: None,
                highest: 0,
                seen: [0; (REPLAY_WINDOW / 64) as usize],
                last_used: self.uses,
            },
        );
        self.order.push_back(sender);
    }
}

/// Whether a datagram is sealed (looks like one; only `Opener::open` can tell it is genuine).
pub fn is_sealed(datagram: &[u8]) -> bool {
    datagram.len() >= SEAL_OVERHEAD
        && datagram[..2] == MAGIC.to_le_bytes()
        && datagram[2] == VERSION
        && datagram[3] == KIND_SEALED
}

#[cfg(all(test, feature = "domain-key"))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(b: u8) -> DomainKey {
        DomainKey::from_bytes([b; 32])
    }

    #[test]
    fn tags_are_per_key_and_purpose() {
        let t = key(1).tag("agent", b"challenge").unwrap();
        assert!(key(1).verify_tag("agent", b"challenge", &t));
        assert!(!key(2).verify_tag("agent", b"challenge", &t));
        assert!(!key(1).verify_tag("other", b"challenge", &t));
        assert!(!key(1).verify_tag("agent", b"challengf", &t));
        assert!(!key(1).verify_tag("agent", b"challenge", &t[..31]));
        assert_ne!(
            key(1).tag("a", b"m").unwrap(),
            key(1).tag("b", b"m").unwrap()
        );
    }

    #[test]
    fn sealed_datagrams_open_with_the_key_only() {
        let mut tx = Sealer::new(&key(1)).unwrap();
        let mut rx = Opener::new(&key(1)).unwrap();
        let mut other = Opener::new(&key(2)).unwrap();
        let mut d = Vec::new();
        tx.seal_into(b"hello", &mut d);
        assert_eq!(d.len(), 5 + SEAL_OVERHEAD);
        assert!(!d.windows(5).any(|w| w == b"hello"), "encrypted");
        let mut plain = Vec::new();
        assert_eq!(other.open(&d, &mut plain), Err(Refusal::Unauthenticated));
        assert_eq!(other.senders(), 0, "a failed sender leaves no state");
        rx.open(&d, &mut plain).unwrap();
        assert_eq!(plain, b"hello");
    }

    #[test]
    fn sealing_in_place_matches_sealing_a_copy() {
        let mut tx = Sealer::new(&key(1)).unwrap();
        let mut rx = Opener::new(&key(1)).unwrap();
        let mut batch = Vec::new();
        for i in 0..3u8 {
            batch.extend_from_slice(&[0; SEAL_HEADER]);
            batch.extend(std::iter::repeat(i).take(if i == 2 { 7 } else { 100 }));
            batch.extend_from_slice(&[0; SEAL_TAG]);
        }
        tx.seal_segments(&mut batch, 100 + SEAL_OVERHEAD);
        let mut plain = Vec::new();
        for (i, d) in batch.chunks(100 + SEAL_OVERHEAD).enumerate() {
            rx.open(d, &mut plain).unwrap();
            assert!(plain.iter().all(|&b| b == i as u8), "datagram {i}");
        }
        assert_eq!(plain.len(), 7);
    }

    #[test]
    fn every_changed_byte_fails_and_replays_are_refused() {
        let mut tx = Sealer::new(&key(1)).unwrap();
        let mut rx = Opener::new(&key(1)).unwrap();
        let mut d = Vec::new();
        tx.seal_into(&[7u8; 100], &mut d);
        let mut plain = Vec::new();
        for i in 0..d.len() {
            let mut bad = d.clone();
            bad[i] ^= 0x01;
            assert!(rx.open(&bad, &mut plain).is_err(), "byte {i} changed");
        }
        rx.open(&d, &mut plain).unwrap();
        assert_eq!(rx.open(&d, &mut plain), Err(Refusal::Stale), "a replay");
    }

    #[test]
    fn the_replay_window_takes_reordering_and_refuses_what_fell_behind() {
        let mut tx = Sealer::new(&key(3)).unwrap();
        let mut rx = Opener::new(&key(3)).unwrap();
        let sealed: Vec<Vec<u8>> = (0..3000u32)
            .map(|i| {
                let mut d = Vec::new();
                tx.seal_into(&i.to_le_bytes(), &mut d);
                d
            })
            .collect();
        let mut plain = Vec::new();
        rx.open(&sealed[2000], &mut plain).unwrap();
        rx.open(&sealed[1500], &mut plain).unwrap();
        assert_eq!(rx.open(&sealed[1500], &mut plain), Err(Refusal::Stale));
        assert_eq!(
            rx.open(&sealed[2000 - REPLAY_WINDOW as usize], &mut plain),
            Err(Refusal::Stale),
            "behind the window"
        );
        rx.open(&sealed[2999], &mut plain).unwrap();
        rx.open(&sealed[2990], &mut plain).unwrap();
        assert_eq!(rx.open(&sealed[2000], &mut plain), Err(Refusal::Stale));
    }

    #[test]
    fn forged_senders_leave_nothing_and_genuine_ones_are_bounded() {
        let mut rx = Opener::new(&key(4)).unwrap();
        let mut plain = Vec::new();
        for id in 0..5000u64 {
            let mut d = vec![0u8; 100];
            d[..2].copy_from_slice(&MAGIC.to_le_bytes());
            d[2] = VERSION;
            d[3] = KIND_SEALED;
            d[4..12].copy_from_slice(&id.to_le_bytes());
            assert_eq!(rx.open(&d, &mut plain), Err(Refusal::Unauthenticated));
        }
        assert_eq!(rx.senders(), 0);
        for _ in 0..MAX_SENDERS + 10 {
            let mut tx = Sealer::new(&key(4)).unwrap();
            let mut d = Vec::new();
            tx.seal_into(b"x", &mut d);
            rx.open(&d, &mut plain).unwrap();
        }
        assert_eq!(rx.senders(), MAX_SENDERS);
    }

    #[test]
    fn the_key_changes_every_epoch_and_reordering_across_the_change_still_opens() {
        let mut tx = Sealer::new(&key(8)).unwrap();
        let mut rx = Opener::new(&key(8)).unwrap();
        let mut plain = Vec::new();
        let seal = |tx: &mut Sealer| {
            let mut d = Vec::new();
            tx.seal_into(b"x", &mut d);
            d
        };
        rx.open(&seal(&mut tx), &mut plain).unwrap();
        // To the end of epoch 0.
        tx.counter = (1 << EPOCH_BITS) - 2;
        let last_of_0 = seal(&mut tx);
        let end_of_0 = seal(&mut tx);
        let first_of_1 = seal(&mut tx);
        // Sealed under epoch 1's key: epoch 0's cannot open it.
        let k0 = key(8).sender_key(tx.id, 0);
        let (head, rest) = first_of_1.split_at(SEAL_HEADER);
        let (body, tag) = rest.split_at(rest.len() - SEAL_TAG);
        let mut body = body.to_vec();
        assert!(!k0.open(1 << EPOCH_BITS, head, &mut body, tag.try_into().unwrap()));
        rx.open(&last_of_0, &mut plain).unwrap();
        rx.open(&first_of_1, &mut plain).unwrap();
        rx.open(&end_of_0, &mut plain).unwrap();
        assert_eq!(plain, b"x");
        assert_eq!(rx.open(&first_of_1, &mut plain), Err(Refusal::Stale));
    }

    #[test]
    fn key_files_hold_raw_bytes_or_hex() {
        assert_eq!(DomainKey::parse(&[9u8; 32]), Some(key(9)));
        let hex = "0a".repeat(32) + "\n";
        assert_eq!(DomainKey::parse(hex.as_bytes()), Some(key(10)));
        assert_eq!(DomainKey::parse(b"short"), None);
        assert_eq!(DomainKey::parse("zz".repeat(32).as_bytes()), None);
        assert_eq!(format!("{:?}", key(1)), "DomainKey(…)");
    }

    /// A key file is read only if it is a regular file, and no further than a key file can
    /// reach: a device that never ends or a FIFO nobody writes is an error at once.
    #[test]
    fn only_a_regular_file_of_key_size_is_read_as_a_key() {
        let dir = std::env::temp_dir().join(format!("ferry-key-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.key");
        std::fs::write(&good, "0b".repeat(32) + "\n").unwrap();
        assert_eq!(DomainKey::from_file(&good).unwrap(), key(11));
        let long = dir.join("long.key");
        std::fs::write(&long, "0b".repeat(32) + &" ".repeat(1 << 20)).unwrap();
        assert!(matches!(
            DomainKey::from_file(&long),
            Err(Error::InvalidConfig(_))
        ));
        let fifo = dir.join("fifo.key");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for path in [Path::new("/dev/zero"), &fifo, &dir] {
            let err = DomainKey::from_file(path).unwrap_err().to_string();
            assert!(
                err.contains("not a regular file"),
                "{}: {err}",
                path.display()
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    proptest! {
        /// Any bytes at all: open returns an error or the plain text of a genuine datagram, and
        /// never panics.
        #[test]
        fn open_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut rx = Opener::new(&key(5)).unwrap();
            let mut plain = Vec::new();
            prop_assert!(rx.open(&bytes, &mut plain).is_err());
        }

        /// The replay window agrees with a set of the counters seen, within the window.
        #[test]
        fn the_replay_window_matches_a_model(counters in proptest::collection::vec(0u64..5000, 1..400)) {
            let mut s = SenderState {
                key: (0, key(6).sender_key(1, 0)),
                previous: None,
                highest: 0,
                seen: [0; (REPLAY_WINDOW / 64) as usize],
                last_used: 0,
            };
            let mut seen = std::collections::BTreeSet::new();
            let mut highest = 0u64;
            for c in counters {
                let model = c > highest || (highest - c < REPLAY_WINDOW && !seen.contains(&c));
                prop_assert_eq!(s.fresh(c), model, "counter {} after {:?}", c, highest);
                if model {
                    s.accept(c);
                    seen.insert(c);
                    highest = highest.max(c);
                }
            }
        }
    }
}
