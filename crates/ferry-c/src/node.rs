//! `ferry_node`: one participant with a name, in a domain.

use std::ffi::c_char;

use ferry::{Node, MAX_DOMAIN_NAME, MAX_NODE_NAME};

use crate::args::{c_str, free, handle, put};
use crate::qos::{ferry_qos, qos_arg};
use crate::status::{ferry_status, guard, Failure};

/// A node (opaque). Made by `ferry_node_new`, freed by `ferry_node_free`. Publishers,
/// subscribers, servers and clients made from it do not borrow it: the node may be freed before
/// them.
pub struct ferry_node {
    pub(crate) node: Node,
}

/// Makes a node named `name` (1 to 32 bytes of UTF-8). `domain` NULL: the domain and every
/// other setting come from the `FERRY_*` variables (`FERRY_DOMAIN`, else `default`); otherwise
/// the domain is `domain` and the rest still comes from the environment. On success `*out`
/// holds the node (free it with `ferry_node_free`); on failure, NULL.
///
/// # Safety
/// `name` and a non-NULL `domain` are NUL-terminated strings; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ferry_node_new(
    name: *const c_char,
    domain: *const c_char,
    out: *mut *mut ferry_node,
) -> ferry_status {
    guard("ferry_node_new", || {
        // SAFETY: the caller promises `out` is valid for a write (NULL is refused).
        unsafe { put("out", out, std::ptr::null_mut()) }?;
        // SAFETY: the caller passes a C string or NULL (refused).
        let name = unsafe { c_str("name", name, MAX_NODE_NAME) }?;
        let node = if domain.is_null() {
            Node::new(name)?
        } else {
            // SAFETY: as for `name`.
            let domain = unsafe { c_str("domain", domain, MAX_DOMAIN_NAME) }?;
            Node::with_domain(name, domain)?
        };
        let handle = Box::into_raw(Box::new(ferry_node { node }));
        // SAFETY: `out` is not NULL and the caller promises it is valid for a write.
        unsafe { put("out", out, handle) }
    })
}

/// The body of an endpoint's `_new`: clears `*out`, reads the node, the endpoint's name (`what`:
/// topic or service, at most `max_name` bytes) and its QoS (NULL: `ferry_qos_default()`), then
/// boxes what `make` builds of them into `*out` (the endpoint's `_free` frees it).
///
/// # Safety
/// `node` is NULL or a live node, `name` NULL or a NUL-terminated string, `qos` NULL or valid
/// for a read (its strings NULL or valid for the call), `out` NULL or valid for a write.
pub(crate) unsafe fn new_endpoint<E>(
    node: *const ferry_node,
    what: &str,
    name: *const c_char,
    max_name: usize,
    qos: *const ferry_qos,
    out: *mut *mut E,
    make: impl FnOnce(&Node, &str, ferry::Qos) -> Result<E, Failure>,
) -> Result<(), Failure> {
    // SAFETY: the caller promises `out` is valid for a write (NULL is refused).
    unsafe { put("out", out, std::ptr::null_mut()) }?;
    // SAFETY: the caller passes a live node or NULL (refused).
    let node = unsafe { handle("node", node) }?;
    // SAFETY: the caller passes a C string or NULL (refused).
    let name = unsafe { c_str(what, name, max_name) }?;
    // SAFETY: the caller passes NULL or a QoS valid for a read, its strings NULL or valid for the
    // call.
    let qos = unsafe { qos_arg(qos) }?;
    let handle = Box::into_raw(Box::new(make(&node.node, name, qos)?));
    // SAFETY: checked above to be valid for a write.
    unsafe { put("out", out, handle) }
}

/// Frees a node. NULL is allowed and does nothing (as `free(NULL)`).
///
/// # Safety
/// `node` is NULL or a node from `ferry_node_new` not freed yet.
#[no_mangle]
pub unsafe extern "C" fn ferry_node_free(node: *mut ferry_node) -> ferry_status {
    guard("ferry_node_free", || {
        // SAFETY: the caller gives back NULL or a pointer from Box::into_raw in ferry_node_new,
        // once.
        unsafe { free(node) };
        Ok(())
    })
}
