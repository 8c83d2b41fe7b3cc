//! Eager lookup: accelerated segment filtering, DDFS
//! (`001_3652cceaf162c5a1.txt`) §4.4, in the paper's order, for every
//! incoming chunk, decided at once:
//!
//! 1. Look the fingerprint up in the segment cache (Locality Preserved Cache).
//!    A hit means duplicate.
//! 2. On a miss, test the Summary Vector. Not in it means new: the chunk is
//!    written into the stream's current container.
//! 3. Otherwise look the fingerprint up in the segment index (its in-memory
//!    part, then one on-disk page). Found means duplicate, and the whole
//!    metadata section of that container is inserted into the cache (LRU by
//!    container, evicting first when full). Not found means new.
//!
//! With the frugal index kind, step 2 is the cuckoo table inside step 3.
//! Every hit is confirmed against the container (see `Dedup::confirm`).

use cairn_core::counters::bump;
use cairn_core::{Fingerprint, Result};

use super::strategy::{Decision, LookupStrategy};
use super::{Dedup, Location, Session};

/// How one fingerprint is decided at once: eager lookup's steps 1-3
/// ([`resolve_one`]) or deferred dedup's (`deferred::resolve`).
pub type Resolver = fn(&mut Session<'_>, &Fingerprint) -> Result<Location>;

/// A strategy that decides every fingerprint as it is submitted (nothing
/// buffered), by its resolver.
pub struct Eager {
    next_rank: u64,
    resolve: Resolver,
}

impl Eager {
    pub fn with(resolve: Resolver) -> Self {
        Eager {
            next_rank: 0,
            resolve,
        }
    }
}

impl Default for Eager {
    /// Eager lookup (DDFS §4.4).
    fn default() -> Self {
        Eager::with(resolve_one)
    }
}

/// Steps 1-3 for one fingerprint; a new one joins the in-memory part (in
/// flight), so a repeat later in the batch or in another stream is a
/// duplicate.
fn resolve_one(s: &mut Session<'_>, fp: &Fingerprint) -> Result<Location> {
    bump(&s.counters().lookups, 1);
    // Step 1: segment cache.
    if let Some(id) = s.cache_probe(fp) {
        bump(&s.counters().cache_hits, 1);
        return Ok(Location::Stored(id));
    }
    // Step 2: Summary Vector.
    let found = if s.certainly_new(fp) {
        None
    } else {
        // Step 3: the in-memory part first, then the index kind.
        match s.in_memory(fp)? {
            Some(found) => Some(found),
            None => s.index_lookup(fp)?,
        }
    };
    let loc = match found {
        Some(loc) if !loc.is_new() => {
            bump(&s.counters().index_hits, 1);
            loc
        }
        // Not indexed, or indexed in a container that lost it.
        _ => Location::New,
    };
    if loc.is_new() {
        s.decide_new(fp);
    }
    Ok(loc)
}

impl LookupStrategy for Eager {
    fn next_rank(&self) -> u64 {
        self.next_rank
    }

    fn submit(
        &mut self,
        dedup: &Dedup,
        fps: &[Fingerprint],
        out: &mut Vec<Decision>,
    ) -> Result<()> {
        out.clear();
        let mut s = dedup.session();
        for fp in fps {
            out.push(Decision::Decided((self.resolve)(&mut s, fp)?));
        }
        self.next_rank += fps.len() as u64;
        Ok(())
    }

    fn flush(&mut self, _dedup: &Dedup) -> Result<()> {
        Ok(())
    }

    fn take_resolved(&mut self) -> Vec<(u64, Location)> {
        Vec::new()
    }

    fn buffered(&self) -> usize {
        0
    }
}
