//! `iceoryx2-rr`: iceoryx2 0.10's request-response over shared memory, set beside ferry's
//! services. One service `<base>/rr` of `[u8]` requests and `[u8]` responses; the main process
//! is its client, the echo its server.
//!
//! A round trip: the client loans a request (`loan_slice_uninit`), fills it with memset and sends
//! it, then polls the pending response's `receive()` in a spin loop and checks every byte of the
//! response in place; the server polls `receive()` in a spin loop, checks every byte of the
//! request in place and answers it with a loaned response of the same size, filled with memset.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use iceoryx2::active_request::ActiveRequest;
use iceoryx2::pending_response::PendingResponse;
use iceoryx2::port::client::Client;
use iceoryx2::port::server::Server;
use iceoryx2::prelude::*;
use iceoryx2::service::port_factory::request_response::PortFactory as RrPortFactory;

use crate::{check_payload, pin_to, spin_for, Error, Kid, Plan, MEET_TIMEOUT};

type Factory = RrPortFactory<ipc::Service, [u8], (), [u8], ()>;
/// A request sent, awaiting its response.
type Pending = PendingResponse<ipc::Service, [u8], (), [u8], ()>;
/// A request received, to be answered.
type Active = ActiveRequest<ipc::Service, [u8], (), [u8], ()>;

/// The service of one run, `[u8]` both ways.
fn service(node: &Node<ipc::Service>, base: &str) -> Result<Factory, Error> {
    let name: ServiceName = format!("{base}/rr").as_str().try_into()?;
    Ok(node
        .service_builder(&name)
        .request_response::<[u8], [u8]>()
        .max_clients(1)
        .max_servers(1)
        .open_or_create()?)
}

/// Waits until `met` holds, at most `MEET_TIMEOUT`.
fn meet(met: impl Fn() -> bool) -> Result<(), Error> {
    let start = Instant::now();
    while !met() {
        if start.elapsed() > MEET_TIMEOUT {
            return Err("the two iceoryx2 processes did not meet within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Fills a loaned slice with `value` (a memset, as the lab fills ferry's loans).
fn fill(bytes: &mut [std::mem::MaybeUninit<u8>], value: u8) {
    // SAFETY: `bytes` is the loan's memory, writable for `bytes.len()` bytes; write_bytes fills
    // all of them.
    unsafe { std::ptr::write_bytes(bytes.as_mut_ptr().cast::<u8>(), value, bytes.len()) };
}

/// Whether `payload` is `size` bytes of `value`; an error naming what came otherwise.
fn check(payload: &[u8], size: usize, value: u8) -> Result<(), Error> {
    check_payload("message", payload, size, value)
}

/// The client's end: its port, and the request awaiting its response.
struct ClientEnd {
    client: Client<ipc::Service, [u8], (), [u8], ()>,
    pending: RefCell<Option<Pending>>,
}

impl ClientEnd {
    /// Sends a request of `size` bytes of `value`, written into a loan.
    fn send(&self, size: usize, value: u8) -> Result<(), Error> {
        let mut request = self.client.loan_slice_uninit(size)?;
        fill(request.payload_mut(), value);
        // SAFETY: every byte was written just above.
        let request = unsafe { request.assume_init() };
        *self.pending.borrow_mut() = Some(request.send()?);
        Ok(())
    }

    /// Spins for the response to the request sent last and checks that it is `size` bytes of
    /// `value`.
    fn recv_check(&self, size: usize, value: u8) -> Result<(), Error> {
        // Dropped at the end: the request is no longer active.
        let pending = self
            .pending
            .borrow_mut()
            .take()
            .ok_or("no request awaits a response")?;
        let response = spin_for("response", || Ok(pending.receive()?))?;
        check(response.payload(), size, value)
    }
}

/// The main side of `iceoryx2-rr`: the client.
pub fn main_side(plan: &Plan) -> Result<Vec<Vec<u64>>, Error> {
    let base = crate::run_name();
    let max_size = plan.sizes.iter().copied().max().unwrap_or(1);
    let node = NodeBuilder::new().create::<ipc::Service>()?;
    let factory = service(&node, &base)?;
    let end = ClientEnd {
        client: factory
            .client_builder()
            .initial_max_slice_len(max_size)
            .create()?,
        pending: RefCell::new(None),
    };
    let mut kid = Kid(crate::echo_command("iceoryx2-rr-echo", plan)
        .args(["--service", &base])
        .spawn()?);
    if let Some((main, _)) = plan.pin {
        pin_to(main)?;
    }
    meet(|| factory.dynamic_config().number_of_servers() >= 1)?;
    let rows = crate::round_trips(
        plan,
        |size, value| end.send(size, value),
        |size, value| end.recv_check(size, value),
    )?;
    // Leaving is the echo's signal to end (it waits for it, so its last response stays
    // readable).
    drop(end);
    drop(factory);
    drop(node);
    crate::wait_for(&mut kid)?;
    Ok(rows)
}

/// The server's end: its port, and the request it answers next.
struct ServerEnd {
    server: Server<ipc::Service, [u8], (), [u8], ()>,
    active: RefCell<Option<Active>>,
}

impl ServerEnd {
    /// Spins for the next request and checks that it is `size` bytes of `value`.
    fn recv_check(&self, size: usize, value: u8) -> Result<(), Error> {
        let request = spin_for("request", || Ok(self.server.receive()?))?;
        check(request.payload(), size, value)?;
        *self.active.borrow_mut() = Some(request);
        Ok(())
    }

    /// Answers the request received last with `size` bytes of `value`, written into a loan.
    fn send(&self, size: usize, value: u8) -> Result<(), Error> {
        // Dropped at the end: the request is answered.
        let request = self
            .active
            .borrow_mut()
            .take()
            .ok_or("no request to answer")?;
        let mut response = request.loan_slice_uninit(size)?;
        fill(response.payload_mut(), value);
        // SAFETY: every byte was written just above.
        let response = unsafe { response.assume_init() };
        response.send()?;
        Ok(())
    }
}

/// The echo side of `iceoryx2-rr`: the server.
pub fn echo_side(plan: &Plan, base: &str) -> Result<(), Error> {
    if let Some((_, peer)) = plan.pin {
        pin_to(peer)?;
    }
    let max_size = plan.sizes.iter().copied().max().unwrap_or(1);
    let node = NodeBuilder::new().create::<ipc::Service>()?;
    let factory = service(&node, base)?;
    let end = ServerEnd {
        server: factory
            .server_builder()
            .initial_max_slice_len(max_size)
            .create()?,
        active: RefCell::new(None),
    };
    meet(|| factory.dynamic_config().number_of_clients() >= 1)?;
    crate::echo_round_trips(
        plan,
        |size, value| end.recv_check(size, value),
        |size, value| end.send(size, value),
    )?;
    // The last response stays readable until the client has taken it: wait for the client to
    // leave (it does after its last receive), then end.
    let start = Instant::now();
    while factory.dynamic_config().number_of_clients() > 0 && start.elapsed() < MEET_TIMEOUT {
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}
