//! A queue between the receiving threads and the writer, bounded by the bytes it holds: a
//! writer that falls behind (a slow disk) makes the receivers wait, and then a latest-delivery
//! subscriber skips ahead (counted) instead of the recorder growing without bound.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub struct Queue<T> {
    state: Mutex<State<T>>,
    changed: Condvar,
    max_bytes: usize,
}

struct State<T> {
    items: VecDeque<(T, usize)>,
    bytes: usize,
}

impl<T> Queue<T> {
    pub fn new(max_bytes: usize) -> Queue<T> {
        Queue {
            state: Mutex::new(State {
                items: VecDeque::new(),
                bytes: 0,
            }),
            changed: Condvar::new(),
            max_bytes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A thread that panicked while holding the lock left a consistent queue (every
        // change is one push or pop).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `item` of `bytes`, waiting at most `timeout` for room (an item always fits an empty
    /// queue). Gives the item back when the time ran out.
    pub fn push(&self, item: T, bytes: usize, timeout: Duration) -> Result<(), T> {
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        while s.bytes > 0 && s.bytes + bytes > self.max_bytes {
            let now = Instant::now();
            if now >= deadline {
                return Err(item);
            }
            s = self
                .changed
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        s.bytes += bytes;
        s.items.push_back((item, bytes));
        drop(s);
        self.changed.notify_all();
        Ok(())
    }

    /// Takes the oldest item, waiting at most `timeout` for one.
    pub fn pop(&self, timeout: Duration) -> Option<T> {
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        loop {
            if let Some((item, bytes)) = s.items.pop_front() {
                s.bytes -= bytes;
                drop(s);
                self.changed.notify_all();
                return Some(item);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            s = self
                .changed
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Queue;
    use std::time::Duration;

    #[test]
    fn bounded_by_bytes_but_never_refuses_an_empty_queue() {
        let q = Queue::new(10);
        let t = Duration::from_millis(1);
        assert!(q.push(1, 8, t).is_ok());
        assert_eq!(q.push(2, 8, t), Err(2));
        assert_eq!(q.pop(t), Some(1));
        assert!(
            q.push(3, 100, t).is_ok(),
            "an item larger than the bound fits alone"
        );
        assert_eq!(q.pop(t), Some(3));
        assert_eq!(q.pop(t), None);
    }
}
