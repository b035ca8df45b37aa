//! Maps keyed by session and receiver ids (random 64-bit numbers chosen by each end), hashed
//! with one multiply instead of SipHash: they are looked up for every datagram. The ids come off
//! the network, so the hash is keyed with a per-process secret; a sender that wanted to crowd one
//! bucket would have to guess it.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// A 64-bit id for sessions and receivers (and a sealer's nonce prefix) from the OS's random
/// source: an off-path sender cannot guess it, so it cannot forge the control frames that carry
/// it.
pub(crate) fn new_id() -> Result<u64, crate::Error> {
    crate::sys::random_u64().map_err(|e| crate::Error::io("read the OS's random source", e))
}

/// A `HashMap` keyed by a 64-bit id.
pub(crate) type IdMap<V> = HashMap<u64, V, IdHash>;

pub(crate) fn id_map<V>() -> IdMap<V> {
    HashMap::with_hasher(IdHash::default())
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct IdHash {
    key: u64,
}

impl Default for IdHash {
    fn default() -> IdHash {
        static KEY: OnceLock<u64> = OnceLock::new();
        let key =
            *KEY.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0u64));
        IdHash { key }
    }
}

impl BuildHasher for IdHash {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher {
            key: self.key,
            h: 0,
        }
    }
}

#[derive(Debug)]
pub(crate) struct IdHasher {
    key: u64,
    h: u64,
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Not used by u64 keys; any other key still hashes correctly, byte by byte.
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }

    fn write_u64(&mut self, x: u64) {
        // A folded multiply (as in wyhash): the 128-bit product of the keyed value and an odd
        // constant, its halves xored, so that every input bit reaches the low bits that
        // hashbrown uses for the bucket.
        let m = ((self.h ^ x ^ self.key) as u128).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.h = (m as u64) ^ ((m >> 64) as u64);
    }

    fn finish(&self) -> u64 {
        self.h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_behaves_as_a_map() {
        let mut m = id_map();
        for i in 0..10_000u64 {
            m.insert(i.wrapping_mul(0x9E37_79B9_7F4A_7C15), i);
        }
        assert_eq!(m.len(), 10_000);
        for i in 0..10_000u64 {
            assert_eq!(m.get(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15)), Some(&i));
        }
        assert!(m.remove(&1).is_none());
    }

    #[test]
    fn ids_spread_over_the_low_bits_whatever_the_key() {
        // Sequential ids, and ids that differ only in their high bits, fill most of 1024
        // buckets (the low bits hashbrown uses), for many keys.
        for k in 0..200u64 {
            let b = IdHash {
                key: k.wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ (k << 7),
            };
            for shift in [0, 20, 48, 54] {
                let buckets: std::collections::HashSet<u64> = (0..1024u64)
                    .map(|i| b.hash_one(i << shift) & 1023)
                    .collect();
                assert!(
                    buckets.len() > 512,
                    "key {k} shift {shift}: {}",
                    buckets.len()
                );
            }
        }
    }
}
