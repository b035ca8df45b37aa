//! Nodes, publishers, subscribers: the API applications write against.

use std::marker::PhantomData;
use std::time::Duration;

use crate::pod::{self, Pod};
use crate::shm::ring::Reservation;
use crate::shm::{Ready, ShmPublisher, ShmSubscriber};
use crate::{Error, PodError, Qos, RecvError, SendError, Transport};

/// One participant, usually one process, with a name. Topics of one domain see each other;
/// domains keep test runs and separate systems apart.
#[derive(Debug, Clone)]
pub struct Node {
    name: String,
    domain: String,
}

impl Node {
    /// A node in the domain named by `FERRY_DOMAIN`, or `default`.
    pub fn new(name: &str) -> Result<Node, Error> {
        let domain = std::env::var("FERRY_DOMAIN").unwrap_or_else(|_| "default".to_owned());
        Node::with_domain(name, &domain)
    }

    /// A node in an explicit domain.
    pub fn with_domain(name: &str, domain: &str) -> Result<Node, Error> {
        if name.is_empty() || name.len() > crate::shm::layout::MAX_NODE_NAME || name.contains('\0')
        {
            return Err(Error::InvalidName {
                what: "node",
                name: name.to_owned(),
                reason: "must be 1 to 32 bytes without NUL",
            });
        }
        crate::shm::topic::validate_domain(domain)?;
        Ok(Node {
            name: name.to_owned(),
            domain: domain.to_owned(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// A publisher on `topic`.
    pub fn publisher(&self, topic: &str, qos: &Qos) -> Result<Publisher, Error> {
        match qos.transport {
            Transport::Shm | Transport::Auto => Ok(Publisher {
                inner: ShmPublisher::create(&self.domain, topic, &self.name, qos)?,
                topic: topic.to_owned(),
            }),
            Transport::Udp => Err(Error::Unsupported("udp")),
        }
    }

    /// A subscriber on `topic`. It receives what is published from now on.
    pub fn subscriber(&self, topic: &str, qos: &Qos) -> Result<Subscriber, Error> {
        match qos.transport {
            Transport::Shm | Transport::Auto => Ok(Subscriber {
                inner: ShmSubscriber::create(&self.domain, topic, &self.name, qos)?,
                topic: topic.to_owned(),
            }),
            Transport::Udp => Err(Error::Unsupported("udp")),
        }
    }
}

/// Writes messages to a topic.
#[derive(Debug)]
pub struct Publisher {
    inner: ShmPublisher,
    topic: String,
}

impl Publisher {
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The largest message this publisher can send.
    pub fn max_message_size(&self) -> usize {
        self.inner.max_message()
    }

    /// Subscribers currently attached.
    pub fn subscriber_count(&self) -> usize {
        self.inner.subscriber_count()
    }

    /// Messages sent so far.
    pub fn sent(&self) -> u64 {
        self.inner.sent()
    }

    /// Sends a copy of `bytes`.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), SendError> {
        let mut loan = self.loan(bytes.len())?;
        loan.as_mut_slice().copy_from_slice(bytes);
        loan.send();
        Ok(())
    }

    /// Sends a slice of plain-old-data values, such as `&[u32]`.
    pub fn send_slice<T: Pod>(&mut self, items: &[T]) -> Result<(), SendError> {
        self.send(pod::as_bytes(items))
    }

    /// Lends `len` bytes of the ring to write a message in place (no copy). Under reliable
    /// delivery this waits for room like `send`.
    pub fn loan(&mut self, len: usize) -> Result<Loan<'_>, SendError> {
        let reservation = self.inner.reserve(len)?;
        Ok(Loan {
            publisher: &mut self.inner,
            reservation: Some(reservation),
        })
    }

    /// Lends room for `count` values of `T`.
    pub fn loan_slice<T: Pod>(&mut self, count: usize) -> Result<LoanSlice<'_, T>, SendError> {
        let len = count
            .checked_mul(std::mem::size_of::<T>())
            .ok_or(SendError::TooLarge {
                len: usize::MAX,
                max: self.inner.max_message(),
            })?;
        Ok(LoanSlice {
            loan: self.loan(len)?,
            _t: PhantomData,
        })
    }
}

/// Ring space lent for one message. `send` publishes it; dropping it sends nothing.
pub struct Loan<'a> {
    publisher: &'a mut ShmPublisher,
    reservation: Option<Reservation>,
}

impl Loan<'_> {
    pub fn len(&self) -> usize {
        self.reservation.map_or(0, |r| r.payload_len as usize)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The message bytes to fill in. They hold whatever the ring held before.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let Some(r) = &self.reservation else {
            return &mut [];
        };
        // SAFETY: the reservation gives this publisher the payload bytes exclusively until commit
        // (readers never read past head; reliable readers have released them); the double mapping
        // makes them contiguous; the borrow of self keeps the mapping alive.
        unsafe {
            std::slice::from_raw_parts_mut(self.publisher.payload_ptr(r), r.payload_len as usize)
        }
    }

    /// Publishes the message.
    pub fn send(mut self) {
        if let Some(r) = self.reservation.take() {
            self.publisher.commit(r);
        }
    }
}

impl Drop for Loan<'_> {
    fn drop(&mut self) {
        if let Some(r) = self.reservation.take() {
            self.publisher.abandon(r);
        }
    }
}

impl std::fmt::Debug for Loan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loan").field("len", &self.len()).finish()
    }
}

/// A loan typed as a slice of `T`.
#[derive(Debug)]
pub struct LoanSlice<'a, T: Pod> {
    loan: Loan<'a>,
    _t: PhantomData<T>,
}

impl<T: Pod> LoanSlice<'_, T> {
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // Payloads start 8-byte aligned and the length is a whole number of T.
        pod::from_bytes_mut(self.loan.as_mut_slice()).expect("ring payloads are 8-byte aligned")
    }

    pub fn send(self) {
        self.loan.send()
    }
}

/// Reads messages from a topic, from every publisher on it.
#[derive(Debug)]
pub struct Subscriber {
    inner: ShmSubscriber,
    topic: String,
}

impl Subscriber {
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Publishers currently sending on this topic.
    pub fn publisher_count(&mut self) -> usize {
        self.inner.publisher_count()
    }

    /// Publishers whose segments this subscriber refused to read (foreign, damaged or of another
    /// layout version), with the reason for each.
    pub fn refused_publishers(&self) -> Vec<String> {
        self.inner.refused().map(str::to_owned).collect()
    }

    /// The next message if one is waiting.
    pub fn try_recv(&mut self) -> Result<Option<Sample<'_>>, RecvError> {
        let ready = self.inner.poll()?;
        Ok(ready.map(|ready| Sample {
            sub: &mut self.inner,
            ready,
        }))
    }

    /// Waits for the next message.
    pub fn recv(&mut self) -> Result<Sample<'_>, RecvError> {
        loop {
            if let Some(ready) = self.inner.wait(None)? {
                return Ok(Sample {
                    sub: &mut self.inner,
                    ready,
                });
            }
        }
    }

    /// Waits at most `timeout` for the next message; `None` when the time ran out.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<Sample<'_>>, RecvError> {
        let ready = self.inner.wait(Some(timeout))?;
        Ok(ready.map(|ready| Sample {
            sub: &mut self.inner,
            ready,
        }))
    }

    /// Waits for the next message and copies it into `buf` (replacing its contents).
    pub fn recv_into(&mut self, buf: &mut Vec<u8>) -> Result<(), RecvError> {
        let sample = self.recv()?;
        buf.clear();
        buf.extend_from_slice(&sample);
        Ok(())
    }
}

/// A received message, borrowed in place from the publisher's ring under reliable delivery (the
/// publisher cannot reuse the bytes until the sample is dropped), or from the subscriber's own
/// buffer under latest delivery (copied and checked intact).
pub struct Sample<'a> {
    sub: &'a mut ShmSubscriber,
    ready: Ready,
}

impl Sample<'_> {
    /// The publisher's sequence number of this message (from 0 per publisher).
    pub fn seq(&self) -> u64 {
        self.record().seq
    }

    /// Messages this subscriber skipped just before this one (latest delivery only).
    pub fn skipped(&self) -> u64 {
        self.record().skipped
    }

    fn record(&self) -> &crate::shm::ring::Record {
        match &self.ready {
            Ready::InPlace { record, .. } | Ready::Copied { record } => record,
        }
    }

    /// Views the payload as a slice of `T`.
    pub fn as_slice<T: Pod>(&self) -> Result<&[T], PodError> {
        pod::from_bytes(self)
    }
}

impl std::ops::Deref for Sample<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.sub.payload(&self.ready)
    }
}

impl Drop for Sample<'_> {
    fn drop(&mut self) {
        self.sub.release(&self.ready);
    }
}

impl std::fmt::Debug for Sample<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sample")
            .field("seq", &self.seq())
            .field("len", &self.len())
            .finish()
    }
}
