//! Re-layout of a simulated repository (`cairn sim --relayout`, issue
//! 34): the selection of `relayout.rs` and the ordered write of the
//! collector's copy, over a store that keeps containers'
//! descriptions only (`meta_store.rs`). What is moved is descriptors: each
//! moved chunk is recorded in a new container at its sizes
//! (`ContainerWriter::push_absent`), the index names the new container,
//! and the cleaned containers go, so that the simulator's later backups
//! and restores see the layout a real collection would leave.
//!
//! The simulator keeps every snapshot, so nothing is dead but the older
//! copies of chunks stored more than once (rewriting, concurrent writers):
//! a container's live chunks are those whose newest copy it holds
//! (`crate::canonical`), as PGC+'s dynamic duplicate removal leaves them.
//! The heads' order is given by the caller (the newest generation's chunk
//! sequence): a described store has no recipes to walk.

use std::collections::HashSet;

use cairn_core::{ChunkKind, ContainerId, Error, FpMap, Result};
use cairn_format::container::{ContainerMeta, ContainerWriter};
use cairn_format::index::IndexEntry;

use super::ordered_copy::{Layout, RegionBreaks};
use super::relayout::{choose, RelayoutOptions, RelayoutReport, Usage};
use super::sweep::Tally;
use crate::index::overlay::IndexUpdate;
use crate::repo::Repository;

/// Re-lays out `repo` (a described store) for heads whose chunks come in
/// the order `order` gives: the sparse containers within the budget are
/// cleaned, their live chunks written in that order into new containers,
/// the index moved, the old containers deleted. Takes the writer lock.
pub fn relayout_described(
    repo: &Repository,
    order: &FpMap<u64>,
    ro: RelayoutOptions,
) -> Result<RelayoutReport> {
    let started = std::time::Instant::now();
    let log = &*repo.log;
    if !log.describes_only() {
        return Err(Error::invalid(
            "re-layout by descriptors is for simulated repositories; a collection re-lays out a real one",
        ));
    }
    let lock = repo.lock_writer(false)?;
    let ids = log.ids()?;
    let mut metas: Vec<ContainerMeta> = Vec::with_capacity(ids.len());
    let mut place: FpMap<ContainerId> = FpMap::default();
    for &id in &ids {
        let meta = log.read_meta(id)?;
        for d in &meta.descriptors {
            crate::canonical::place(&mut place, d.fp, id);
        }
        metas.push(meta);
    }
    let mut usages = Vec::with_capacity(metas.len());
    let mut tallies = Vec::with_capacity(metas.len());
    for meta in &metas {
        let mut u = Usage {
            id: meta.id,
            used: 0,
            data: 0,
        };
        let mut t = Tally {
            chunks: meta.descriptors.len() as u64,
            file_bytes: meta.file_size,
            judged: meta.descriptors.len() as u64,
            ..Tally::new(meta.id)
        };
        for d in &meta.descriptors {
            // The order names data chunks only (a trace has no recipes):
            // usage is of data, or every container holding recipe nodes
            // would look used in part.
            if d.kind == ChunkKind::Data {
                u.data += u64::from(d.raw_len);
                if order.contains_key(&d.fp) {
                    u.used += u64::from(d.raw_len);
                }
            }
            t.stored_bytes += u64::from(d.stored_len);
            if place.get(&d.fp) == Some(&meta.id) {
                t.live += 1.0;
                t.live_stored += f64::from(d.stored_len);
            }
        }
        t.judged_stored = t.stored_bytes;
        t.all_dead = t.live == 0.0;
        usages.push(u);
        tallies.push(t);
    }
    let heads_bytes: u64 = usages.iter().map(|u| u.used).sum();
    let budget = ro.budget(0, heads_bytes, u64::from(repo.config.container_size));
    let (chosen, bytes, sparse) =
        choose(&usages, &tallies, &HashSet::new(), ro.utilization, budget);
    let mut report = RelayoutReport {
        head_snapshots: 1,
        head_chunks: order.len() as u64,
        sparse_containers: sparse,
        chosen_containers: chosen.len() as u64,
        chosen_live_bytes: bytes,
        budget_bytes: budget,
        ..Default::default()
    };
    if chosen.is_empty() {
        report.seconds = started.elapsed().as_secs_f64();
        return Ok(report);
    }

    // Plan: the chosen containers' live chunks, newest container first
    // (PGC+'s scan), keyed by the heads' order as the collector's ordered
    // copy keys them.
    let mut layout = Layout::new(order);
    for meta in metas.iter().rev() {
        if chosen.binary_search(&meta.id).is_err() {
            continue;
        }
        for d in &meta.descriptors {
            if place.get(&d.fp) == Some(&meta.id) {
                layout.push(meta.id, d);
            }
        }
    }
    report.ordered_chunks = layout.ordered;
    let mut plan = layout.chunks;
    plan.sort_by_key(|p| p.key);

    // Write: new containers at the chunks' sizes.
    let capacity = repo.config.container_size as usize;
    let fp_width = repo.config.fp_width();
    let mut moves: Vec<IndexEntry> = Vec::with_capacity(plan.len());
    let mut open: Option<ContainerWriter> = None;
    let mut breaks = RegionBreaks::new(order.len() as u64, &metas);
    for p in &plan {
        let d = &p.d;
        let open_bytes = open.as_ref().map_or(0, ContainerWriter::encoded_len);
        let far = breaks.breaks(p.key, open_bytes, capacity);
        if open
            .as_ref()
            .is_some_and(|w| !w.is_empty() && (!w.would_fit(d.stored_len as usize) || far))
        {
            log.append(open.take().expect("open container"))?;
        }
        let w = match &mut open {
            Some(w) => w,
            None => open.insert(ContainerWriter::new(log.allocate()?, fp_width, capacity)),
        };
        w.push_absent(d.fp, d.kind, d.level, d.codec, d.raw_len, d.stored_len);
        moves.push(IndexEntry {
            fp: d.fp,
            container: w.id(),
        });
    }
    if let Some(w) = open.take() {
        log.append(w)?;
    }

    // The index names the copies (a put of a newer container wins), then
    // the originals go.
    moves.sort_by_key(|e| e.fp);
    let mut opened = repo.open_index(&lock, &Default::default())?;
    opened.kind.commit(
        &**repo.backend(),
        IndexUpdate::puts(moves),
        log.next_id(),
        fp_width,
        repo.config.index.page_size as usize,
    )?;
    log.delete_many(&chosen)?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}
