//! ferry's C API: `libferry_c.so` / `libferry_c.a` and `include/ferry.h` (generated from this
//! crate by cbindgen; `tests/header.rs` fails when the checked-in header differs), with a C++17
//! header over it, `include/ferry.hpp`.
//!
//! It wraps ferry's public Rust API only (`Node`, `Publisher`, `Loan`, `Subscriber`, `Sample`,
//! `Qos`, and the services' `Server`, `Request`, `Client`, `Response`), one call per Rust
//! operation:
//!
//! - Handles are opaque pointers: `ferry_node`, `ferry_publisher`, `ferry_subscriber`,
//!   `ferry_server`, `ferry_client` (made by `*_new`, freed by `*_free`, where NULL does
//!   nothing), and `ferry_loan`, `ferry_sample`, `ferry_request`, `ferry_response`, which live
//!   inside their endpoint (at most one each at a time, as Rust's borrows allow) and end with
//!   `ferry_loan_send` / `ferry_loan_discard` / `ferry_sample_release` /
//!   `ferry_request_respond` / `ferry_request_release` / `ferry_response_release`. While one is
//!   out, every other call on its endpoint, freeing included, is refused with
//!   `FERRY_INVALID_ARGUMENT`; ending it twice is refused the same way. No allocation is made
//!   per message (a server that answers later keeps the requests it released unanswered in a
//!   table: `server.rs`).
//! - Every operation returns a `ferry_status`; a failure's message is kept per thread
//!   (`ferry_last_error_message`). The accessors of a loan or sample (`ferry_loan_data`,
//!   `ferry_sample_len`, ...) return their value, NULL or 0 for a NULL or ended handle.
//! - NULL pointers, enum fields of `ferry_qos` that name nothing, and strings that are not UTF-8
//!   are `FERRY_INVALID_ARGUMENT`, never undefined behaviour; a panic inside ferry is caught at
//!   the boundary (`FERRY_PANIC`). What C can still get wrong: a dangling or foreign pointer, a
//!   publisher or subscriber used from two threads at once, a loan or sample used after its
//!   endpoint was freed.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
// The C names are the API: `ferry_node`, `FERRY_OK`.
#![allow(non_camel_case_types)]

// In the order include/ferry.h presents them (cbindgen follows the modules in this order).
mod status;

mod qos;

mod node;

mod publisher;

mod subscriber;

mod server;

mod client;

mod waitset;

mod args;

mod slot;

pub use client::{
    ferry_client, ferry_client_call, ferry_client_failed_request, ferry_client_free,
    ferry_client_has_server, ferry_client_new, ferry_client_pending, ferry_client_recv,
    ferry_client_send, ferry_client_wait_for_server, ferry_response, ferry_response_data,
    ferry_response_len, ferry_response_release, ferry_response_request_id,
};
pub use node::{ferry_node, ferry_node_free, ferry_node_new};
pub use publisher::{
    ferry_loan, ferry_loan_data, ferry_loan_discard, ferry_loan_len, ferry_loan_send,
    ferry_publisher, ferry_publisher_free, ferry_publisher_loan, ferry_publisher_max_message_size,
    ferry_publisher_new, ferry_publisher_send, ferry_publisher_subscriber_count,
};
pub use qos::{
    ferry_delivery, ferry_ip_version, ferry_qos, ferry_qos_default, ferry_transport, ferry_wait,
};
pub use server::{
    ferry_request, ferry_request_client, ferry_request_data, ferry_request_id, ferry_request_len,
    ferry_request_release, ferry_request_respond, ferry_server, ferry_server_free,
    ferry_server_new, ferry_server_recv, ferry_server_respond,
};
pub use status::{ferry_last_error_message, ferry_status, ferry_status_name};
pub use subscriber::{
    ferry_kept, ferry_kept_data, ferry_kept_len, ferry_kept_seq, ferry_sample, ferry_sample_data,
    ferry_sample_len, ferry_sample_release, ferry_sample_seq, ferry_sample_skipped,
    ferry_subscriber, ferry_subscriber_free, ferry_subscriber_keep, ferry_subscriber_let_go,
    ferry_subscriber_new, ferry_subscriber_publisher_count, ferry_subscriber_recv,
};
pub use waitset::{
    ferry_wait_item, ferry_wait_kind, ferry_waitset, ferry_waitset_free, ferry_waitset_new,
    ferry_waitset_wait,
};

// What the header promises about threads: a node may be used from several threads at once, and
// a publisher, subscriber, server or client may move to another thread (one thread at a time).
const _: () = {
    const fn shared_across_threads<T: Send + Sync>() {}
    const fn movable_across_threads<T: Send>() {}
    shared_across_threads::<ferry::Node>();
    movable_across_threads::<ferry::Publisher>();
    movable_across_threads::<ferry::Subscriber>();
    movable_across_threads::<ferry::Loan<'static>>();
    movable_across_threads::<ferry::Sample<'static>>();
    movable_across_threads::<ferry::Server>();
    movable_across_threads::<ferry::Request<'static>>();
    movable_across_threads::<ferry::Client>();
    movable_across_threads::<ferry::Response<'static>>();
};
