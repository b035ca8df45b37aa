//! A bridge between ferry and Zenoh: the ferry topics of a domain as Zenoh keys
//! `ferry/<domain>/<topic>`, both ways. The `ferry-zenoh` binary runs it; see README.md.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod bridge;
pub mod keys;
/// Two sites on one machine (network namespaces): for the tests and the cost measurement.
#[doc(hidden)]
pub mod sites;
