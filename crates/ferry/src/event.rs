//! What a subscriber learns of its publishers besides their messages: that one appeared, that
//! one is gone and why. Found while the subscriber receives (or counts its publishers), taken
//! with [`Subscriber::try_event`](crate::Subscriber::try_event).

use std::collections::VecDeque;

use crate::qos::Transport;

/// Why a publisher is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Gone {
    /// It closed: it freed its slot in the topic's directory, or said goodbye over UDP.
    Closed,
    /// Its process died without closing (shared memory, this host: `kill -9` included). Seen
    /// within the subscriber's liveness period (50 ms) while it waits for messages.
    Died,
    /// Over UDP: not heard from for the session timeout (3 s): it crashed, its host or the
    /// path to it went away.
    Silent,
    /// Over UDP: its session was dropped to make room for another (the subscriber's limit of
    /// sessions).
    Evicted,
}

impl Gone {
    pub fn as_str(self) -> &'static str {
        match self {
            Gone::Closed => "closed",
            Gone::Died => "died",
            Gone::Silent => "silent",
            Gone::Evicted => "evicted",
        }
    }
}

/// Something a subscriber learned of one of its publishers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A publisher began to reach this subscriber: over shared memory when its ring was
    /// attached, over UDP with its first message.
    Appeared(PublisherId),
    /// A publisher that had appeared is gone.
    Gone(PublisherId, Gone),
    /// `Qos::deadline`: a period (or several) passed without a message; the count so far.
    DeadlineMissed(u64),
}

/// Events a subscriber holds until they are taken. Bounded: beyond [`MAX_EVENTS`] the oldest
/// is dropped, and counted.
pub(crate) const MAX_EVENTS: usize = 256;

#[derive(Debug, Default)]
pub(crate) struct Events {
    queue: VecDeque<Event>,
    dropped: u64,
}

impl Events {
    pub(crate) fn push(&mut self, e: Event) {
        if self.queue.len() >= MAX_EVENTS {
            self.queue.pop_front();
            self.dropped += 1;
        }
        self.queue.push_back(e);
    }

    pub(crate) fn pop(&mut self) -> Option<Event> {
        self.queue.pop_front()
    }

    /// Events dropped because nobody took them in time.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// Which publisher a message came from: the shared-memory publisher's token (unique within its
/// topic's directory) or the UDP publisher's session id (random). A publisher that starts again
/// has a new one; an `auto` publisher has one per transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PublisherId {
    pub(crate) udp: bool,
    pub(crate) id: u64,
}

impl PublisherId {
    /// The transport the message came by: [`Transport::Shm`] or [`Transport::Udp`].
    pub fn transport(&self) -> Transport {
        if self.udp {
            Transport::Udp
        } else {
            Transport::Shm
        }
    }

    /// The token or session id.
    pub fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn shm(token: u64) -> PublisherId {
        PublisherId {
            udp: false,
            id: token,
        }
    }

    pub(crate) fn udp(session: u64) -> PublisherId {
        PublisherId {
            udp: true,
            id: session,
        }
    }
}

impl std::fmt::Display for PublisherId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.udp { "udp" } else { "shm" };
        write!(f, "{kind}:{:016x}", self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_keeps_the_newest_and_counts_what_it_dropped() {
        let mut e = Events::default();
        for i in 0..(MAX_EVENTS as u64 + 10) {
            e.push(Event::Appeared(PublisherId::shm(i)));
        }
        assert_eq!(e.dropped(), 10);
        assert_eq!(e.pop(), Some(Event::Appeared(PublisherId::shm(10))));
        let mut n = 1;
        while e.pop().is_some() {
            n += 1;
        }
        assert_eq!(n, MAX_EVENTS);
    }
}
