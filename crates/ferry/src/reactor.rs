//! A runtime-free `async` receive: one thread of the process (started on first use) waits on the
//! descriptors of armed wait sets (`WaitSet::arm`) and wakes the futures that wait on them, so a
//! `Subscriber::recv_async` future works in any executor (tokio, async-std, smol, a hand-made
//! `block_on`) without depending on one.
//!
//! A registration is one-shot: its waker is woken once, when its descriptor becomes readable or
//! its time comes, and it is forgotten; the future then looks, and registers again if it must
//! wait more. A future dropped before that takes its registration back first.
//!
//! (It sits above the node and the wait set, which it uses; neither uses it.)

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Mutex, OnceLock};
use std::task::Waker;
use std::time::{Duration, Instant};

use crate::waitset::{Messages, WaitSet};
use crate::{RecvError, Sample, Subscriber};

struct Reactor {
    epoll: OwnedFd,
    /// An eventfd in `epoll` that tells the thread its deadlines changed.
    control: OwnedFd,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    waiting: HashMap<u64, (RawFd, Waker, Option<Instant>)>,
}

/// The id `control` carries in epoll (registrations count from 1).
const CONTROL: u64 = 0;

impl Subscriber {
    /// Waits for the next message in any async runtime (tokio, async-std, smol, a `block_on` of
    /// your own): ferry needs none. While the future waits, one thread of the process (started
    /// on first use) watches the subscriber's wake-ups, as a wait set does, and wakes the task:
    /// the executor's threads are free meanwhile. `timeout`: `None` waits as long as it takes;
    /// `Ok(None)` when the time ran out. Publisher events and missed deadlines do not end the
    /// wait (take them with `try_event`). Dropping the future cancels the wait.
    pub async fn recv_async(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Option<Sample<'_>>, RecvError> {
        use std::os::fd::AsRawFd;
        let end = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut set = PooledSet::take();
        loop {
            if let Some(side) = self.ready(None, false)? {
                return Ok(Some(self.sample(side)));
            }
            if end.is_some_and(|e| Instant::now() >= e) {
                return Ok(None);
            }
            let mut messages = Messages(&mut *self);
            let armed = set
                .0
                .as_mut()
                .expect("held until dropped")
                .arm(vec![&mut messages])
                .map_err(|e| RecvError::Wait(e.to_string()))?;
            let Some(fd) = armed.fd().map(|fd| fd.as_raw_fd()) else {
                continue;
            };
            let until = match (armed.until(), end) {
                (Some(u), Some(e)) => Some(u.min(e)),
                (u, e) => u.or(e),
            };
            Readable::new(fd, until).await.map_err(RecvError::Wait)?;
            drop(armed);
        }
    }
}

/// Wait sets of finished waits, kept for the next: a set's helper thread (which watches
/// shared-memory doorbells) then serves wait after wait instead of being started and joined
/// for each. At most `MAX_IDLE_SETS` are kept.
static IDLE_SETS: Mutex<Vec<WaitSet>> = Mutex::new(Vec::new());
const MAX_IDLE_SETS: usize = 16;

/// A wait set taken from `IDLE_SETS` (or new), given back when dropped (also when a waiting
/// future is dropped: its arming, declared after it, is dropped first and leaves it clean).
struct PooledSet(Option<WaitSet>);

impl PooledSet {
    fn take() -> PooledSet {
        let idle = IDLE_SETS.lock().unwrap_or_else(|e| e.into_inner()).pop();
        PooledSet(Some(idle.unwrap_or_default()))
    }
}

impl Drop for PooledSet {
    fn drop(&mut self) {
        if let Some(set) = self.0.take() {
            let mut idle = IDLE_SETS.lock().unwrap_or_else(|e| e.into_inner());
            if idle.len() < MAX_IDLE_SETS {
                idle.push(set);
            }
        }
    }
}

static REACTOR: OnceLock<Result<Reactor, String>> = OnceLock::new();
/// The thread, started once the reactor is in place (or why it could not start).
static THREAD: OnceLock<Result<(), String>> = OnceLock::new();

fn reactor() -> Result<&'static Reactor, String> {
    let r = REACTOR
        .get_or_init(|| make().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(Clone::clone)?;
    THREAD
        .get_or_init(|| {
            std::thread::Builder::new()
                .name("ferry-async".into())
                .spawn(move || run(r))
                .map(drop)
                .map_err(|e| e.to_string())
        })
        .clone()?;
    Ok(r)
}

fn make() -> std::io::Result<Reactor> {
    // SAFETY: epoll_create1(2) and eventfd(2) take plain flags; a non-negative result is a new
    // descriptor owned here alone.
    let (epoll, control) = unsafe {
        let e = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        if e < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let epoll = OwnedFd::from_raw_fd(e);
        let c = libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK);
        if c < 0 {
            return Err(std::io::Error::last_os_error());
        }
        (epoll, OwnedFd::from_raw_fd(c))
    };
    ctl(
        &epoll,
        libc::EPOLL_CTL_ADD,
        control.as_raw_fd(),
        CONTROL,
        false,
    )?;
    Ok(Reactor {
        epoll,
        control,
        state: Mutex::new(State::default()),
    })
}

fn ctl(epoll: &OwnedFd, op: i32, fd: RawFd, id: u64, oneshot: bool) -> std::io::Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32
            | if oneshot {
                libc::EPOLLONESHOT as u32
            } else {
                0
            },
        u64: id,
    };
    // SAFETY: `epoll` is open; `fd` is the caller's open descriptor (or, for a removal, may
    // have been closed: then the call fails harmlessly); `ev` lives for the call.
    if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), op, fd, &mut ev) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Wakes `waker` once, when `fd` becomes readable or at `until`. Returns the registration's id,
/// for `forget`.
pub(crate) fn register(fd: RawFd, until: Option<Instant>, waker: Waker) -> Result<u64, String> {
    let r = reactor()?;
    let mut st = r.state.lock().unwrap_or_else(|e| e.into_inner());
    st.next_id += 1;
    let id = st.next_id;
    ctl(&r.epoll, libc::EPOLL_CTL_ADD, fd, id, true).map_err(|e| format!("epoll_ctl: {e}"))?;
    st.waiting.insert(id, (fd, waker, until));
    drop(st);
    if until.is_some() {
        kick(r);
    }
    Ok(id)
}

/// Takes a registration back (its descriptor is about to close); nothing if it was woken.
pub(crate) fn forget(id: u64) {
    let Ok(r) = reactor() else { return };
    let mut st = r.state.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((fd, _, _)) = st.waiting.remove(&id) {
        let _ = ctl(&r.epoll, libc::EPOLL_CTL_DEL, fd, id, false);
    }
}

fn kick(r: &Reactor) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 bytes to the reactor's own eventfd.
    let _ = unsafe { libc::write(r.control.as_raw_fd(), one.as_ptr().cast(), 8) };
}

fn run(r: &Reactor) -> ! {
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
    loop {
        let timeout_ms = {
            let st = r.state.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            st.waiting
                .values()
                .filter_map(|w| w.2)
                .map(|u| u.saturating_duration_since(now))
                .min()
                .map_or(-1, |d| d.as_millis().min(60_000) as i32 + 1)
        };
        // SAFETY: `events` holds 64 entries for the kernel to fill; the epoll descriptor is open.
        let n =
            unsafe { libc::epoll_wait(r.epoll.as_raw_fd(), events.as_mut_ptr(), 64, timeout_ms) };
        let mut wake = Vec::new();
        let mut st = r.state.lock().unwrap_or_else(|e| e.into_inner());
        for ev in events.iter().take(n.max(0) as usize) {
            // (A copy: the kernel's struct is packed.)
            let id = ev.u64;
            if id == CONTROL {
                let mut buf = [0u8; 8];
                // SAFETY: reads at most 8 bytes from the reactor's own non-blocking eventfd.
                let _ = unsafe { libc::read(r.control.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
            } else if let Some((fd, waker, _)) = st.waiting.remove(&id) {
                let _ = ctl(&r.epoll, libc::EPOLL_CTL_DEL, fd, id, false);
                wake.push(waker);
            }
        }
        let now = Instant::now();
        let due: Vec<u64> = st
            .waiting
            .iter()
            .filter(|(_, w)| w.2.is_some_and(|u| u <= now))
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            if let Some((fd, waker, _)) = st.waiting.remove(&id) {
                let _ = ctl(&r.epoll, libc::EPOLL_CTL_DEL, fd, id, false);
                wake.push(waker);
            }
        }
        drop(st);
        for w in wake {
            w.wake();
        }
    }
}

/// Ready when `fd` is readable or `until` has come: a one-shot registration with the reactor,
/// taken back if the future is dropped first.
pub(crate) struct Readable {
    pub fd: RawFd,
    pub until: Option<Instant>,
    id: Option<u64>,
}

impl Readable {
    pub(crate) fn new(fd: RawFd, until: Option<Instant>) -> Readable {
        Readable {
            fd,
            until,
            id: None,
        }
    }

    fn now(&self) -> bool {
        if self.until.is_some_and(|u| Instant::now() >= u) {
            return true;
        }
        let mut p = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on the stack, no wait.
        unsafe { libc::poll(&mut p, 1, 0) > 0 && p.revents != 0 }
    }
}

impl std::future::Future for Readable {
    type Output = Result<(), String>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        if let Some(id) = self.id.take() {
            forget(id);
        }
        if self.now() {
            return std::task::Poll::Ready(Ok(()));
        }
        match register(self.fd, self.until, cx.waker().clone()) {
            Ok(id) => {
                self.id = Some(id);
                std::task::Poll::Pending
            }
            Err(e) => std::task::Poll::Ready(Err(e)),
        }
    }
}

impl Drop for Readable {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            forget(id);
        }
    }
}
