//! The Python front of ferry: the extension module `ferry._ferry`, which the pure-Python package
//! `ferry` (python/ferry/) re-exports.
//!
//! Zero copy both ways: a received `Sample` and a publisher's `Loan` are buffer objects over the
//! ring itself (lend.rs says how their lifetimes stay sound). Waits release the GIL, in slices
//! of at most 50 ms between which signals are looked at, so Ctrl-C interrupts a blocked `recv`.
//! Services (service.rs) copy requests and responses out of the ring into bytes.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

use pyo3::prelude::*;

mod admin;
mod args;
mod closable;
mod errors;
mod lend;
mod node;
mod publisher;
mod service;
mod subscriber;
mod typed;
mod waitset;

/// Adds each class to the module `m`.
macro_rules! add_classes {
    ($m:ident: $($class:path),* $(,)?) => {
        $($m.add_class::<$class>()?;)*
    };
}

/// The GIL is kept (`gil_used`): the module is not tested on free-threaded Python.
#[pymodule(gil_used = true)]
fn _ferry(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    add_classes!(m: node::Node, node::Qos, typed::TopicType, publisher::Publisher, publisher::Loan,
        subscriber::Subscriber, subscriber::Sample, service::Client, service::Server,
        service::Request, service::ReplyTo, waitset::WaitSet);
    m.add_function(wrap_pyfunction!(admin::topics, m)?)?;
    m.add_function(wrap_pyfunction!(admin::stats, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("WAIT_SLICE_S", args::WAIT_SLICE.as_secs_f64())?;
    Ok(())
}
