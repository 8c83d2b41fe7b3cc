//! [`CountingBackend`]: a pass-through backend that counts I/O.
//!
//! Every successful data read (`read`, `read_at`, `read_tail`) adds one to
//! `read_ops` and the bytes returned to `bytes_read`; every successful
//! `write_atomic` adds one to `write_ops` and the object size to
//! `bytes_written`. Metadata calls (`size`, `exists`, `list`), deletes and
//! locks are passed through uncounted. The counters are the shared
//! [`cairn_core::Counters`] the rest of the engine reports into.

use cairn_core::counters::bump;
use cairn_core::Counters;
use std::sync::Arc;

use crate::observed::{IoObserver, IoOp, ObservedBackend};

/// Wraps a backend and counts its reads and writes into shared counters:
/// `CountingBackend::new(inner, counters)`; `observer()` is the counters.
pub type CountingBackend<B> = ObservedBackend<B, Arc<Counters>>;

impl IoObserver for Arc<Counters> {
    fn observe(&self, op: IoOp, _key: &str, bytes: usize) {
        let (ops, total) = match op {
            IoOp::Write => (&self.write_ops, &self.bytes_written),
            IoOp::Read | IoOp::ReadAt | IoOp::ReadTail | IoOp::ReadRun | IoOp::ReadRunContinued => {
                (&self.read_ops, &self.bytes_read)
            }
        };
        bump(ops, 1);
        bump(total, bytes as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemBackend;
    use cairn_core::Backend;

    #[test]
    fn counts_reads_and_writes() {
        let counters = Arc::new(Counters::default());
        let b = CountingBackend::new(MemBackend::new(), Arc::clone(&counters));
        b.write_atomic("a", &[7; 100]).unwrap();
        b.write_atomic("b", &[7; 10]).unwrap();
        b.read("a").unwrap();
        b.read_at("a", 10, 20).unwrap();
        b.read_tail("b", 4).unwrap();
        assert!(b.read("missing").is_err());
        b.size("a").unwrap();
        b.exists("a").unwrap();
        b.list("").unwrap();
        let s = counters.snapshot();
        assert_eq!((s.write_ops, s.bytes_written), (2, 110));
        assert_eq!((s.read_ops, s.bytes_read), (3, 124));
        assert_eq!(b.describe(), "memory");
    }
}
