//! Lazy fingerprint lookup, `000_d04706aa48332137.txt` §2.3 Algorithm 2 and
//! Fig. 4 (after Ma et al., "Lazy exact deduplication"), for one stream:
//!
//! 1. **Bloom filter.** Every fingerprint gets a rank (its arrival order in
//!    the stream, Fig. 3), Bloom negatives included. A Bloom negative is new
//!    and is decided at once.
//! 2. **Locality ring.** A Bloom positive joins the current locality ring; a
//!    ring holding `ring_size` fingerprints is closed and a new one begun.
//! 3. **Pre-lookup** in the cache (temporal locality). A hit is a duplicate.
//! 4. **Buffer bucket.** A miss waits in the buffer bucket of the on-disk
//!    index page it belongs to. When a bucket holds `bucket_threshold`
//!    fingerprints, one page read resolves all of them: absent means new,
//!    present means duplicate.
//! 5. **Prefetch and post-lookup.** A fingerprint found on disk loads its
//!    container's metadata section into the cache, then every other buffered
//!    fingerprint of the same locality ring is looked up in the cache again
//!    (spatial locality); hits are duplicates and leave their buckets.
//!
//! cairn additions, none of which changes an answer: the in-memory part of
//! the index (this backup's chunks, DDFS §3.2) is consulted after the
//! pre-lookup like a disk hit without the read; with no on-disk index there
//! is no page to batch for, so a miss is decided at once; a stream holds at
//! most `buffer_fingerprints` buffered fingerprints (their chunk contents
//! wait in memory), beyond which the bucket of the oldest is read early; and
//! the end of the stream reads every remaining bucket.
//!
//! Exactness: a fingerprint is new exactly when no earlier occurrence was
//! stored, as with eager lookup. Every occurrence of one fingerprint falls
//! in the same bucket and a bucket is resolved in rank order, so the first
//! buffered occurrence is decided new (joining the in-memory part) and the
//! later ones find it there. Lazy lookup changes when a chunk is decided,
//! never what is decided.

use std::collections::{HashMap, VecDeque};

use cairn_core::counters::bump;
use cairn_core::{Fingerprint, Result};

use super::strategy::{Decision, LookupStrategy};
use super::{Dedup, Location, Session};
use crate::config::LookupConfig;

/// A buffered fingerprint.
struct Waiting {
    fp: Fingerprint,
    ring: u64,
    page: u64,
}

/// A locality ring: ranks of the Bloom positives that joined it, in order.
struct Ring {
    members: Vec<u64>,
    /// Members still buffered.
    waiting: usize,
}

/// Lazy lookup's per-stream state: buffer buckets, locality rings, ranks.
pub struct LazyBuffer {
    bucket_threshold: usize,
    ring_size: usize,
    capacity: usize,
    next_rank: u64,
    waiting: HashMap<u64, Waiting>,
    /// Index page -> ranks buffered for it, in rank order.
    buckets: HashMap<u64, Vec<u64>>,
    /// Buffered ranks, oldest first (entries already resolved are skipped).
    arrival: VecDeque<u64>,
    rings: VecDeque<Ring>,
    /// Id of `rings[0]`; ring ids grow by one per ring.
    first_ring: u64,
    resolved: Vec<(u64, Location)>,
}

impl LazyBuffer {
    pub fn new(cfg: &LookupConfig) -> Self {
        LazyBuffer {
            bucket_threshold: cfg.bucket_threshold.max(1) as usize,
            ring_size: cfg.ring_size.max(1) as usize,
            capacity: cfg.buffer_fingerprints.max(1) as usize,
            next_rank: 0,
            waiting: HashMap::new(),
            buckets: HashMap::new(),
            arrival: VecDeque::new(),
            rings: VecDeque::new(),
            first_ring: 0,
            resolved: Vec::new(),
        }
    }

    fn submit_one(&mut self, s: &mut Session<'_>, fp: &Fingerprint) -> Result<Decision> {
        let rank = self.next_rank;
        self.next_rank += 1;
        bump(&s.counters().lookups, 1);
        // Step 1: Bloom filter (the rank is taken even by a negative).
        if s.certainly_new(fp) {
            s.decide_new(fp);
            return Ok(Decision::Decided(Location::New));
        }
        // Step 2: the locality ring.
        let ring = self.join_ring(rank);
        // Step 3: pre-lookup.
        if let Some(id) = s.cache_probe(fp) {
            bump(&s.counters().cache_hits, 1);
            return Ok(Decision::Decided(Location::Stored(id)));
        }
        match s.in_memory(fp)? {
            Some(Location::New) => {
                // Indexed in a container that lost it: stored again.
                s.decide_new(fp);
                return Ok(Decision::Decided(Location::New));
            }
            Some(loc @ Location::Stored(_)) => {
                bump(&s.counters().index_hits, 1);
                self.post_lookup(s, ring);
                return Ok(Decision::Decided(loc));
            }
            Some(Location::InFlight) => {
                bump(&s.counters().index_hits, 1);
                return Ok(Decision::Decided(Location::InFlight));
            }
            None => {}
        }
        // Step 4: the buffer bucket of fp's index page.
        let Some(page) = s.page_of(fp) else {
            s.note_false_positive();
            s.decide_new(fp);
            return Ok(Decision::Decided(Location::New));
        };
        self.waiting.insert(
            rank,
            Waiting {
                fp: *fp,
                ring,
                page,
            },
        );
        self.ring_mut(ring).waiting += 1;
        self.arrival.push_back(rank);
        let bucket = self.buckets.entry(page).or_default();
        bucket.push(rank);
        if bucket.len() >= self.bucket_threshold {
            self.resolve_bucket(s, page)?;
        }
        // The buffer is full: read the oldest buffered fingerprint's bucket.
        while self.waiting.len() > self.capacity {
            let Some(oldest) = self.arrival.pop_front() else {
                break;
            };
            if let Some(w) = self.waiting.get(&oldest) {
                let page = w.page;
                self.resolve_bucket(s, page)?;
            }
        }
        Ok(Decision::Pending(rank))
    }

    /// Adds a Bloom positive to the current ring, opening a new one when it
    /// holds `ring_size` fingerprints. Returns the ring's id.
    fn join_ring(&mut self, rank: u64) -> u64 {
        if self
            .rings
            .back()
            .is_none_or(|r| r.members.len() >= self.ring_size)
        {
            self.rings.push_back(Ring {
                members: Vec::with_capacity(self.ring_size.min(4096)),
                waiting: 0,
            });
            self.drop_settled_rings();
        }
        self.rings.back_mut().expect("a ring").members.push(rank);
        self.first_ring + self.rings.len() as u64 - 1
    }

    fn ring_mut(&mut self, id: u64) -> &mut Ring {
        &mut self.rings[(id - self.first_ring) as usize]
    }

    /// Forgets closed rings at the front with nothing buffered.
    fn drop_settled_rings(&mut self) {
        while self.rings.len() > 1 && self.rings[0].waiting == 0 {
            self.rings.pop_front();
            self.first_ring += 1;
        }
    }

    /// Steps 4-5 for one bucket: one read of its index page decides every
    /// fingerprint in it, in rank order.
    fn resolve_bucket(&mut self, s: &mut Session<'_>, page: u64) -> Result<()> {
        let Some(ranks) = self.buckets.remove(&page) else {
            return Ok(());
        };
        // Fingerprints the in-memory part cannot answer go to the disk, all
        // in one read (a repeated fingerprint is asked once).
        let mut ask: Vec<Fingerprint> = Vec::new();
        for r in &ranks {
            let fp = self.waiting[r].fp;
            if !s.known_in_memory(&fp) && !ask.contains(&fp) {
                ask.push(fp);
            }
        }
        let on_disk = if ask.is_empty() {
            Vec::new()
        } else {
            s.lookup_page(&ask)?
        };
        for r in ranks {
            // A post-lookup earlier in this loop may have settled it.
            let Some(w) = self.waiting.get(&r) else {
                continue;
            };
            let (fp, ring) = (w.fp, w.ring);
            bump(&s.counters().lazy_disk_resolved, 1);
            let found = match s.in_memory(&fp)? {
                Some(loc) => Some(loc),
                None => {
                    let i = ask.iter().position(|a| *a == fp).expect("asked");
                    match on_disk[i] {
                        Some(id) => Some(s.confirmed(id, &fp)?),
                        None => None,
                    }
                }
            };
            match found {
                Some(loc) if !loc.is_new() => {
                    bump(&s.counters().index_hits, 1);
                    self.settle(r, loc);
                    if loc.container().is_some() {
                        self.post_lookup(s, ring);
                    }
                }
                // Indexed in a container that lost it: stored again.
                Some(_) => {
                    s.decide_new(&fp);
                    self.settle(r, Location::New);
                }
                None => {
                    s.note_false_positive();
                    s.decide_new(&fp);
                    self.settle(r, Location::New);
                }
            }
        }
        Ok(())
    }

    /// Step 5: looks every still-buffered fingerprint of ring `id` up in the
    /// cache again; hits are duplicates and leave their buckets.
    fn post_lookup(&mut self, s: &mut Session<'_>, id: u64) {
        if !s.uses_cache() || id < self.first_ring {
            return;
        }
        let idx = (id - self.first_ring) as usize;
        bump(
            &s.counters().post_lookup_visits,
            self.rings[idx].members.len() as u64,
        );
        if self.rings[idx].waiting == 0 {
            return;
        }
        let members = std::mem::take(&mut self.rings[idx].members);
        for &r in &members {
            let Some(w) = self.waiting.get(&r) else {
                continue;
            };
            bump(&s.counters().post_lookup_probes, 1);
            if let Some(container) = s.cache_recheck(&w.fp) {
                bump(&s.counters().post_lookup_hits, 1);
                let page = w.page;
                if let Some(b) = self.buckets.get_mut(&page) {
                    b.retain(|&x| x != r);
                    if b.is_empty() {
                        self.buckets.remove(&page);
                    }
                }
                self.settle(r, Location::Stored(container));
            }
        }
        self.rings[idx].members = members;
    }

    /// Records the decision for buffered rank `r`.
    fn settle(&mut self, r: u64, loc: Location) {
        if let Some(w) = self.waiting.remove(&r) {
            if let Some(ring) = w
                .ring
                .checked_sub(self.first_ring)
                .and_then(|i| self.rings.get_mut(i as usize))
            {
                ring.waiting -= 1;
            }
            self.resolved.push((r, loc));
        }
    }
}

impl LookupStrategy for LazyBuffer {
    fn next_rank(&self) -> u64 {
        self.next_rank
    }

    /// Runs `fps` (ranks `next_rank()..`) through Algorithm 2.
    fn submit(
        &mut self,
        dedup: &Dedup,
        fps: &[Fingerprint],
        out: &mut Vec<Decision>,
    ) -> Result<()> {
        out.clear();
        let mut s = dedup.session();
        for fp in fps {
            let d = self.submit_one(&mut s, fp)?;
            out.push(d);
        }
        Ok(())
    }

    /// Resolves every buffered fingerprint (end of stream), in page order.
    fn flush(&mut self, dedup: &Dedup) -> Result<()> {
        let mut s = dedup.session();
        let mut pages: Vec<u64> = self.buckets.keys().copied().collect();
        pages.sort_unstable();
        for page in pages {
            self.resolve_bucket(&mut s, page)?;
        }
        debug_assert!(self.waiting.is_empty());
        self.arrival.clear();
        self.first_ring += self.rings.len() as u64;
        self.rings.clear();
        Ok(())
    }

    fn take_resolved(&mut self) -> Vec<(u64, Location)> {
        std::mem::take(&mut self.resolved)
    }

    fn buffered(&self) -> usize {
        self.waiting.len()
    }
}
