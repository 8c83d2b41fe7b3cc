//! HAR, history-aware rewriting (Fu et al., "Accelerating Restore and
//! Garbage Collection in Deduplication-based Backup Systems via Exploiting
//! Historical Information", USENIX ATC 2014; issue 34).
//!
//! HAR's observation: consecutive backups of one source are alike, so a
//! container the previous backup used sparsely (little of it referenced)
//! will be used sparsely by this one too, and each such container costs a
//! restore a whole container read for a few chunks. The algorithm, in the
//! paper's order:
//!
//! 1. while backup `n` runs, add the size of every chunk it references in
//!    place to that container's utilization (a chunk it stores, new or
//!    rewritten, lands in a container of its own);
//! 2. when it ends, the containers whose utilization is below the threshold
//!    (50% of a container by default) are its *sparse* containers; they are
//!    kept with the snapshot (`har/<snapshot id>`, [`encode`]);
//! 3. backup `n + 1` of the same host inherits them, and stores again every
//!    duplicate that points into one of them. Every other duplicate goes to
//!    the scheme behind HAR (Capping, FCRC or LBW, or none), which 002's
//!    schemes decide as before.
//!
//! Once the backups that referenced a sparse container are forgotten, its
//! chunks are garbage, and a collection reclaims it whole.
//!
//! Utilization is counted in raw bytes against the container's size; only
//! containers older than this backup count (those it writes hold only its
//! own chunks). A container of compressible chunks thus counts as fuller
//! than it is, and HAR rewrites less there.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cairn_core::{ContainerId, Fingerprint, Result};
use cairn_format::envelope::{open_ids, seal_ids};
use parking_lot::Mutex;

use super::{Action, RewritePolicy};
use crate::dedup::location::Location;

const MAGIC: [u8; 8] = *b"CAIRNHAR";
const VERSION: u32 = 1;

/// What one backup's HAR shares across its streams.
pub struct HarState {
    /// The sparse containers of the previous backup of this host.
    inherited: HashSet<ContainerId>,
    /// Containers from this id on were written during this backup.
    first_new: ContainerId,
    threshold: f64,
    /// Raw bytes this backup referenced in place, by container (every
    /// stream's, added as it finishes).
    used: Mutex<HashMap<ContainerId, u64>>,
}

impl HarState {
    pub fn new(
        inherited: HashSet<ContainerId>,
        first_new: ContainerId,
        threshold: f64,
    ) -> Arc<Self> {
        Arc::new(HarState {
            inherited,
            first_new,
            threshold,
            used: Mutex::new(HashMap::new()),
        })
    }

    /// Step 2: this backup's sparse containers, in id order: those older
    /// than it that it referenced below the threshold of their size. A
    /// container's size is `container_size`, or what `data_bytes` says its
    /// data chunks hold where that is less (a backup's last container is
    /// sealed part full, and is not sparse for being short); `data_bytes`
    /// is asked only of the containers below the threshold of
    /// `container_size`, and may not know (`None`).
    pub fn sparse(
        &self,
        container_size: u64,
        data_bytes: &dyn Fn(ContainerId) -> Option<u64>,
    ) -> Vec<ContainerId> {
        let below = |bytes: u64, size: u64| (bytes as f64) < self.threshold * size as f64;
        let mut out: Vec<ContainerId> = self
            .used
            .lock()
            .iter()
            .filter(|(c, &bytes)| **c < self.first_new && below(bytes, container_size))
            .filter(|(c, &bytes)| {
                let size = data_bytes(**c).map_or(container_size, |d| d.min(container_size));
                below(bytes, size)
            })
            .map(|(c, _)| *c)
            .collect();
        out.sort_unstable();
        out
    }
}

/// HAR in front of another scheme (or alone), for one stream.
pub struct Har {
    state: Arc<HarState>,
    inner: Option<Box<dyn RewritePolicy>>,
    /// Duplicates in old containers the inner scheme holds: where each is
    /// and its size, counted once it is released in place.
    pending: HashMap<u64, (ContainerId, u64)>,
    /// This stream's in-place references, by container.
    used: HashMap<ContainerId, u64>,
    scratch: Vec<Action>,
}

impl Har {
    pub fn new(state: Arc<HarState>, inner: Option<Box<dyn RewritePolicy>>) -> Self {
        Har {
            state,
            inner,
            pending: HashMap::new(),
            used: HashMap::new(),
            scratch: Vec::new(),
        }
    }

    /// Passes the inner scheme's decisions on, counting what it released
    /// in place.
    fn pass_on(&mut self, out: &mut Vec<Action>) {
        for a in self.scratch.drain(..) {
            match a {
                Action::Release(seq) => {
                    if let Some((c, size)) = self.pending.remove(&seq) {
                        *self.used.entry(c).or_default() += size;
                    }
                }
                Action::Rewrite(seq) => {
                    self.pending.remove(&seq);
                }
            }
            out.push(a);
        }
    }
}

impl RewritePolicy for Har {
    fn container_opened(&mut self, id: ContainerId) {
        if let Some(inner) = self.inner.as_mut() {
            inner.container_opened(id);
        }
    }

    fn push(
        &mut self,
        seq: u64,
        fp: Fingerprint,
        size: u64,
        loc: Location,
        out: &mut Vec<Action>,
    ) -> bool {
        let old = match loc {
            Location::Stored(c) => Some(c),
            _ => None,
        };
        // Step 3: a duplicate in an inherited sparse container is stored
        // again (the snapshot's `rewritten_data_chunks` counts it).
        if old.is_some_and(|c| self.state.inherited.contains(&c)) {
            out.push(Action::Rewrite(seq));
            return true;
        }
        let hold = match self.inner.as_mut() {
            Some(inner) => inner.push(seq, fp, size, loc, &mut self.scratch),
            None => false,
        };
        // Step 1: what is referenced in place counts toward its container.
        if let Some(c) = old {
            if hold {
                self.pending.insert(seq, (c, size));
            } else {
                *self.used.entry(c).or_default() += size;
            }
        }
        self.pass_on(out);
        hold
    }

    fn finish(&mut self, out: &mut Vec<Action>) {
        if let Some(inner) = self.inner.as_mut() {
            inner.finish(&mut self.scratch);
        }
        self.pass_on(out);
        let mut used = self.state.used.lock();
        for (c, bytes) in self.used.drain() {
            *used.entry(c).or_default() += bytes;
        }
    }
}

/// The stored form of a backup's sparse containers: an envelope (magic
/// `CAIRNHAR`, version 1) around their ids, each a little-endian u64, in
/// ascending order.
pub fn encode(sparse: &[ContainerId]) -> Vec<u8> {
    seal_ids(&MAGIC, VERSION, sparse.iter().map(|c| c.0))
}

pub fn decode(bytes: &[u8]) -> Result<HashSet<ContainerId>> {
    Ok(open_ids(&MAGIC, VERSION, "HAR sparse containers", bytes)?
        .into_iter()
        .map(ContainerId)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(k: u8) -> Fingerprint {
        Fingerprint::from_slice(&[k; 32])
    }

    #[test]
    fn golden_bytes() {
        let b = encode(&[ContainerId(0x0102), ContainerId(0x0304)]);
        // magic | version u32 | payload length u64 | ids u64 | CRC-32C
        let golden: [u8; 40] = [
            0x43, 0x41, 0x49, 0x52, 0x4e, 0x48, 0x41, 0x52, 0x01, 0x00, 0x00, 0x00, 0x10, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x04, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x63, 0x3d, 0x9b, 0xec,
        ];
        assert_eq!(b, golden);
    }

    #[test]
    fn duplicates_in_inherited_sparse_containers_are_rewritten_and_the_rest_counted() {
        let inherited: HashSet<ContainerId> = [ContainerId(3)].into_iter().collect();
        let state = HarState::new(inherited, ContainerId(100), 0.5);
        let mut har = Har::new(state.clone(), None);
        let mut out = Vec::new();
        // In a sparse container: rewritten at once.
        assert!(har.push(0, fp(0), 1000, Location::Stored(ContainerId(3)), &mut out));
        assert_eq!(out, [Action::Rewrite(0)]);
        out.clear();
        // Elsewhere: referenced in place, counted.
        assert!(!har.push(1, fp(1), 3000, Location::Stored(ContainerId(5)), &mut out));
        assert!(!har.push(2, fp(2), 900, Location::Stored(ContainerId(6)), &mut out));
        assert!(!har.push(3, fp(3), 900, Location::Stored(ContainerId(6)), &mut out));
        assert!(!har.push(4, fp(4), 500, Location::New, &mut out));
        // A container this backup wrote never counts as sparse.
        assert!(!har.push(5, fp(5), 10, Location::Stored(ContainerId(120)), &mut out));
        assert!(out.is_empty());
        har.finish(&mut out);
        // 4000-byte containers: 5 holds 3000 (75%), 6 holds 1800 (45%).
        let unknown = |_: ContainerId| None;
        assert_eq!(state.sparse(4000, &unknown), [ContainerId(6)]);
        // Container 6 sealed with 3000 bytes of data: 60% used, not sparse.
        let short = |c: ContainerId| (c == ContainerId(6)).then_some(3000);
        assert!(state.sparse(4000, &short).is_empty());
        let bytes = encode(&state.sparse(4000, &unknown));
        assert_eq!(
            decode(&bytes).unwrap(),
            [ContainerId(6)].into_iter().collect()
        );
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
    }
}
