//! Bounded channels between the pipeline's threads (walker -> streams,
//! streams -> sealer, restore's readers -> writer) that block by sleeping
//! and never spin.
//!
//! The general-purpose channels spin and then call `sched_yield` before
//! they park a thread on an empty or full queue. A backup of many small
//! files crosses its channels a few times per file, so a tree of 7,467
//! files made about 21,000 such calls, and when other processes use the
//! cores every yield hands the CPU away (issue 12: "no busy waiting").
//! Here a waiting thread sleeps on a condition variable (a futex) at once.
//!
//! The interface is the small part of the usual one the engine uses:
//! `bounded`, cloneable `Sender`/`Receiver`, `send`, `try_send`, `recv`,
//! `try_recv`, `iter`. A send fails once every receiver is gone, a receive once the
//! queue is empty and every sender is gone.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

struct State<T> {
    queue: VecDeque<T>,
    senders: usize,
    receivers: usize,
    /// Threads asleep in `recv` / `send`: a wake-up is a system call, made
    /// only when someone sleeps.
    sleeping_receivers: usize,
    sleeping_senders: usize,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    not_empty: Condvar,
    not_full: Condvar,
    capacity: usize,
}

impl<T> Shared<T> {
    /// The queue's lock; a thread that panicked holding it left the queue
    /// consistent (every change is one push or pop), so poisoning is ignored.
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, mut st: MutexGuard<'_, State<T>>, msg: T) {
        st.queue.push_back(msg);
        let wake = st.sleeping_receivers > 0;
        drop(st);
        if wake {
            self.not_empty.notify_one();
        }
    }

    fn pop(&self, mut st: MutexGuard<'_, State<T>>) -> Option<T> {
        let msg = st.queue.pop_front()?;
        let wake = st.sleeping_senders > 0;
        drop(st);
        if wake {
            self.not_full.notify_one();
        }
        Some(msg)
    }
}

/// A channel holding at most `capacity` messages (at least one).
pub fn bounded<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::with_capacity(capacity.max(1)),
            senders: 1,
            receivers: 1,
            sleeping_receivers: 0,
            sleeping_senders: 0,
        }),
        not_empty: Condvar::new(),
        not_full: Condvar::new(),
        capacity: capacity.max(1),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

/// The message of a send that found no receiver left.
#[derive(Debug, PartialEq, Eq)]
pub struct SendError<T>(pub T);

/// Every sender is gone and the queue is empty.
#[derive(Debug, PartialEq, Eq)]
pub struct RecvError;

#[derive(Debug, PartialEq, Eq)]
pub enum TryRecvError {
    Empty,
    Disconnected,
}

pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Sender<T> {
    /// Waits (sleeping) while the queue is full.
    pub fn send(&self, msg: T) -> Result<(), SendError<T>> {
        let mut st = self.shared.lock();
        while st.queue.len() >= self.shared.capacity && st.receivers > 0 {
            st.sleeping_senders += 1;
            st = self
                .shared
                .not_full
                .wait(st)
                .unwrap_or_else(|p| p.into_inner());
            st.sleeping_senders -= 1;
        }
        if st.receivers == 0 {
            return Err(SendError(msg));
        }
        self.shared.push(st, msg);
        Ok(())
    }

    /// Sends without waiting: the message comes back if the queue is full
    /// or no receiver is left.
    pub fn try_send(&self, msg: T) -> Result<(), SendError<T>> {
        let st = self.shared.lock();
        if st.queue.len() >= self.shared.capacity || st.receivers == 0 {
            return Err(SendError(msg));
        }
        self.shared.push(st, msg);
        Ok(())
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.lock().senders += 1;
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let last = {
            let mut st = self.shared.lock();
            st.senders -= 1;
            st.senders == 0
        };
        if last {
            self.shared.not_empty.notify_all();
        }
    }
}

pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Receiver<T> {
    /// Waits (sleeping) while the queue is empty and a sender remains.
    pub fn recv(&self) -> Result<T, RecvError> {
        let mut st = self.shared.lock();
        loop {
            if !st.queue.is_empty() {
                return Ok(self.shared.pop(st).expect("not empty"));
            }
            if st.senders == 0 {
                return Err(RecvError);
            }
            st.sleeping_receivers += 1;
            st = self
                .shared
                .not_empty
                .wait(st)
                .unwrap_or_else(|p| p.into_inner());
            st.sleeping_receivers -= 1;
        }
    }

    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let st = self.shared.lock();
        if !st.queue.is_empty() {
            return Ok(self.shared.pop(st).expect("not empty"));
        }
        if st.senders == 0 {
            Err(TryRecvError::Disconnected)
        } else {
            Err(TryRecvError::Empty)
        }
    }

    /// Messages until every sender is gone and the queue is drained.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        std::iter::from_fn(move || self.recv().ok())
    }
}

/// Owned iteration: messages until every sender is gone.
pub struct IntoIter<T>(Receiver<T>);

impl<T> Iterator for IntoIter<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.0.recv().ok()
    }
}

impl<T> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;
    fn into_iter(self) -> IntoIter<T> {
        IntoIter(self)
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.shared.lock().receivers += 1;
        Receiver {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let last = {
            let mut st = self.shared.lock();
            st.receivers -= 1;
            st.receivers == 0
        };
        if last {
            self.shared.not_full.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_arrive_in_order_and_the_end_is_seen() {
        let (tx, rx) = bounded(2);
        let producer = std::thread::spawn(move || {
            for i in 0..1000 {
                tx.send(i).unwrap();
            }
        });
        let got: Vec<i32> = rx.iter().collect();
        producer.join().unwrap();
        assert_eq!(got, (0..1000).collect::<Vec<_>>());
        assert_eq!(rx.recv(), Err(RecvError));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    }

    #[test]
    fn many_senders_and_receivers_lose_and_duplicate_nothing() {
        let (tx, rx) = bounded(3);
        let senders: Vec<_> = (0..4)
            .map(|k| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for i in 0..500 {
                        tx.send(k * 1000 + i).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let receivers: Vec<_> = (0..3)
            .map(|_| {
                let rx = rx.clone();
                std::thread::spawn(move || rx.iter().collect::<Vec<i32>>())
            })
            .collect();
        drop(rx);
        for s in senders {
            s.join().unwrap();
        }
        let mut all: Vec<i32> = receivers
            .into_iter()
            .flat_map(|r| r.join().unwrap())
            .collect();
        all.sort();
        let mut want: Vec<i32> = (0..4)
            .flat_map(|k| (0..500).map(move |i| k * 1000 + i))
            .collect();
        want.sort();
        assert_eq!(all, want);
    }

    #[test]
    fn a_send_with_no_receiver_fails_and_returns_the_message() {
        let (tx, rx) = bounded(1);
        tx.send(1).unwrap();
        let blocked = {
            let tx = tx.clone();
            // Full: this send waits until the receiver is dropped.
            std::thread::spawn(move || tx.send(2))
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(rx);
        assert_eq!(blocked.join().unwrap(), Err(SendError(2)));
        assert_eq!(tx.send(3), Err(SendError(3)));
    }

    #[test]
    fn try_recv_reports_empty_while_a_sender_lives() {
        let (tx, rx) = bounded::<u8>(1);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        tx.send(7).unwrap();
        assert_eq!(rx.try_recv(), Ok(7));
        tx.try_send(8).unwrap();
        assert_eq!(tx.try_send(9), Err(SendError(9)), "full");
        assert_eq!(rx.into_iter().next(), Some(8));
        let (tx, rx) = bounded::<u8>(1);
        drop(tx);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    }
}
