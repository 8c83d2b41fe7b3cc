//! Partitioned deduplication with reconciliation, after
//! `004_62bf1a5ddd5ed253.txt` (El-Shimi et al., "Primary Data Deduplication –
//! Large Scale Study and System Design"), slides "Data Partitioning and
//! Reconciliation", "Reconciliation of Data Partitions" and "Efficient
//! partitioning strategies".
//!
//! Input: a [`Dataset`], a sequence of chunk records (fingerprint, size,
//! stored size, the file the chunk belongs to), filled from any trace the
//! simulator reads or a synthetic workload ([`source`]) or the built-in
//! typed-file dataset ([`files`]). Output ([`study`]): global dedup savings,
//! then for each [`Strategy`] the savings of phase 1 alone and the cost and
//! result of phase 2 for several `k`.
//!
//! # The two phases (004 "Two-phase deduplication")
//!
//! 1. **Partitioned dedup** ([`dedup_partitions`]): the files are divided into
//!    disjoint partitions ([`partition_files`]) and each partition is
//!    deduplicated on its own, with its own index: a chunk is stored once per
//!    partition it occurs in. A partition's index holds one entry per
//!    distinct fingerprint of the partition.
//! 2. **Reconciliation** ([`reconcile`]), 004's "iterative procedure: grow
//!    the set of reconciled partitions by considering some number of
//!    unreconciled partitions at a time", `k` of them per iteration. The
//!    partitions are taken in order, `k` at a time; one iteration:
//!    * loads the indexes of its `k` unreconciled partitions into **one
//!      in-memory table** (a fingerprint held by several of the `k` is kept
//!      once: the `k` are reconciled with each other while loading);
//!    * streams the **reconciled index** (every entry kept by the earlier
//!      iterations, on disk) past that table: an entry found in the table is
//!      a cross-partition duplicate, dropped from the unreconciled side, whose
//!      chunk now references the reconciled copy;
//!    * appends the table's surviving entries to the reconciled index: the
//!      `k` partitions are now reconciled.
//!
//!    So `ceil(P / k)` iterations ("passes"; the first streams an empty
//!    reconciled index), and memory per iteration = the merged indexes of
//!    `k` partitions. The slides only state that "k provides [a] trade-off
//!    between memory usage and reconciliation speed"; holding the *reconciled*
//!    index in memory instead would make memory grow to the global index
//!    whatever `k` is, with no trade-off, so the in-memory side must be the
//!    `k` unreconciled partitions and the reconciled side the streamed one.
//!    This is our reading; the slides do not spell it out. Larger `k`: fewer
//!    sequential scans of the reconciled index (speed), more memory; `k = P`
//!    is global dedup in one pass with the global index in memory; `k = 1`
//!    needs no more memory than phase 1 (the largest partition's index).
//!
//!    The simulator computes the same join the other way round (each table
//!    entry looked up in an in-memory set standing for the reconciled index),
//!    which finds the same duplicates; the entries an iteration *would*
//!    read are counted as the reconciled index's size at its start.
//!
//! Not modelled: 004's "selective" and "delayed" reconciliation (which
//! partitions to reconcile, and when) — every partition is reconciled, in
//! partition order; parallel phase-1 sessions (004 runs one session per
//! volume, "each session uses a separate index"): memory is reported for one
//! session at a time.
//!
//! # Invariants (tested, `tests.rs`)
//!
//! * phase-1 unique bytes >= global unique bytes (a chunk is stored at least
//!   once globally and at most once per partition), so partitioned savings
//!   <= global savings;
//! * after the last iteration the reconciled index holds exactly the global
//!   distinct fingerprints: reconciled savings == global savings, for every
//!   `k` and every partitioning;
//! * peak in-memory entries: `k = 1` equals phase 1's largest partition
//!   index, `k = P` equals the global index, and peak(k) <= peak(k') when
//!   `k` divides `k'` (each `k`-group then lies inside one `k'`-group); the
//!   `k` values of [`study`] (1, 2, 4, ..., P) form such a chain.
//!
//! Sizes: a fingerprint names one chunk. If a trace gives one fingerprint
//! different sizes (collisions of FSL's 48-bit hashes), the first size seen
//! counts for every occurrence ([`Dataset::size_conflicts`] counts them), so
//! the invariants hold exactly on any input. Memory in bytes uses
//! [`INDEX_ENTRY_BYTES`] = 48, 004's "Regular index" entry size (its
//! RAM-frugal index needs 6 bytes per entry, an 8x smaller constant factor).

pub mod files;
pub mod source;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;

use cairn_core::{Error, Fingerprint, FpMap, FpSet, Result, TraceChunk};

/// Bytes per index entry for [`Reconciliation::peak_index_bytes`]: 004's
/// "Regular index" entry (table "Performance Evaluation – Resource Usage").
pub const INDEX_ENTRY_BYTES: u64 = 48;

/// Largest path partition, as a share of all bytes (004: "partition by
/// directory sub-trees (each partition <= 10% of total bytes)").
pub const PATH_PARTITION_SHARE: f64 = 0.10;

/// Name of the type partition of files without an extension.
pub const NO_TYPE: &str = "(none)";

/// How the files are divided into partitions (004 "Efficient partitioning
/// strategies").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// One partition: global dedup.
    Global,
    /// By file type: the lowercased extension ([`file_type`]).
    Type,
    /// By directory sub-trees of at most [`PATH_PARTITION_SHARE`] of all
    /// bytes ([`partition_files`] has the rule).
    Path,
    /// By stream/volume: the input stream (trace file, generation) when the
    /// dataset has several, else the top-level directory below the
    /// directory common to all files.
    Stream,
}

impl Strategy {
    /// Every strategy, global first.
    pub const ALL: [Strategy; 4] = [
        Strategy::Global,
        Strategy::Type,
        Strategy::Path,
        Strategy::Stream,
    ];

    /// The name used in rows: `global`, `type`, `path`, `stream`.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Global => "global",
            Strategy::Type => "type",
            Strategy::Path => "path",
            Strategy::Stream => "stream",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One chunk occurrence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkRecord {
    pub fp: Fingerprint,
    /// Logical bytes (the fingerprint's canonical size, see the module doc).
    pub size: u32,
    /// Bytes after local compression (`size` if unknown).
    pub stored_size: u32,
    /// Index into [`Dataset::files`].
    pub file: u32,
}

/// One file: its path (components joined by `/`, no leading `/`) and the
/// input stream it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRecord {
    pub path: String,
    /// Index into [`Dataset::streams`].
    pub stream: u32,
    /// Logical bytes (sum of its chunks' sizes).
    pub bytes: u64,
}

/// Chunk records grouped by file and input stream, with the global index.
#[derive(Clone, Debug, Default)]
pub struct Dataset {
    streams: Vec<String>,
    files: Vec<FileRecord>,
    chunks: Vec<ChunkRecord>,
    /// Global dedup index: fingerprint -> canonical (size, stored size).
    global: FpMap<(u32, u32)>,
    size_conflicts: u64,
}

impl Dataset {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an input stream (a trace file, a generation, a volume) and
    /// returns its id.
    pub fn add_stream(&mut self, name: impl Into<String>) -> Result<u32> {
        let id = u32::try_from(self.streams.len())
            .map_err(|_| Error::invalid("partition: too many input streams"))?;
        self.streams.push(name.into());
        Ok(id)
    }

    /// Adds a file of `stream` and returns its id. The path is normalized:
    /// empty and `.` components dropped, components joined by `/`.
    pub fn add_file(&mut self, stream: u32, path: &str) -> Result<u32> {
        if stream as usize >= self.streams.len() {
            return Err(Error::invalid(format!(
                "partition: file {path:?} names unknown stream {stream}"
            )));
        }
        let id = u32::try_from(self.files.len())
            .map_err(|_| Error::invalid("partition: more than 2^32 files"))?;
        let path = path
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect::<Vec<_>>()
            .join("/");
        self.files.push(FileRecord {
            path,
            stream,
            bytes: 0,
        });
        Ok(id)
    }

    /// Appends one chunk of file `file`.
    pub fn add_chunk(&mut self, file: u32, chunk: TraceChunk) -> Result<()> {
        let Some(f) = self.files.get_mut(file as usize) else {
            return Err(Error::invalid(format!(
                "partition: chunk of unknown file {file}"
            )));
        };
        let (size, stored_size) = *self
            .global
            .entry(chunk.fp)
            .or_insert((chunk.size, chunk.stored_size));
        self.size_conflicts += (size != chunk.size) as u64;
        f.bytes += size as u64;
        self.chunks.push(ChunkRecord {
            fp: chunk.fp,
            size,
            stored_size,
            file,
        });
        Ok(())
    }

    pub fn streams(&self) -> &[String] {
        &self.streams
    }

    pub fn files(&self) -> &[FileRecord] {
        &self.files
    }

    pub fn chunks(&self) -> &[ChunkRecord] {
        &self.chunks
    }

    /// Sum of all chunk sizes.
    pub fn logical_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }

    /// Distinct fingerprints (= entries of the global index).
    pub fn distinct_chunks(&self) -> u64 {
        self.global.len() as u64
    }

    /// Chunk occurrences whose size differed from the fingerprint's first
    /// size (counted at that first size).
    pub fn size_conflicts(&self) -> u64 {
        self.size_conflicts
    }
}

/// Files assigned to partitions: `of_file[f]` indexes `names`.
#[derive(Clone, Debug)]
pub struct Partitioning {
    pub strategy: Strategy,
    pub names: Vec<String>,
    pub of_file: Vec<u32>,
}

/// The file type of `path` for [`Strategy::Type`]: the lowercased extension
/// of the last component, [`NO_TYPE`] if none (dot files like `.bashrc`
/// have none). All-digit extensions are version suffixes and skipped while
/// another extension precedes them: `libc.so.6` and `libz.so.1.3` are `so`,
/// `ls.1` stays `1`. (`cairn analyze` uses the plain last extension.)
pub fn file_type(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    // Extensions: the dot-separated pieces after the first character.
    let first = name.chars().next().map_or(0, char::len_utf8);
    let Some(dot) = name[first..].find('.') else {
        return NO_TYPE.into();
    };
    let exts: Vec<&str> = name[first + dot + 1..].split('.').collect();
    let numeric = |e: &str| !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit());
    let ext = exts
        .iter()
        .rev()
        .find(|e| !numeric(e))
        .or(exts.last())
        .copied()
        .unwrap_or("");
    if ext.is_empty() {
        NO_TYPE.into()
    } else {
        ext.to_lowercase()
    }
}

/// Partition ids in first-appearance order of their keys.
struct Interner {
    ids: HashMap<String, u32>,
    names: Vec<String>,
}

impl Interner {
    fn new() -> Self {
        Interner {
            ids: HashMap::new(),
            names: Vec::new(),
        }
    }

    fn id(&mut self, key: String) -> u32 {
        let next = self.names.len() as u32;
        *self.ids.entry(key).or_insert_with_key(|k| {
            self.names.push(k.clone());
            next
        })
    }
}

/// Divides the files of `ds` into disjoint partitions by `strategy`.
/// Partitions are numbered in the order their first file appears.
///
/// [`Strategy::Path`] follows 004 ("partition by directory sub-trees (each
/// partition <= 10% of total bytes)") with the rule of `cairn analyze`:
/// walking down from the root, the first directory whose whole sub-tree
/// holds at most `share` of all bytes is one partition (`dir/`); a larger
/// directory is split into its subdirectories, and the files directly in it
/// form one more partition (`dir/ (own files)`), however large: a file is
/// never split.
pub fn partition_files(ds: &Dataset, strategy: Strategy, share: f64) -> Partitioning {
    let mut int = Interner::new();
    let of_file: Vec<u32> = match strategy {
        Strategy::Global => ds.files.iter().map(|_| int.id("all".into())).collect(),
        Strategy::Type => ds
            .files
            .iter()
            .map(|f| int.id(file_type(&f.path)))
            .collect(),
        Strategy::Path => return path_partitions(ds, share),
        Strategy::Stream if ds.streams.len() > 1 => ds
            .files
            .iter()
            .map(|f| int.id(ds.streams[f.stream as usize].clone()))
            .collect(),
        Strategy::Stream => {
            let common = common_dir_depth(ds);
            ds.files
                .iter()
                .map(|f| {
                    let comps: Vec<&str> = f.path.split('/').collect();
                    int.id(if comps.len() > common + 1 {
                        comps[..=common].join("/") + "/"
                    } else {
                        format!("{}/ (own files)", comps[..common].join("/"))
                    })
                })
                .collect()
        }
    };
    Partitioning {
        strategy,
        names: int.names,
        of_file,
    }
}

/// Number of leading directory components shared by every file.
fn common_dir_depth(ds: &Dataset) -> usize {
    let mut iter = ds.files.iter();
    let Some(first) = iter.next() else {
        return 0;
    };
    let first: Vec<&str> = first.path.split('/').collect();
    let mut depth = first.len() - 1;
    for f in iter {
        let comps = f.path.split('/').collect::<Vec<_>>();
        let dir = &comps[..comps.len() - 1];
        depth = depth.min(dir.iter().zip(&first).take_while(|(a, b)| a == b).count());
    }
    depth
}

fn path_partitions(ds: &Dataset, share: f64) -> Partitioning {
    // Directory tree; a directory is created after its parent, so a reverse
    // pass sums sub-trees bottom-up.
    let mut parent: Vec<Option<u32>> = vec![None];
    let mut dir_path: Vec<String> = vec![String::new()];
    let mut bytes: Vec<u64> = vec![0];
    let mut child: HashMap<(u32, &str), u32> = HashMap::new();
    let mut file_dir = Vec::with_capacity(ds.files.len());
    for f in &ds.files {
        let comps: Vec<&str> = f.path.split('/').collect();
        let mut d = 0u32;
        for c in &comps[..comps.len() - 1] {
            d = *child.entry((d, c)).or_insert_with(|| {
                let p = &dir_path[d as usize];
                dir_path.push(if p.is_empty() {
                    (*c).to_string()
                } else {
                    format!("{p}/{c}")
                });
                parent.push(Some(d));
                bytes.push(0);
                (parent.len() - 1) as u32
            });
        }
        bytes[d as usize] += f.bytes;
        file_dir.push(d);
    }
    for d in (1..parent.len()).rev() {
        if let Some(p) = parent[d] {
            bytes[p as usize] += bytes[d];
        }
    }
    let limit = share * ds.logical_bytes() as f64;
    // subtree[d]: the directory whose whole sub-tree is d's partition.
    let mut subtree: Vec<Option<u32>> = Vec::with_capacity(parent.len());
    for d in 0..parent.len() {
        let inherited = parent[d].and_then(|p| subtree[p as usize]);
        subtree.push(inherited.or((bytes[d] as f64 <= limit).then_some(d as u32)));
    }
    let mut int = Interner::new();
    let of_file = file_dir
        .iter()
        .map(|&d| {
            let key = match subtree[d as usize] {
                Some(a) => format!("{}/", dir_path[a as usize]),
                None => format!("{}/ (own files)", dir_path[d as usize]),
            };
            int.id(key)
        })
        .collect();
    Partitioning {
        strategy: Strategy::Path,
        names: int.names,
        of_file,
    }
}

/// One entry of a partition index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub fp: Fingerprint,
    pub size: u32,
    pub stored_size: u32,
}

/// A partition after phase 1: its index (distinct fingerprints, in order of
/// first occurrence) and byte counts.
#[derive(Clone, Debug)]
pub struct PartitionIndex {
    pub name: String,
    pub files: u64,
    pub logical_bytes: u64,
    pub entries: Vec<IndexEntry>,
}

impl PartitionIndex {
    /// Bytes stored by deduplicating within the partition.
    pub fn unique_bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.size as u64).sum()
    }
}

/// Phase 1 of a strategy: every partition deduplicated on its own.
#[derive(Clone, Debug)]
pub struct Partitioned {
    pub strategy: Strategy,
    pub logical_bytes: u64,
    pub parts: Vec<PartitionIndex>,
}

impl Partitioned {
    /// Stored bytes: each partition's unique bytes, summed.
    pub fn unique_bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.unique_bytes()).sum()
    }

    pub fn unique_stored_bytes(&self) -> u64 {
        self.parts
            .iter()
            .flat_map(|p| &p.entries)
            .map(|e| e.stored_size as u64)
            .sum()
    }

    /// Fraction of logical bytes removed.
    pub fn savings(&self) -> f64 {
        savings(self.unique_bytes(), self.logical_bytes)
    }

    /// Largest partition index (memory of one phase-1 session).
    pub fn peak_entries(&self) -> u64 {
        self.parts
            .iter()
            .map(|p| p.entries.len() as u64)
            .max()
            .unwrap_or(0)
    }

    /// Sum of all partition indexes.
    pub fn total_entries(&self) -> u64 {
        self.parts.iter().map(|p| p.entries.len() as u64).sum()
    }
}

/// `1 - unique / logical`, 0 for no data.
pub fn savings(unique: u64, logical: u64) -> f64 {
    if logical == 0 {
        0.0
    } else {
        1.0 - unique as f64 / logical as f64
    }
}

/// Phase 1: deduplicates each partition of `p` on its own (one [`FpSet`]
/// per partition index).
pub fn dedup_partitions(ds: &Dataset, p: &Partitioning) -> Result<Partitioned> {
    if p.of_file.len() != ds.files.len() {
        return Err(Error::invalid(format!(
            "partition: partitioning covers {} files, the dataset has {}",
            p.of_file.len(),
            ds.files.len()
        )));
    }
    let mut parts: Vec<PartitionIndex> = p
        .names
        .iter()
        .map(|name| PartitionIndex {
            name: name.clone(),
            files: 0,
            logical_bytes: 0,
            entries: Vec::new(),
        })
        .collect();
    for &q in &p.of_file {
        let part = parts.get_mut(q as usize).ok_or_else(|| {
            Error::invalid(format!("partition: file assigned to unknown partition {q}"))
        })?;
        part.files += 1;
    }
    let mut sets: Vec<FpSet> = vec![FpSet::default(); parts.len()];
    for c in &ds.chunks {
        // `of_file` was checked above: every file's partition exists.
        let q = p.of_file[c.file as usize] as usize;
        parts[q].logical_bytes += c.size as u64;
        if sets[q].insert(c.fp) {
            parts[q].entries.push(IndexEntry {
                fp: c.fp,
                size: c.size,
                stored_size: c.stored_size,
            });
        }
    }
    Ok(Partitioned {
        strategy: p.strategy,
        logical_bytes: ds.logical_bytes(),
        parts,
    })
}

/// One reconciliation iteration (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    /// First partition of the iteration; it covers `partitions` of them.
    pub first: usize,
    pub partitions: usize,
    /// Entries of the in-memory table: the distinct fingerprints of the
    /// iteration's partitions.
    pub in_memory_entries: u64,
    /// Reconciled-index entries streamed past the table.
    pub entries_read: u64,
    /// Duplicates among the iteration's own partitions (found loading).
    pub intra_duplicates: u64,
    /// Table entries found in the reconciled index.
    pub cross_duplicates: u64,
    /// Bytes freed by the iteration (both kinds of duplicates).
    pub bytes_freed: u64,
}

/// Phase 2 of a strategy for one `k`.
#[derive(Clone, Debug)]
pub struct Reconciliation {
    pub k: usize,
    pub passes: Vec<Pass>,
    pub logical_bytes: u64,
    /// Stored bytes after reconciliation (= the reconciled index's sizes).
    pub unique_bytes: u64,
    pub unique_stored_bytes: u64,
    /// Entries of the final reconciled index.
    pub reconciled_entries: u64,
}

impl Reconciliation {
    pub fn savings(&self) -> f64 {
        savings(self.unique_bytes, self.logical_bytes)
    }

    /// Most entries held in memory by one iteration.
    pub fn peak_index_entries(&self) -> u64 {
        self.passes
            .iter()
            .map(|p| p.in_memory_entries)
            .max()
            .unwrap_or(0)
    }

    pub fn peak_index_bytes(&self) -> u64 {
        self.peak_index_entries() * INDEX_ENTRY_BYTES
    }

    /// Reconciled-index entries streamed, over all iterations.
    pub fn entries_read(&self) -> u64 {
        self.passes.iter().map(|p| p.entries_read).sum()
    }
}

/// Phase 2 (004 "Reconciliation of Data Partitions"): reconciles the
/// partitions of `p`, `k` unreconciled partitions per iteration, in
/// partition order. `k` larger than the number of partitions is one pass.
pub fn reconcile(p: &Partitioned, k: usize) -> Result<Reconciliation> {
    if k == 0 {
        return Err(Error::invalid("partition: k must be at least 1"));
    }
    // Stands for the on-disk reconciled index the iterations stream.
    let mut reconciled = FpSet::default();
    let (mut unique_bytes, mut unique_stored_bytes) = (0u64, 0u64);
    let mut passes = Vec::with_capacity(p.parts.len().div_ceil(k));
    for (i, group) in p.parts.chunks(k).enumerate() {
        let entries_read = reconciled.len() as u64;
        // The in-memory table: the group's partition indexes, merged.
        let mut table = FpSet::default();
        let mut survivors: Vec<IndexEntry> = Vec::new();
        let (mut intra, mut cross, mut freed) = (0u64, 0u64, 0u64);
        for e in group.iter().flat_map(|part| &part.entries) {
            if !table.insert(e.fp) {
                intra += 1;
                freed += e.size as u64;
            } else if reconciled.contains(&e.fp) {
                cross += 1;
                freed += e.size as u64;
            } else {
                survivors.push(*e);
            }
        }
        for e in &survivors {
            reconciled.insert(e.fp);
            unique_bytes += e.size as u64;
            unique_stored_bytes += e.stored_size as u64;
        }
        passes.push(Pass {
            first: i * k,
            partitions: group.len(),
            in_memory_entries: table.len() as u64,
            entries_read,
            intra_duplicates: intra,
            cross_duplicates: cross,
            bytes_freed: freed,
        });
    }
    Ok(Reconciliation {
        k,
        passes,
        logical_bytes: p.logical_bytes,
        unique_bytes,
        unique_stored_bytes,
        reconciled_entries: reconciled.len() as u64,
    })
}

/// One strategy's phase 1 and its reconciliations.
#[derive(Clone, Debug)]
pub struct StrategyReport {
    pub partitioned: Partitioned,
    /// One per `k` of [`k_values`], increasing `k`.
    pub reconciliations: Vec<Reconciliation>,
}

/// Everything [`study`] measures on one dataset.
#[derive(Clone, Debug)]
pub struct Study {
    pub files: u64,
    pub chunks: u64,
    pub logical_bytes: u64,
    pub size_conflicts: u64,
    /// [`Strategy::Global`]: one partition, no reconciliation.
    pub global: Partitioned,
    /// Type, path and stream, in that order.
    pub strategies: Vec<StrategyReport>,
}

/// The `k` values reconciled for `partitions` partitions: each of `ks`
/// below `partitions` (sorted, deduplicated), then `partitions` itself
/// ("all"). Empty for no partitions; `k = 0` is an error.
pub fn k_values(ks: &[usize], partitions: usize) -> Result<Vec<usize>> {
    if ks.contains(&0) {
        return Err(Error::invalid("partition: k must be at least 1"));
    }
    let mut out: Vec<usize> = ks.iter().copied().filter(|&k| k < partitions).collect();
    out.sort_unstable();
    out.dedup();
    if partitions > 0 {
        out.push(partitions);
    }
    Ok(out)
}

/// Global dedup, then phase 1 and phase 2 (for each of [`k_values`]`(ks, P)`)
/// of the type, path and stream strategies.
pub fn study(ds: &Dataset, ks: &[usize]) -> Result<Study> {
    let part = |s| dedup_partitions(ds, &partition_files(ds, s, PATH_PARTITION_SHARE));
    let global = part(Strategy::Global)?;
    let mut strategies = Vec::new();
    for s in [Strategy::Type, Strategy::Path, Strategy::Stream] {
        let partitioned = part(s)?;
        let reconciliations = k_values(ks, partitioned.parts.len())?
            .into_iter()
            .map(|k| reconcile(&partitioned, k))
            .collect::<Result<Vec<_>>>()?;
        strategies.push(StrategyReport {
            partitioned,
            reconciliations,
        });
    }
    Ok(Study {
        files: ds.files.len() as u64,
        chunks: ds.chunks.len() as u64,
        logical_bytes: ds.logical_bytes(),
        size_conflicts: ds.size_conflicts,
        global,
        strategies,
    })
}
