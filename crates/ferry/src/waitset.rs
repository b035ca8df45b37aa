//! Waiting on many: one thread sleeps until any of several subscribers, service servers, service
//! clients or timers has something, and learns which.
//!
//! How it sleeps: a shared-memory subscriber is rung through the futex word of its slot (its
//! publishers ring it when it has announced itself as a sleeper on their rings, as a lone
//! subscriber's blocking receive does); a UDP subscriber through its socket. With only the first
//! kind the thread sleeps in one `futex_waitv` (Linux 5.16 and later) on all their words; with
//! only the second in one `ppoll` on all their sockets. With both, a helper thread of the wait
//! set sleeps in `futex_waitv` and wakes the caller, which sleeps in `ppoll`, through an eventfd.
//! Nothing spins: each item's own timers (a publisher's liveness, a UDP session's repairs, a
//! deadline period, a client's look at its server) bound the sleep, and a timer's due time does.
//!
//! No wake-up is lost: before it sleeps, the wait set reads each futex word, announces the
//! subscriber on its rings, and looks for a message once more (a publisher that commits after
//! the announcement rings the word, which then differs from the value read, and the sleep
//! returns at once); a datagram that arrives before `ppoll` leaves its socket readable.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::waiting::Sleep;
use crate::{Client, Error, Server, Subscriber};

/// The most futex words one `futex_waitv` takes: the kernel takes 128, the helper adds one.
const MAX_WAITV: usize = 127;

/// How long one sleep of the fallback (more than 128 shared-memory subscribers, or a kernel
/// before 5.16) lasts before it looks at every item again.
const FALLBACK_SLICE: Duration = Duration::from_millis(2);

/// Something a [`WaitSet`] waits on: a [`Subscriber`], a [`Server`], a [`Client`] or a
/// [`Timer`].
pub trait Waitable: private::Sealed + Send {}

impl Waitable for Subscriber {}
impl Waitable for Server {}
impl Waitable for Client {}
impl Waitable for Timer {}

pub(crate) mod private {
    use crate::waiting::Sleep;
    use std::time::Instant;

    /// What a wait set needs of an item.
    pub trait Sealed {
        /// Whether the item has something now (a message, an event, a request, a response, a
        /// due timer), without taking it; does what its own timers ask. `sockets`: whether its
        /// sockets may hold something (false when the last sleep found them empty, so that a
        /// look costs no system call per idle UDP subscriber).
        fn look(&mut self, now: Instant, sockets: bool) -> bool;
        /// Gets ready to sleep: adds what wakes it to `sleep`; false when it has something
        /// after all (then `disarm` and look again).
        fn arm(&mut self, sleep: &mut Sleep) -> bool;
        /// `slept`: whether the thread slept between `arm` and this (a subscriber counts its
        /// waits only then).
        fn disarm(&mut self, slept: bool);
    }
}

/// A periodic timer for a [`WaitSet`]: ready once its period has passed, until taken.
#[derive(Debug, Clone)]
pub struct Timer {
    period: Duration,
    next: Instant,
}

impl Timer {
    /// A timer first due one `period` from now. A zero period is taken as 1 µs.
    pub fn new(period: Duration) -> Timer {
        let period = period.max(Duration::from_micros(1));
        Timer {
            period,
            next: Instant::now() + period,
        }
    }

    /// Whether the timer is due.
    pub fn is_due(&self) -> bool {
        Instant::now() >= self.next
    }

    /// Takes the periods that have ended (0 if none): the timer is next due at the end of the
    /// period now running.
    pub fn take(&mut self) -> u64 {
        let now = Instant::now();
        if now < self.next {
            return 0;
        }
        let period = self.period.as_nanos();
        let over = now.duration_since(self.next).as_nanos();
        let n = over / period + 1;
        let step = Duration::from_nanos((n * period).min(u64::MAX as u128) as u64);
        self.next = self.next.checked_add(step).unwrap_or(now + self.period);
        n.min(u64::MAX as u128) as u64
    }
}

impl private::Sealed for Timer {
    fn look(&mut self, now: Instant, _sockets: bool) -> bool {
        now >= self.next
    }
    fn arm(&mut self, sleep: &mut Sleep) -> bool {
        sleep.due(self.next);
        true
    }
    fn disarm(&mut self, _slept: bool) {}
}

/// Blocks one thread on any number of subscribers, servers, clients and timers, and says which
/// are ready. It holds none of them: each [`WaitSet::wait`] is given the items to wait on, so
/// they stay the caller's to read between waits.
///
/// ```no_run
/// use std::time::Duration;
/// use ferry::{Node, Qos, Timer, WaitSet};
///
/// let node = Node::new("controller")?;
/// let mut imu = node.subscriber("sensor/imu", &Qos::default())?;
/// let mut cmd = node.subscriber("command", &Qos::default())?;
/// let mut tick = Timer::new(Duration::from_millis(100));
/// let mut set = WaitSet::new();
/// loop {
///     let ready = set.wait(&mut [&mut imu, &mut cmd, &mut tick], None)?.to_vec();
///     if ready.contains(&0) {
///         while let Some(sample) = imu.try_recv()? { let _ = &*sample; }
///     }
///     if ready.contains(&1) {
///         while let Some(sample) = cmd.try_recv()? { let _ = &*sample; }
///     }
///     if ready.contains(&2) {
///         tick.take();
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Default)]
pub struct WaitSet {
    ready: Vec<usize>,
    /// Per item: whether its sockets may hold something (see `Sealed::look`).
    readable: Vec<bool>,
    sleep: Sleep,
    helper: Option<Helper>,
    /// `futex_waitv` is missing (a kernel before 5.16): sleep in slices instead.
    no_waitv: bool,
}

// SAFETY: the only fields that are not Send are the futex-word pointers in `sleep`, which
// `wait` sets and uses within one call, while the items they point into are lent to it; between
// calls they are stale values that nothing reads (each arm clears them first).
unsafe impl Send for WaitSet {}

impl std::fmt::Debug for WaitSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitSet")
            .field("helper", &self.helper.is_some())
            .finish()
    }
}

impl WaitSet {
    pub fn new() -> WaitSet {
        WaitSet::default()
    }

    /// Waits up to `timeout` (`None`: as long as it takes) until at least one of `items` is
    /// ready, and returns the indices of those ready, in order; empty when the time ran out. A
    /// subscriber is ready when a message waits, or a deadline missed (`Qos::deadline`), or a
    /// publisher event if it asked for those ([`Subscriber::wake_on_events`]); a server when a
    /// request does, a client when a response (or the end of a pending request) does, a timer
    /// when it is due. Ready items stay ready until what they hold is taken (`try_recv`,
    /// `try_event`, `try_recv_request`, `try_recv_response`, `Timer::take`).
    pub fn wait(
        &mut self,
        items: &mut [&mut dyn Waitable],
        timeout: Option<Duration>,
    ) -> Result<&[usize], Error> {
        let end = timeout.and_then(|t| Instant::now().checked_add(t));
        // The first look reads every socket; later ones only those the sleep found readable.
        self.readable.clear();
        self.readable.resize(items.len(), true);
        loop {
            let now = Instant::now();
            self.ready.clear();
            for (i, item) in items.iter_mut().enumerate() {
                if item.look(now, self.readable[i]) {
                    self.ready.push(i);
                }
            }
            if !self.ready.is_empty() || end.is_some_and(|e| now >= e) {
                return Ok(&self.ready);
            }
            self.sleep.start(end);
            let mut armed = 0;
            let mut all_armed = true;
            for (i, item) in items.iter_mut().enumerate() {
                armed += 1;
                let ok = item.arm(&mut self.sleep);
                let owners = &mut self.sleep.owners;
                owners.resize(self.sleep.fds.len(), i);
                if !ok {
                    all_armed = false;
                    break;
                }
            }
            self.readable.iter_mut().for_each(|r| *r = !all_armed);
            if all_armed {
                let mut readable = std::mem::take(&mut self.readable);
                let result = self.sleep_once(&mut readable);
                self.readable = readable;
                result?;
            }
            for item in items.iter_mut().take(armed) {
                item.disarm(all_armed);
            }
        }
    }

    /// One sleep until a word changes, a socket is readable, or `sleep.until`; marks the
    /// items whose sockets it found readable in `readable`.
    fn sleep_once(&mut self, readable: &mut [bool]) -> Result<(), Error> {
        let timeout = self
            .sleep
            .until
            .map(|u| u.saturating_duration_since(Instant::now()));
        if timeout.is_some_and(|t| t.is_zero()) {
            return Ok(());
        }
        let (bells, fds, owners) = (&self.sleep.bells, &self.sleep.fds, &self.sleep.owners);
        let mut mark = |i: usize| readable[owners[i]] = true;
        if bells.is_empty() {
            crate::sys::poll_readable(fds, None, timeout, &mut mark);
            return Ok(());
        }
        if bells.len() > MAX_WAITV || self.no_waitv {
            readable.iter_mut().for_each(|r| *r = true);
            return self.sleep_in_slices(timeout);
        }
        if fds.is_empty() {
            if let Err(crate::sys::NoWaitv) = crate::sys::futex_waitv(bells, timeout) {
                self.no_waitv = true;
            }
            return Ok(());
        }
        // Both kinds: the helper sleeps on the words, this thread on the sockets and the
        // helper's eventfd.
        if self.helper.is_none() {
            self.helper = Some(
                Helper::start().map_err(|e| Error::io("start a wait set's helper thread", e))?,
            );
        }
        let helper = self.helper.as_ref().expect("started above");
        helper.watch(bells);
        crate::sys::poll_readable(fds, Some(helper.event.as_raw_fd()), timeout, &mut mark);
        helper.stop_watching();
        if helper.shared.missing.load(Ordering::Relaxed) {
            self.no_waitv = true;
        }
        Ok(())
    }

    /// For an event loop (Python's asyncio, tokio's `AsyncFd`, mio, a `poll` loop of your own):
    /// looks at `items` once and, when none is ready, gets them ready to sleep and gives a file
    /// descriptor that becomes readable when one of them may be ready, and the time by which
    /// they must be looked at again whatever happens (their own timers: a publisher's liveness,
    /// a UDP session's repairs, a deadline, a timer). Wait for either in your loop, then drop
    /// the [`Armed`] (it disarms the items) and look at them (`try_recv`, ... or `arm` again).
    /// When some are ready now, [`Armed::ready`] lists them and there is no descriptor. Nothing
    /// spins; the descriptor is made for this arming and closed with it.
    pub fn arm<'s>(&'s mut self, mut items: Vec<&'s mut dyn Waitable>) -> Result<Armed<'s>, Error> {
        loop {
            let now = Instant::now();
            let ready: Vec<usize> = items
                .iter_mut()
                .enumerate()
                .filter_map(|(i, item)| item.look(now, true).then_some(i))
                .collect();
            if !ready.is_empty() {
                return Ok(Armed {
                    set: self,
                    items,
                    ready,
                    epoll: None,
                    until: None,
                });
            }
            self.sleep.start(None);
            let mut armed = 0;
            let mut all_armed = true;
            for item in items.iter_mut() {
                armed += 1;
                if !item.arm(&mut self.sleep) {
                    all_armed = false;
                    break;
                }
            }
            if !all_armed {
                for item in items.iter_mut().take(armed) {
                    item.disarm(false);
                }
                continue;
            }
            return match self.epoll_for_sleep() {
                Ok((epoll, until)) => Ok(Armed {
                    set: self,
                    items,
                    ready: Vec::new(),
                    epoll: Some(epoll),
                    until,
                }),
                Err(e) => {
                    if let Some(h) = &self.helper {
                        h.stop_watching();
                    }
                    for item in items.iter_mut() {
                        item.disarm(false);
                    }
                    Err(e)
                }
            };
        }
    }

    /// An epoll descriptor over the armed sockets and, for futex words, the helper's eventfd
    /// (the helper watching them); and when to look again.
    fn epoll_for_sleep(&mut self) -> Result<(OwnedFd, Option<Instant>), Error> {
        let io = |what: &str, e: std::io::Error| Error::io(format!("arm a wait set: {what}"), e);
        // SAFETY: epoll_create1(2) takes a flag; a non-negative result is a new descriptor
        // that nothing else owns.
        let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if raw < 0 {
            return Err(io("epoll_create1", std::io::Error::last_os_error()));
        }
        // SAFETY: just made, owned here alone.
        let epoll = unsafe { OwnedFd::from_raw_fd(raw) };
        let add = |fd: RawFd| -> Result<(), Error> {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: fd as u64,
            };
            // SAFETY: both descriptors are open (the socket is lent by the item for the
            // arming; the eventfd is the helper's), and `ev` lives for the call.
            let r = unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
            if r < 0 {
                return Err(io("epoll_ctl", std::io::Error::last_os_error()));
            }
            Ok(())
        };
        for &fd in &self.sleep.fds {
            add(fd)?;
        }
        let mut until = self.sleep.until;
        if !self.sleep.bells.is_empty() {
            if self.sleep.bells.len() > MAX_WAITV || self.no_waitv {
                // The fallback: look again soon.
                let soon = Instant::now() + FALLBACK_SLICE;
                until = Some(until.map_or(soon, |u| u.min(soon)));
            } else {
                if self.helper.is_none() {
                    self.helper =
                        Some(Helper::start().map_err(|e| io("start its helper thread", e))?);
                }
                let helper = self.helper.as_ref().expect("started above");
                add(helper.event.as_raw_fd())?;
                helper.watch(&self.sleep.bells);
            }
        }
        Ok((epoll, until))
    }

    /// The fallback: short sleeps on the first word (or the sockets), then a look at everything.
    fn sleep_in_slices(&mut self, timeout: Option<Duration>) -> Result<(), Error> {
        let slice = timeout.map_or(FALLBACK_SLICE, |t| t.min(FALLBACK_SLICE));
        if self.sleep.fds.is_empty() {
            let (word, value) = self.sleep.bells[0];
            // SAFETY: the word lies in the directory mapping of a subscriber that `wait`'s
            // caller lends for the whole call.
            crate::sys::futex_wait(unsafe { &*word }, value, Some(slice));
        } else {
            crate::sys::poll_readable(&self.sleep.fds, None, Some(slice), &mut |_| {});
        }
        Ok(())
    }
}

/// A wait set armed for an event loop ([`WaitSet::arm`]): the items it holds are ready to
/// sleep until it is dropped, which disarms them.
pub struct Armed<'s> {
    set: &'s mut WaitSet,
    items: Vec<&'s mut dyn Waitable>,
    ready: Vec<usize>,
    epoll: Option<OwnedFd>,
    until: Option<Instant>,
}

impl Armed<'_> {
    /// The items ready when `arm` looked (then nothing is armed and there is no descriptor).
    pub fn ready(&self) -> &[usize] {
        &self.ready
    }

    /// Readable when one of the items may be ready; `None` when some already are.
    pub fn fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        self.epoll.as_ref().map(|e| e.as_fd())
    }

    /// When the items must be looked at again even if the descriptor stays quiet (`None`: only
    /// when it becomes readable).
    pub fn until(&self) -> Option<Instant> {
        self.until
    }
}

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        if self.epoll.take().is_none() {
            return;
        }
        if let Some(h) = &self.set.helper {
            h.stop_watching();
            if h.shared.missing.load(Ordering::Relaxed) {
                self.set.no_waitv = true;
            }
        }
        for item in self.items.iter_mut() {
            item.disarm(true);
        }
    }
}

impl std::fmt::Debug for Armed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Armed")
            .field("ready", &self.ready)
            .field("fd", &self.epoll)
            .field("until", &self.until)
            .finish()
    }
}

/// A thread that sleeps on the futex words of a mixed wait set and writes to an eventfd when one
/// changes.
struct Helper {
    shared: Arc<Shared>,
    event: OwnedFd,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    /// Bumped (and woken) on every change of `job` and to stop.
    control: AtomicU32,
    /// The words to watch, as addresses (empty: none now).
    job: Mutex<Vec<(usize, u32)>>,
    stop: AtomicBool,
    missing: AtomicBool,
}

impl Helper {
    fn start() -> std::io::Result<Helper> {
        // SAFETY: eventfd(2) takes plain integers; a non-negative result is a new descriptor
        // that nothing else owns.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just made and is owned here alone.
        let event = unsafe { OwnedFd::from_raw_fd(fd) };
        let shared = Arc::new(Shared {
            control: AtomicU32::new(0),
            job: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            missing: AtomicBool::new(false),
        });
        let thread = {
            let (shared, fd) = (shared.clone(), event.as_raw_fd());
            std::thread::Builder::new()
                .name("ferry-waitset".into())
                .spawn(move || helper_loop(&shared, fd))?
        };
        Ok(Helper {
            shared,
            event,
            thread: Some(thread),
        })
    }

    /// Hands the helper the words to watch.
    fn watch(&self, bells: &[(*const AtomicU32, u32)]) {
        let mut job = self.shared.job.lock().unwrap_or_else(|e| e.into_inner());
        job.clear();
        job.extend(bells.iter().map(|&(w, v)| (w as usize, v)));
        drop(job);
        self.kick();
    }

    /// Takes the words back (the helper lets go of them at once) and empties the eventfd.
    fn stop_watching(&self) {
        self.shared
            .job
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.kick();
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into `buf` from the eventfd this helper owns
        // (non-blocking: nothing to read is EAGAIN).
        let _ = unsafe { libc::read(self.event.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
    }

    fn kick(&self) {
        // Release pairs with the Acquire load in `helper_loop`: the job stored before is seen.
        self.shared.control.fetch_add(1, Ordering::Release);
        crate::sys::futex_wake(&self.shared.control);
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.kick();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn helper_loop(shared: &Shared, event: RawFd) {
    let mut bells: Vec<(*const AtomicU32, u32)> = Vec::new();
    loop {
        // Acquire pairs with the Release bump in `Helper::kick`.
        let control = shared.control.load(Ordering::Acquire);
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        bells.clear();
        bells.extend(
            shared
                .job
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|&(w, v)| (w as *const AtomicU32, v)),
        );
        if bells.is_empty() {
            crate::sys::futex_wait(&shared.control, control, None);
            continue;
        }
        // The control word last: a new job (or a stop) ends this wait.
        bells.push((&shared.control as *const AtomicU32, control));
        match crate::sys::futex_waitv(&bells, None) {
            Err(crate::sys::NoWaitv) => {
                shared.missing.store(true, Ordering::Relaxed);
                signal(event);
                crate::sys::futex_wait(&shared.control, control, None);
            }
            Ok(()) => {
                // A word of the job changed (or the control did): tell the caller once, then
                // wait for the next job.
                if shared.control.load(Ordering::Acquire) == control {
                    signal(event);
                    crate::sys::futex_wait(&shared.control, control, None);
                }
            }
        }
    }
}

fn signal(event: RawFd) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 bytes from `one` to the wait set's eventfd, which outlives this thread.
    let _ = unsafe { libc::write(event, one.as_ptr().cast(), 8) };
}

impl private::Sealed for Subscriber {
    fn look(&mut self, now: Instant, sockets: bool) -> bool {
        self.look(now, true, sockets)
    }
    fn arm(&mut self, sleep: &mut Sleep) -> bool {
        self.arm(sleep)
    }
    fn disarm(&mut self, slept: bool) {
        self.disarm(slept)
    }
}

/// A subscriber in a wait set for its messages alone: its publisher events and missed deadlines
/// do not make it ready (they stay queued for `try_event`). For a receive that waits for a
/// message and nothing else, such as Python's `recv_async`.
pub struct Messages<'a>(pub &'a mut Subscriber);

impl Waitable for Messages<'_> {}

impl private::Sealed for Messages<'_> {
    fn look(&mut self, now: Instant, sockets: bool) -> bool {
        self.0.look(now, false, sockets)
    }
    fn arm(&mut self, sleep: &mut Sleep) -> bool {
        self.0.arm(sleep)
    }
    fn disarm(&mut self, slept: bool) {
        self.0.disarm(slept)
    }
}

/// A service's end waits as the subscriber it reads through does.
macro_rules! service_end {
    ($end:ty) => {
        impl private::Sealed for $end {
            fn look(&mut self, now: Instant, sockets: bool) -> bool {
                self.look(now, sockets)
            }
            fn arm(&mut self, sleep: &mut Sleep) -> bool {
                self.arm(sleep)
            }
            fn disarm(&mut self, slept: bool) {
                self.disarm(slept)
            }
        }
    };
}

service_end!(Server);
service_end!(Client);
