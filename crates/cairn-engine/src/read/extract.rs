//! Extraction: serves each plan step's chunk, from memory when the policy
//! holds it, else from the container the policy has read for it, and
//! mirrors the policy's memory ([`Change`]s) with the decoded, verified
//! chunks. Every chunk is verified against its fingerprint when it is
//! decoded (a damaged container is detected at the chunk it damages).
//!
//! The policy decides over container *metadata* (which chunks a read
//! yields), so its decisions never wait for data; what it decides to read
//! is then fetched (`fetch.rs`: the whole container, or only the ranges it
//! uses). For plans long enough to pay for threads, three stages run at
//! once:
//!
//! ```text
//! decider (1 thread)     runs the policy over the plan; for a miss, reads
//!                        the container's metadata section and hands the
//!                        fetch to the pool, the step to the sink
//! fetchers (N threads)   read and decode the fetches, in any order
//! sink (caller's thread) takes the steps in plan order, waits for each
//!                        step's fetch, writes, mirrors the held chunks
//! ```
//!
//! `N` is the store's read parallelism (1 on a local disk, `--s3-downloads`
//! on S3), and at most `2 N` fetches are outstanding (started and not yet
//! consumed), so memory stays the policy's plus `2 N` containers' wanted
//! chunks. The decisions, and so the container reads, are those of the
//! sequential path, which short plans take; only their timing overlaps.

use cairn_core::{Error, Fingerprint, FpMap, Result};

use super::cache::ChunkStore;
use super::fetch::{Fetch, Fetched, Metas};
use super::policy::{Change, ContainerChunk, PlanStep, PolicyKind, PolicyRun, PolicyStats};
use crate::pipe;

/// Steps the decider may run ahead of the sink.
const AHEAD: usize = 4096;
/// Plans shorter than this are extracted on the caller's thread.
const PIPELINE_MIN_STEPS: usize = 256;
/// Metadata sections the decider keeps (a few MiB at most).
const DECIDER_METAS: usize = 64;

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

/// What the decider made of one step.
enum Decision {
    /// Served from the held chunks; then these drops.
    Hit(Vec<Fingerprint>),
    /// A container is read for the step: the changes made before the read
    /// (drops), the fetch, and the policy's changes after it, whose keeps
    /// are the fetch's wanted chunks after the first, in order.
    Read(Vec<Fingerprint>, Fetch, Vec<Change>),
    /// The step's container could not be found or its metadata read.
    Fail(Error),
}

/// A decided step on its way to the sink.
enum Item {
    Hit(Vec<Fingerprint>),
    Read(Vec<Fingerprint>, Pending, Vec<Change>),
    Fail(Error),
}

/// A fetch's outcome: done on this thread, or coming from a fetcher.
enum Pending {
    Done(Fetched),
    Later(pipe::Receiver<Fetched>),
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
        let mut metas = Metas::new(DECIDER_METAS);
        if plan.len() < PIPELINE_MIN_STEPS {
            let mut chunks = Vec::new();
            for pos in 0..plan.len() {
                let item = match decide(&mut self.run, store, &mut metas, pos, plan, &mut chunks) {
                    Decision::Hit(a) => Item::Hit(a),
                    Decision::Read(before, fetch, changes) => {
                        Item::Read(before, Pending::Done(fetch.run(store)), changes)
                    }
                    Decision::Fail(e) => Item::Fail(e),
                };
                consume(&mut self.held, &plan[pos], item, sink)?;
            }
            return Ok(());
        }
        let fetchers = store.log.read_parallelism().max(1);
        let (run, held) = (&mut self.run, &mut self.held);
        std::thread::scope(|s| {
            let (tx, rx) = pipe::bounded::<Item>(AHEAD);
            let (jobs_tx, jobs_rx) = pipe::bounded::<(Fetch, pipe::Sender<Fetched>)>(AHEAD);
            // A token per fetch started and not yet consumed.
            let (tokens_tx, tokens_rx) = pipe::bounded::<()>(2 * fetchers);
            for _ in 0..fetchers {
                let jobs = jobs_rx.clone();
                s.spawn(move || {
                    for (fetch, done) in jobs.iter() {
                        // The sink may have given up: nobody waits then.
                        let _ = done.send(fetch.run(store));
                    }
                });
            }
            drop(jobs_rx);
            s.spawn(move || {
                let mut chunks = Vec::new();
                for pos in 0..plan.len() {
                    let item = match decide(run, store, &mut metas, pos, plan, &mut chunks) {
                        Decision::Hit(a) => Item::Hit(a),
                        Decision::Read(before, fetch, changes) => {
                            let (done_tx, done_rx) = pipe::bounded(1);
                            // Every send fails once the sink is gone.
                            if tokens_tx.send(()).is_err()
                                || jobs_tx.send((fetch, done_tx)).is_err()
                            {
                                return;
                            }
                            Item::Read(before, Pending::Later(done_rx), changes)
                        }
                        Decision::Fail(e) => Item::Fail(e),
                    };
                    let stop = matches!(item, Item::Fail(_));
                    // The sink gave up (its receiver is gone), or this step failed.
                    if tx.send(item).is_err() || stop {
                        return;
                    }
                }
            });
            let stopped = || Error::invalid("restore: the container reader stopped early");
            for step in plan {
                let item = match rx.recv().map_err(|_| stopped())? {
                    Item::Read(before, Pending::Later(done), changes) => {
                        let fetched = done.recv().map_err(|_| stopped())?;
                        let _ = tokens_rx.recv();
                        Item::Read(before, Pending::Done(fetched), changes)
                    }
                    other => other,
                };
                consume(held, step, item, sink)?;
            }
            Ok(())
        })
    }
}

/// The policy's drops so far (no keeps: nothing was read).
fn drops(run: &mut PolicyRun) -> Vec<Fingerprint> {
    run.changes()
        .map(|c| match c {
            Change::Drop(fp) => fp,
            Change::Keep(_) => unreachable!("only a read keeps chunks"),
        })
        .collect()
}

fn apply(held: &mut FpMap<Held>, drops: Vec<Fingerprint>) {
    for fp in drops {
        held.remove(&fp);
    }
}

/// Serves one step from `item` to `sink`, then applies its changes.
fn consume(
    held: &mut FpMap<Held>,
    step: &PlanStep,
    item: Item,
    sink: &mut dyn FnMut(&PlanStep, &[u8]) -> Result<()>,
) -> Result<()> {
    match item {
        Item::Hit(changes) => {
            match held.get(&step.fp).expect("memory mirrors the policy") {
                Held::Bytes(b) => sink(step, b)?,
                Held::Damaged(why) => {
                    return Err(Error::corrupt(format!("chunk {}", step.fp), why.clone()))
                }
            }
            apply(held, changes);
        }
        Item::Read(before, Pending::Done(fetched), changes) => {
            let mut got = fetched.into_iter();
            let step_bytes = got.next().expect("the step's chunk is fetched first");
            sink(step, &step_bytes?)?;
            apply(held, before);
            for c in changes {
                match c {
                    Change::Drop(fp) => {
                        held.remove(&fp);
                    }
                    Change::Keep(fp) => {
                        let h = match got.next().expect("one fetched chunk per keep") {
                            Ok(b) => Held::Bytes(b),
                            Err(e) => Held::Damaged(e.to_string()),
                        };
                        held.insert(fp, h);
                    }
                }
            }
        }
        Item::Read(_, Pending::Later(_), _) => unreachable!("the sink waits for fetches"),
        Item::Fail(e) => return Err(e),
    }
    Ok(())
}

/// The policy's decision for step `pos`: served from memory, or the
/// container to read (located, its metadata read) and what to fetch of it.
fn decide(
    run: &mut PolicyRun,
    store: &ChunkStore,
    metas: &mut Metas,
    pos: usize,
    plan: &[PlanStep],
    chunks: &mut Vec<ContainerChunk>,
) -> Decision {
    let step = plan[pos];
    if run.serve(pos, plan) {
        return Decision::Hit(drops(run));
    }
    let before = drops(run);
    metas.look_ahead(store, plan, pos);
    let (known, at) = match metas.locate(store, &step.fp) {
        Ok(found) => found,
        Err(e) => return Decision::Fail(e),
    };
    let meta = &known.meta;
    ContainerChunk::of_container(meta, chunks);
    run.read(pos, plan, meta.id, meta.file_size, chunks);
    let changes: Vec<Change> = run.changes().collect();
    let mut wanted = vec![at];
    wanted.extend(changes.iter().filter_map(|c| {
        match c {
            Change::Keep(fp) => Some(
                known
                    .position(fp)
                    .expect("policies keep chunks of the read"),
            ),
            Change::Drop(_) => None,
        }
    }));
    Decision::Read(before, Fetch { known, wanted }, changes)
}
