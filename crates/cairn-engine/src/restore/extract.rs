//! Extraction: serves each plan step's chunk, from memory when the policy
//! holds it, else from the container the policy has read for it, and
//! mirrors the policy's memory ([`Change`]s) with the decoded, verified
//! chunks. Every chunk is verified against its fingerprint when it is
//! decoded (a damaged container is detected at the chunk it damages).
//!
//! The index is derived data: when the container it names is gone, damaged
//! or lacks the chunk, the containers' own metadata decide where the chunk
//! is (`ChunkStore::locate_in_containers`), and the policy is told of the
//! container actually read.

use cairn_core::{Error, Fingerprint, FpMap, Result};

use super::cache::ChunkStore;
use super::policy::{Change, ContainerChunk, PlanStep, PolicyKind, PolicyRun, PolicyStats};
use crate::container_log::LoadedContainer;

pub struct Extractor {
    run: PolicyRun,
    /// The chunks the policy holds, decoded and verified (or why not).
    held: FpMap<Held>,
    chunks: Vec<ContainerChunk>,
}

enum Held {
    Bytes(Vec<u8>),
    /// Kept by the policy but failed to decode or verify: served as this error.
    Damaged(String),
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
            chunks: Vec::new(),
        }
    }

    pub fn stats(&self) -> PolicyStats {
        self.run.stats()
    }

    /// A new plan (the next file) starts.
    pub fn begin(&mut self, store: &ChunkStore, plan: &[PlanStep]) {
        self.run.begin(plan);
        self.apply(store, None);
    }

    /// Writes the verified raw bytes of step `pos`'s chunk into `out`.
    pub fn fetch(
        &mut self,
        store: &ChunkStore,
        pos: usize,
        plan: &[PlanStep],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let step = plan[pos];
        if self.run.serve(pos, plan) {
            out.clear();
            let r = match self.held.get(&step.fp).expect("memory mirrors the policy") {
                Held::Bytes(b) => {
                    out.extend_from_slice(b);
                    Ok(())
                }
                Held::Damaged(why) => {
                    Err(Error::corrupt(format!("chunk {}", step.fp), why.clone()))
                }
            };
            self.apply(store, None);
            return r;
        }
        self.apply(store, None);
        let read = self.load(store, &step.fp)?;
        self.chunks.clear();
        self.chunks.extend(
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
        self.run.read(
            pos,
            plan,
            read.c.meta.id,
            read.c.meta.file_size,
            &self.chunks,
        );
        let i = read.pos[&step.fp];
        let r = store.extract(&read.c, &read.c.meta.descriptors[i], out);
        self.apply(store, Some(&read));
        r
    }

    /// The container holding `fp`: the one the index names, or, when that
    /// one is gone, damaged or lacks it, the one its metadata names.
    fn load(&self, store: &ChunkStore, fp: &Fingerprint) -> Result<Read> {
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

    /// Mirrors the policy's changes: a kept chunk is decoded and verified
    /// from `read`, the container just read (a chunk that fails is held as
    /// its error, reported when a step wants it).
    fn apply(&mut self, store: &ChunkStore, read: Option<&Read>) {
        for ch in self.run.changes() {
            match ch {
                Change::Drop(fp) => {
                    self.held.remove(&fp);
                }
                Change::Keep(fp) => {
                    let r = read.expect("only a read keeps chunks");
                    let d = &r.c.meta.descriptors[r.pos[&fp]];
                    let mut bytes = Vec::with_capacity(d.raw_len as usize);
                    let h = match store.extract(&r.c, d, &mut bytes) {
                        Ok(()) => Held::Bytes(bytes),
                        Err(e) => Held::Damaged(e.to_string()),
                    };
                    self.held.insert(fp, h);
                }
            }
        }
    }
}

fn missing_here(fp: &Fingerprint) -> Error {
    Error::corrupt(
        "repository",
        format!("index places chunk {fp} in a container that does not hold it"),
    )
}
