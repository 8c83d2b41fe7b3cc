//! Maintenance between simulated generations (issue 34): the product's
//! collection re-lays out the repository after each backup
//! (`cairn_engine::gc::relayout`, docs/restore-speed.md), so `cairn sim
//! --relayout` runs it on the simulated repository
//! (`cairn_engine::gc::relayout_described`) with the generation just
//! backed up as the newest snapshot. Its restore order is its trace's
//! chunk order: a described store has no recipes to walk.

use cairn_core::{FpMap, Result, TraceEvent};
use cairn_engine::gc::relayout::RelayoutOptions;
use cairn_engine::Repository;

use super::GenerationInput;

/// What one maintenance run moved.
#[derive(Debug, Default, Clone, Copy)]
pub struct Relaid {
    /// Chunks moved into the generation's order.
    pub chunks: u64,
    /// Live bytes (stored) of the containers cleaned.
    pub bytes: u64,
}

/// Re-lays out `repo` for generation `input` (just backed up).
pub fn relayout(repo: &Repository, input: &GenerationInput, ro: RelayoutOptions) -> Result<Relaid> {
    let (mut src, _) = input.open()?;
    let mut order: FpMap<u64> = FpMap::default();
    while let Some(ev) = src.next_event()? {
        if let TraceEvent::Chunk(c) = ev {
            let next = order.len() as u64;
            order.entry(c.fp).or_insert(next);
        }
    }
    let r = cairn_engine::gc::relayout_described(repo, &order, ro)?;
    Ok(Relaid {
        chunks: r.ordered_chunks,
        bytes: r.chosen_live_bytes,
    })
}
