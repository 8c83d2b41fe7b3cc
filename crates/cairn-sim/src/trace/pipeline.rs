//! A trace source read and decoded on a thread of its own, a batch of
//! events ahead of its consumer (issue 35: trace input that keeps up with
//! the simulator). Reading, decompressing and decoding a trace (or
//! expanding a generated workload's runs) then overlaps the replay
//! instead of adding to it; the events arrive in the inner source's order,
//! so a replay through it decides exactly as one without it.

use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;

use cairn_core::{Error, Result, TraceEvent, TraceSource};

/// Events handed over at a time.
const BATCH: usize = 4096;
/// Batches decoded ahead of the consumer (bounds the memory ahead).
const DEPTH: usize = 4;

pub struct Pipelined {
    /// `None` once the inner source ended or failed.
    rx: Option<Receiver<Result<Vec<TraceEvent>>>>,
    batch: std::vec::IntoIter<TraceEvent>,
    describe: String,
    worker: Option<JoinHandle<()>>,
}

impl Pipelined {
    /// Starts reading `inner` on a new thread.
    pub fn new(mut inner: Box<dyn TraceSource>) -> Result<Self> {
        let describe = inner.describe();
        let (tx, rx) = sync_channel(DEPTH);
        let worker = std::thread::Builder::new()
            .name("trace-read".into())
            .spawn(move || loop {
                let mut batch = Vec::with_capacity(BATCH);
                let ended = loop {
                    match inner.next_event() {
                        Ok(Some(ev)) => {
                            batch.push(ev);
                            if batch.len() == BATCH {
                                break Ok(false);
                            }
                        }
                        Ok(None) => break Ok(true),
                        Err(e) => break Err(e),
                    }
                };
                // A send fails only when the consumer is gone: stop reading.
                if !batch.is_empty() && tx.send(Ok(batch)).is_err() {
                    return;
                }
                match ended {
                    Ok(false) => {}
                    Ok(true) => return,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                }
            })
            .map_err(|e| Error::io("starting a trace reader", e))?;
        Ok(Pipelined {
            rx: Some(rx),
            batch: Vec::new().into_iter(),
            describe,
            worker: Some(worker),
        })
    }
}

impl TraceSource for Pipelined {
    fn next_event(&mut self) -> Result<Option<TraceEvent>> {
        loop {
            if let Some(ev) = self.batch.next() {
                return Ok(Some(ev));
            }
            let Some(rx) = &self.rx else {
                return Ok(None);
            };
            match rx.recv() {
                Ok(Ok(batch)) => self.batch = batch.into_iter(),
                Ok(Err(e)) => {
                    self.rx = None;
                    return Err(e);
                }
                // The reader finished: at the end of the input, or by a
                // panic, which must not pass for the end of the trace.
                Err(_) => {
                    self.rx = None;
                    let worker = self.worker.take().expect("joined once");
                    return match worker.join() {
                        Ok(()) => Ok(None),
                        Err(_) => Err(Error::invalid(format!(
                            "{}: the trace reader stopped unexpectedly",
                            self.describe
                        ))),
                    };
                }
            }
        }
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }
}

impl Drop for Pipelined {
    fn drop(&mut self) {
        // Closing the channel stops the reader at its next batch.
        self.rx = None;
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::{Fingerprint, TraceChunk};

    /// `n` chunk events, then `end`.
    struct Counted {
        left: u64,
        end: Option<&'static str>,
    }

    impl TraceSource for Counted {
        fn next_event(&mut self) -> Result<Option<TraceEvent>> {
            if self.left == 0 {
                return match self.end {
                    None => Ok(None),
                    Some("panic") => panic!("reader bug"),
                    Some(m) => Err(Error::corrupt("t".to_string(), m.to_string())),
                };
            }
            self.left -= 1;
            Ok(Some(TraceEvent::Chunk(TraceChunk {
                fp: Fingerprint::from_slice(&self.left.to_le_bytes()),
                size: self.left as u32,
                stored_size: self.left as u32,
            })))
        }
        fn describe(&self) -> String {
            "counted".into()
        }
    }

    fn drain(src: &mut dyn TraceSource) -> (Vec<u32>, Result<()>) {
        let mut sizes = Vec::new();
        loop {
            match src.next_event() {
                Ok(Some(TraceEvent::Chunk(c))) => sizes.push(c.size),
                Ok(Some(_)) => unreachable!(),
                Ok(None) => return (sizes, Ok(())),
                Err(e) => return (sizes, Err(e)),
            }
        }
    }

    #[test]
    fn passes_every_event_in_order_then_the_end() {
        for n in [0, 1, BATCH as u64 - 1, BATCH as u64, 3 * BATCH as u64 + 7] {
            let mut p = Pipelined::new(Box::new(Counted { left: n, end: None })).unwrap();
            let (sizes, r) = drain(&mut p);
            r.unwrap();
            assert_eq!(sizes, (0..n).rev().map(|i| i as u32).collect::<Vec<_>>());
            assert!(p.next_event().unwrap().is_none(), "the end stays the end");
        }
    }

    #[test]
    fn an_error_arrives_after_the_events_before_it() {
        let n = BATCH as u64 + 3;
        let mut p = Pipelined::new(Box::new(Counted {
            left: n,
            end: Some("bad record at byte 9"),
        }))
        .unwrap();
        let (sizes, r) = drain(&mut p);
        assert_eq!(sizes.len() as u64, n);
        assert!(r.unwrap_err().to_string().contains("bad record at byte 9"));
    }

    #[test]
    fn a_reader_panic_is_an_error_not_the_end() {
        let mut p = Pipelined::new(Box::new(Counted {
            left: 5,
            end: Some("panic"),
        }))
        .unwrap();
        // The batch being decoded when it panicked is lost with it.
        let (sizes, r) = drain(&mut p);
        assert!(sizes.is_empty());
        assert!(r.unwrap_err().to_string().contains("stopped unexpectedly"));
    }

    #[test]
    fn dropping_it_early_stops_the_reader() {
        let mut p = Pipelined::new(Box::new(Counted {
            left: u64::MAX,
            end: None,
        }))
        .unwrap();
        assert!(p.next_event().unwrap().is_some());
        drop(p); // joins: would hang if the reader kept going
    }
}
