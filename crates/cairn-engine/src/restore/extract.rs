//! Extraction: serves each plan step's chunk, from memory when the policy
//! holds it, else from the container the policy has read for it, and
//! mirrors the policy's memory ([`Change`]s) with the decoded, verified
//! chunks. Every chunk is verified against its fingerprint when it is
//! decoded (a damaged container is detected at the chunk it damages).
//!
//! Two stages, pipelined for plans long enough to pay for a thread: the
//! *decider* runs the policy over the plan, reads the containers it asks
//! for and decodes and verifies the chunks each read yields (in parallel,
//! rayon); the caller's thread hands each step's bytes to the sink (the
//! file write) and keeps the held chunks. A bounded channel between them
//! holds at most [`AHEAD`] steps, so memory stays the policy's plus a few
//! containers' chunks in flight; the decisions, and so the container reads,
//! are those of the sequential path, which short plans take.
//!
//! The index is derived data: when the container it names is gone, damaged
//! or lacks the chunk, the containers' own metadata decide where the chunk
//! is (`ChunkStore::locate_in_containers`), and the policy is told of the
//! container actually read.

use cairn_core::{Error, Fingerprint, FpMap, Result};
use rayon::prelude::*;

use super::cache::ChunkStore;
use super::policy::{Change, ContainerChunk, PlanStep, PolicyKind, PolicyRun, PolicyStats};
use crate::container_log::LoadedContainer;

/// Steps the decider may run ahead of the sink.
const AHEAD: usize = 4096;
/// Plans shorter than this are extracted on the caller's thread.
const PIPELINE_MIN_STEPS: usize = 256;

pub struct Extractor {
    run: PolicyRun,
    /// The chunks the policy holds, decoded and verified (or why not).
    held: FpMap<Held>,
}

enum Held {
    Bytes(Vec<u8>),
    /// Kept by the policy but failed to decode or verify: served as this error.
    Damaged(String),
}

/// A change to the held chunks, with a kept chunk's bytes decoded.
enum Applied {
    Drop(Fingerprint),
    Keep(Fingerprint, Held),
}

/// What the decider made of one step.
enum Item {
    /// Served from the held chunks; then these changes.
    Hit(Vec<Applied>),
    /// Read from a container: the step's bytes (or why not); then these.
    Read(Result<Vec<u8>>, Vec<Applied>),
    /// The step's container could not be found or read.
    Fail(Error),
}

/// The container read for a step, with its chunks' positions.
struct Read {
    c: LoadedContainer,
    pos: FpMap<usize>,
}

impl Read {
    fn new(c: LoadedContainer) -> Self {
        let pos = c
            .meta
            .descriptors
            .iter()
            .enumerate()
            .map(|(i, d)| (d.fp, i))
            .collect();
        Read { c, pos }
    }
}

impl Extractor {
    pub fn new(kind: PolicyKind, cache_bytes: u64, unit: u64) -> Self {
        Extractor {
            run: PolicyRun::new(kind, cache_bytes, unit),
            held: FpMap::default(),
        }
    }

    pub fn stats(&self) -> PolicyStats {
        self.run.stats()
    }

    /// Hands every step of `plan` with its verified bytes to `sink`, in
    /// order. The first error (a chunk that cannot be read, or the sink's)
    /// ends the plan; the policy then starts afresh, since the decider may
    /// have run ahead of the steps the held chunks mirror.
    pub fn extract(
        &mut self,
        store: &ChunkStore,
        plan: &[PlanStep],
        sink: &mut dyn FnMut(&PlanStep, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let r = self.extract_all(store, plan, sink);
        if r.is_err() {
            self.run.reset();
            self.held.clear();
        }
        r
    }

    fn extract_all(
        &mut self,
        store: &ChunkStore,
        plan: &[PlanStep],
        sink: &mut dyn FnMut(&PlanStep, &[u8]) -> Result<()>,
    ) -> Result<()> {
        self.run.begin(plan);
        let begun = drops(&mut self.run);
        apply(&mut self.held, begun);
        if plan.len() < PIPELINE_MIN_STEPS {
            let mut chunks = Vec::new();
            for pos in 0..plan.len() {
                let item = decide(&mut self.run, store, pos, plan, &mut chunks);
                consume(&mut self.held, &plan[pos], item, sink)?;
            }
            return Ok(());
        }
        let (run, held) = (&mut self.run, &mut self.held);
        std::thread::scope(|s| {
            let (tx, rx) = crate::pipe::bounded::<Item>(AHEAD);
            s.spawn(move || {
                let mut chunks = Vec::new();
                for pos in 0..plan.len() {
                    let item = decide(run, store, pos, plan, &mut chunks);
                    let stop = matches!(item, Item::Fail(_));
                    // The sink gave up (its receiver is gone), or this step failed.
                    if tx.send(item).is_err() || stop {
                        return;
                    }
                }
            });
            for step in plan {
                let item = rx
                    .recv()
                    .map_err(|_| Error::invalid("restore: the container reader stopped early"))?;
                consume(held, step, item, sink)?;
            }
            Ok(())
        })
    }
}

/// The policy's drops so far (no keeps: nothing was read).
fn drops(run: &mut PolicyRun) -> Vec<Applied> {
    run.changes()
        .map(|c| match c {
            Change::Drop(fp) => Applied::Drop(fp),
            Change::Keep(_) => unreachable!("only a read keeps chunks"),
        })
        .collect()
}

fn apply(held: &mut FpMap<Held>, changes: Vec<Applied>) {
    for a in changes {
        match a {
            Applied::Drop(fp) => {
                held.remove(&fp);
            }
            Applied::Keep(fp, h) => {
                held.insert(fp, h);
            }
        }
    }
}

/// Serves one step from `item` to `sink`, then applies its changes.
fn consume(
    held: &mut FpMap<Held>,
    step: &PlanStep,
    item: Item,
    sink: &mut dyn FnMut(&PlanStep, &[u8]) -> Result<()>,
) -> Result<()> {
    let changes = match item {
        Item::Hit(changes) => {
            match held.get(&step.fp).expect("memory mirrors the policy") {
                Held::Bytes(b) => sink(step, b)?,
                Held::Damaged(why) => {
                    return Err(Error::corrupt(format!("chunk {}", step.fp), why.clone()))
                }
            }
            changes
        }
        Item::Read(bytes, changes) => {
            sink(step, &bytes?)?;
            changes
        }
        Item::Fail(e) => return Err(e),
    };
    apply(held, changes);
    Ok(())
}

/// The policy's decision for step `pos`, with the container read and the
/// chunks it yields decoded and verified.
fn decide(
    run: &mut PolicyRun,
    store: &ChunkStore,
    pos: usize,
    plan: &[PlanStep],
    chunks: &mut Vec<ContainerChunk>,
) -> Item {
    let step = plan[pos];
    if run.serve(pos, plan) {
        return Item::Hit(drops(run));
    }
    let mut applied = drops(run);
    let read = match load(store, &step.fp) {
        Ok(r) => r,
        Err(e) => return Item::Fail(e),
    };
    chunks.clear();
    chunks.extend(
        read.c
            .meta
            .descriptors
            .iter()
            .filter(|d| d.kind == cairn_core::ChunkKind::Data)
            .map(|d| ContainerChunk {
                fp: d.fp,
                size: d.raw_len as u64,
            }),
    );
    run.read(pos, plan, read.c.meta.id, read.c.meta.file_size, chunks);
    let changes: Vec<Change> = run.changes().collect();
    // The step's chunk and every kept one, decoded and verified in parallel.
    let mut wanted: Vec<Fingerprint> = vec![step.fp];
    wanted.extend(changes.iter().filter_map(|c| match c {
        Change::Keep(fp) => Some(*fp),
        Change::Drop(_) => None,
    }));
    let mut decoded: Vec<Result<Vec<u8>>> = wanted
        .par_iter()
        .with_min_len(4)
        .map(|fp| {
            let d = &read.c.meta.descriptors[read.pos[fp]];
            let mut out = Vec::with_capacity(d.raw_len as usize);
            store.extract(&read.c, d, &mut out).map(|()| out)
        })
        .collect();
    let mut kept = decoded.split_off(1).into_iter();
    let step_bytes = decoded.pop().expect("the step's chunk");
    for c in changes {
        applied.push(match c {
            Change::Drop(fp) => Applied::Drop(fp),
            Change::Keep(fp) => Applied::Keep(
                fp,
                match kept.next().expect("one decode per keep") {
                    Ok(b) => Held::Bytes(b),
                    Err(e) => Held::Damaged(e.to_string()),
                },
            ),
        });
    }
    Item::Read(step_bytes, applied)
}

/// The container holding `fp`: the one the index names, or, when that one
/// is gone, damaged or lacks it, the one its metadata names.
fn load(store: &ChunkStore, fp: &Fingerprint) -> Result<Read> {
    let id = store.locate(fp)?;
    let first = store.log.read(id).map(Read::new);
    if let Ok(r) = &first {
        if r.pos.contains_key(fp) {
            return first;
        }
    }
    let Ok(other) = store.locate_in_containers(fp, Some(id)) else {
        first?;
        return Err(missing_here(fp));
    };
    let r = Read::new(store.log.read(other)?);
    if !r.pos.contains_key(fp) {
        return Err(missing_here(fp));
    }
    Ok(r)
}

fn missing_here(fp: &Fingerprint) -> Error {
    Error::corrupt(
        "repository",
        format!("index places chunk {fp} in a container that does not hold it"),
    )
}
