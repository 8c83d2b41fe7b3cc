//! The restore-policy seam (`002_c5d78fa3332f6f9f.txt` §2): given the plan
//! (a restore's data chunks in order), a policy decides for each step
//! whether its chunk is served from memory or a container must be read, and
//! after a read which of that container's chunks it keeps in memory and
//! which held chunks it lets go. It decides over fingerprints, sizes and
//! container ids only, so the real restore (which then reads, verifies and
//! writes the bytes: `extract.rs`) and the simulator (which charges the
//! device model) run the same policy and count the same container reads.
//!
//! The five policies, each in its own file, all sized in bytes of raw
//! (decoded) chunk data held:
//!
//! | policy | file | 002 §2 name |
//! | --- | --- | --- |
//! | `container-lru` | `container_lru.rs` | container-based caching |
//! | `chunk-lru` | `chunk_lru.rs` | chunk-based caching |
//! | `faa` | `faa.rs` | forward assembly area (Lillibridge et al., 002's ref. [8]) |
//! | `alacc` | `alacc.rs` | adaptive look-ahead chunk caching (002's ref. [10]) |
//! | `belady` | `belady.rs` | Belady's optimal replacement, the bound |
//!
//! A plan is the data chunks of a batch of files in restore order (up to
//! [`PLAN_MAX_STEPS`] steps or [`PLAN_MAX_FILES`] files; `begin` starts the
//! next batch), so the look-ahead policies see past the end of a small file
//! as 002's restore of one backup stream does; policies keep their memory
//! across plans.

mod alacc;
mod belady;
mod chunk_lru;
mod container_lru;
mod faa;
#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

use cairn_core::{ChunkKind, ContainerId, Error, Fingerprint, FpMap};
use cairn_format::container::ContainerMeta;
use serde::Serialize;

pub use alacc::Alacc;
pub use belady::Belady;
pub use chunk_lru::ChunkLru;
pub use container_lru::ContainerLru;
pub use faa::ForwardAssembly;

/// One data chunk of the restore, in restore order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanStep {
    pub fp: Fingerprint,
    /// Raw bytes.
    pub size: u64,
    /// Where the chunk goes in its file.
    pub offset: u64,
}

/// For [`PolicyRun::run_described`]: the container holding a chunk, its
/// file size, and its chunks into the buffer given.
pub type DescribedRead<'a> = dyn FnMut(&Fingerprint, &mut Vec<ContainerChunk>) -> cairn_core::Result<(ContainerId, u64)>
    + 'a;

/// A chunk of a container that was read: its fingerprint and raw size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContainerChunk {
    pub fp: Fingerprint,
    pub size: u64,
}

impl ContainerChunk {
    /// The chunks a read of container `meta` offers a policy: its data
    /// chunks (recipe nodes and listings are not restored), into `out`.
    pub fn of_container(meta: &ContainerMeta, out: &mut Vec<ContainerChunk>) {
        out.clear();
        out.extend(
            meta.descriptors
                .iter()
                .filter(|d| d.kind == ChunkKind::Data)
                .map(|d| ContainerChunk {
                    fp: d.fp,
                    size: u64::from(d.raw_len),
                }),
        );
    }
}

/// A change to what the restore holds in memory, in the order the policy
/// made it: `Keep` names a chunk of the container just read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Keep(Fingerprint),
    Drop(Fingerprint),
}

/// The chunks held in memory (raw bytes each), the one truth every policy
/// updates and the extractor mirrors through [`Change`]s.
#[derive(Default)]
pub struct Memory {
    held: FpMap<u64>,
    bytes: u64,
    peak: u64,
    changes: Vec<Change>,
}

impl Memory {
    pub fn holds(&self, fp: &Fingerprint) -> bool {
        self.held.contains_key(fp)
    }

    /// Keeps chunk `fp` (a chunk of the container just read); no-op if held.
    pub fn keep(&mut self, fp: Fingerprint, size: u64) {
        if self.held.insert(fp, size).is_none() {
            self.bytes += size;
            self.peak = self.peak.max(self.bytes);
            self.changes.push(Change::Keep(fp));
        }
    }

    /// Lets chunk `fp` go; no-op if not held.
    pub fn drop(&mut self, fp: &Fingerprint) {
        if let Some(size) = self.held.remove(fp) {
            self.bytes -= size;
            self.changes.push(Change::Drop(*fp));
        }
    }

    /// Raw bytes held now.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// What a policy did over a restore.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PolicyStats {
    pub policy: String,
    /// The configured memory budget, bytes.
    pub cache_bytes: u64,
    pub container_reads: u64,
    /// Bytes of the containers read (their file sizes).
    pub bytes_read: u64,
    /// Steps served from memory without a read.
    pub memory_hits: u64,
    /// Most raw chunk bytes held at once: the policy's memory.
    pub peak_memory_bytes: u64,
}

pub trait RestorePolicy: Send {
    /// A new plan starts (the next file).
    fn begin(&mut self, _plan: &[PlanStep], _mem: &mut Memory) {}

    /// Whether step `pos` of `plan` is served from memory (then its chunk
    /// is held). May let chunks go (a forward assembly window moving on).
    fn serve(&mut self, pos: usize, plan: &[PlanStep], mem: &mut Memory) -> bool;

    /// Step `pos` was not served: `container`, holding `chunks`, was read
    /// for it (the step's chunk is served from that read). Keep what the
    /// policy wants of it.
    fn read(
        &mut self,
        pos: usize,
        plan: &[PlanStep],
        container: ContainerId,
        chunks: &[ContainerChunk],
        mem: &mut Memory,
    );
}

/// The restore policies, by name (`--restore-policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    ContainerLru,
    ChunkLru,
    Faa,
    #[default]
    Alacc,
    Belady,
}

impl PolicyKind {
    pub const ALL: [PolicyKind; 5] = [
        PolicyKind::ContainerLru,
        PolicyKind::ChunkLru,
        PolicyKind::Faa,
        PolicyKind::Alacc,
        PolicyKind::Belady,
    ];
    /// The names [`FromStr`] accepts, in the order of [`Self::ALL`].
    pub const NAMES: [&'static str; 5] = ["container-lru", "chunk-lru", "faa", "alacc", "belady"];

    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::ContainerLru => "container-lru",
            PolicyKind::ChunkLru => "chunk-lru",
            PolicyKind::Faa => "faa",
            PolicyKind::Alacc => "alacc",
            PolicyKind::Belady => "belady",
        }
    }

    /// A policy of `cache_bytes` of memory; `unit` is the repository's
    /// container size (ALACC moves memory in units of it).
    pub fn build(self, cache_bytes: u64, unit: u64) -> Box<dyn RestorePolicy> {
        let cache_bytes = cache_bytes.max(1);
        match self {
            PolicyKind::ContainerLru => Box::new(ContainerLru::new(cache_bytes)),
            PolicyKind::ChunkLru => Box::new(ChunkLru::new(cache_bytes)),
            PolicyKind::Faa => Box::new(ForwardAssembly::new(cache_bytes)),
            PolicyKind::Alacc => Box::new(Alacc::new(cache_bytes, unit)),
            PolicyKind::Belady => Box::new(Belady::new(cache_bytes)),
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PolicyKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        PolicyKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown restore policy {s:?} (container-lru, chunk-lru, faa, alacc, belady)"
                ))
            })
    }
}

/// A restore plan closes after the file that brings it to this many steps
/// (about 2 GiB of 8 KiB chunks, 12 MiB of plan).
pub const PLAN_MAX_STEPS: usize = 1 << 18;
/// A restore plan closes after its this-many-th file with content.
pub const PLAN_MAX_FILES: usize = 1 << 14;

/// Whether a plan of `steps` steps over `files` files is full (the real
/// restore and the simulator close their plans by this one rule).
pub fn plan_full(steps: usize, files: usize) -> bool {
    steps >= PLAN_MAX_STEPS || files >= PLAN_MAX_FILES
}

/// Default restore memory: 64 MiB of chunk data (16 containers of 4 MiB).
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;

/// The policy and its memory: the one place where a step is decided, for
/// the real restore and the simulator alike. It checks what every policy
/// must honour (a served step's chunk is held; only the container just read
/// is kept from) and counts reads and hits.
pub struct PolicyRun {
    policy: Box<dyn RestorePolicy>,
    mem: Memory,
    stats: PolicyStats,
    kind: PolicyKind,
    unit: u64,
}

impl PolicyRun {
    pub fn new(kind: PolicyKind, cache_bytes: u64, unit: u64) -> Self {
        PolicyRun {
            policy: kind.build(cache_bytes, unit),
            mem: Memory::default(),
            stats: PolicyStats {
                policy: kind.name().into(),
                cache_bytes,
                ..Default::default()
            },
            kind,
            unit,
        }
    }

    /// Forgets everything held and starts the policy afresh, keeping the
    /// counts: after a plan ended early (a failed chunk), when the caller's
    /// mirror of the memory can no longer be trusted to match.
    pub fn reset(&mut self) {
        self.policy = self.kind.build(self.stats.cache_bytes, self.unit);
        self.mem = Memory::default();
    }

    pub fn begin(&mut self, plan: &[PlanStep]) {
        self.policy.begin(plan, &mut self.mem);
        debug_assert!(self.no_keeps(), "begin keeps nothing");
    }

    /// Whether step `pos` is served from memory. A served chunk may be let
    /// go at once (its last use): its `Drop` is among the [`changes`]
    /// (Self::changes), to apply after serving it.
    pub fn serve(&mut self, pos: usize, plan: &[PlanStep]) -> bool {
        let held = self.mem.holds(&plan[pos].fp);
        let hit = self.policy.serve(pos, plan, &mut self.mem);
        debug_assert!(self.no_keeps(), "serve keeps nothing");
        if hit {
            assert!(held, "a policy served a chunk it does not hold");
            self.stats.memory_hits += 1;
        }
        hit
    }

    /// Step `pos` was not served and `container` (`file_size` bytes,
    /// holding `chunks`) was read for it.
    pub fn read(
        &mut self,
        pos: usize,
        plan: &[PlanStep],
        container: ContainerId,
        file_size: u64,
        chunks: &[ContainerChunk],
    ) {
        let from = self.mem.changes.len();
        self.policy
            .read(pos, plan, container, chunks, &mut self.mem);
        debug_assert!(self.mem.changes[from..].iter().all(|c| match c {
            Change::Keep(fp) => chunks.iter().any(|c| c.fp == *fp),
            Change::Drop(_) => true,
        }));
        self.stats.container_reads += 1;
        self.stats.bytes_read += file_size;
        self.stats.peak_memory_bytes = self.stats.peak_memory_bytes.max(self.mem.peak);
    }

    /// Runs one plan through the policy with no bytes at all (the
    /// simulator's restore, `restore_estimate`): a step the policy does not
    /// serve reads the container `fetch` names for its chunk, with that
    /// container's file size and chunks (`ContainerChunk::of_container`).
    /// Returns the containers read.
    pub fn run_described(
        &mut self,
        plan: &[PlanStep],
        fetch: &mut DescribedRead<'_>,
    ) -> cairn_core::Result<u64> {
        let mut chunks = Vec::new();
        let mut reads = 0;
        self.begin(plan);
        for pos in 0..plan.len() {
            // Nothing mirrors the memory: its changes are only counted.
            self.changes().for_each(drop);
            if self.serve(pos, plan) {
                continue;
            }
            let (id, file_size) = fetch(&plan[pos].fp, &mut chunks)?;
            reads += 1;
            self.read(pos, plan, id, file_size, &chunks);
        }
        self.changes().for_each(drop);
        Ok(reads)
    }

    /// The changes to memory since the last call, in order.
    pub fn changes(&mut self) -> std::vec::Drain<'_, Change> {
        self.mem.changes.drain(..)
    }

    pub fn holds(&self, fp: &Fingerprint) -> bool {
        self.mem.holds(fp)
    }

    pub fn stats(&self) -> PolicyStats {
        self.stats.clone()
    }

    fn no_keeps(&self) -> bool {
        !self
            .mem
            .changes
            .iter()
            .any(|c| matches!(c, Change::Keep(_)))
    }
}

/// The steps of `plan` from `from` on whose sizes add up to at most
/// `budget` bytes (always at least one): the end of a window.
pub(crate) fn window_end(plan: &[PlanStep], from: usize, budget: u64) -> usize {
    let mut end = from;
    let mut bytes = 0;
    while end < plan.len() {
        bytes += plan[end].size;
        if bytes > budget && end > from {
            break;
        }
        end += 1;
    }
    end
}
