//! The read layer: everything that reads a snapshot back out of the
//! repository, for restore and for every command that browses, checks,
//! copies or compares snapshots (`gc`, `check`, `copy`, `diff`, `find`,
//! `random_access`, `repair_snapshots`, `file_kinds`, the CLI's `browse`
//! and mount, and backup's parent snapshot).
//!
//! [`Reader`] finds entries by path, walks directory trees and streams a
//! file's data chunks, each verified against its fingerprint. It is plan,
//! policy, extraction:
//!
//! - `cache`: where chunks are found ([`cache::ChunkStore`]: the index or a
//!   map built from the containers, the container log, the codec) and the
//!   small cache of recipe nodes and listings (`MetaChunks`);
//! - `blob_reader`, `plan`: a blob's Merkle tree walked, or flattened into
//!   its data chunks in order;
//! - `policy`: the restore cache policies that decide which containers are
//!   read and which chunks are kept (container LRU, chunk LRU, forward
//!   assembly, ALACC, Belady), following the restore-cache study of the
//!   002 paper (`/work/shared/papers/README.md`);
//! - `fetch`, `extract`: what a policy decided is read (whole containers or
//!   ranges), decoded, verified and handed out in plan order.
//!
//! Writing a snapshot into a target is `crate::restore`, built on this.

pub mod blob_reader;
pub mod cache;
pub(crate) mod extract;
pub(crate) mod fetch;
pub mod plan;
pub mod policy;

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use cairn_core::error::IoContext;
use cairn_core::{Error, Result};
use cairn_format::dir::{decode_dir, BlobRef, DirEntry, EntryKind};
use cairn_format::snapshot::SnapshotRecord;

use crate::index::disk_index::DiskIndex;
use crate::repo::Repository;
use blob_reader::BlobReader;
use cache::{ChunkStore, Locator, MetaChunks, RestoreCache};
use extract::Extractor;
pub use policy::PolicyKind;
use policy::{PlanStep, PolicyStats};

/// Which restore policy and how much memory (`--restore-policy`,
/// `--restore-cache`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheOptions {
    pub policy: PolicyKind,
    /// Raw chunk bytes the policy may hold.
    pub bytes: u64,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            policy: PolicyKind::default(),
            bytes: policy::DEFAULT_CACHE_BYTES,
        }
    }
}

/// Container metadata sections kept by the planner's reader of directory
/// listings and recipe tree nodes (separate from the data policy's memory).
const METADATA_CACHE_CONTAINERS: usize = 16;

/// Reads snapshots: plan, policy, extraction. `plan` flattens each file's
/// recipe into data-chunk steps (tree nodes and listings through `meta`),
/// the policy in `extract` decides which containers are read and kept, and
/// `extract` verifies and hands out every chunk. Restore (`crate::restore`)
/// drives the same parts across many files at once.
pub struct Reader {
    pub store: ChunkStore,
    pub(crate) meta: Box<dyn RestoreCache>,
    pub(crate) extract: Extractor,
    /// Scratch plan, kept to reuse its allocation.
    pub(crate) steps: Vec<PlanStep>,
}

/// One entry found by a walk, with its path inside the snapshot.
/// A directory's inline listing is moved out of `entry` (its entries are
/// visited next).
pub struct Walked {
    pub path: String,
    pub entry: DirEntry,
}

/// The snapshot path of entry `name` inside directory `parent` (`""` = root),
/// a name that is not UTF-8 escaped (`crate::names`).
pub(crate) fn join(parent: &str, name: &[u8]) -> String {
    let n = crate::names::name_text(name);
    if parent.is_empty() {
        n.into_owned()
    } else {
        format!("{parent}/{n}")
    }
}

/// Index pages a reader keeps in memory: a reader locates every chunk it
/// touches, and on trees of many small files that is many lookups per page.
pub const INDEX_PAGE_CACHE_BYTES: usize = 32 << 20;

/// How a reader of `repo` locates chunks: the on-disk index, or, when it is
/// damaged, a map built from the containers' metadata sections (the index
/// is derived data; containers describe themselves).
pub(crate) fn open_locator(repo: &Repository) -> Result<Locator> {
    match DiskIndex::open_memoized(
        repo.backend().clone(),
        repo.counters.clone(),
        Some(repo.overlays.clone()),
    ) {
        Ok(index) => Ok(Locator::Disk(index.with_page_cache(INDEX_PAGE_CACHE_BYTES))),
        Err(e) if crate::index::is_damage(&e) => {
            Ok(Locator::Memory(cache::map_from_containers(&*repo.log)?))
        }
        Err(e) => Err(e),
    }
}

impl Reader {
    pub fn open(repo: &Repository, cache: CacheOptions) -> Result<Self> {
        Ok(Self::with_locator(repo, open_locator(repo)?, cache))
    }

    pub fn with_locator(repo: &Repository, locator: Locator, cache: CacheOptions) -> Self {
        Reader {
            store: ChunkStore::new(
                repo.log.clone(),
                locator,
                crate::codec::ChunkCodec::for_repo(repo),
            ),
            meta: Box::new(MetaChunks::new(METADATA_CACHE_CONTAINERS)),
            extract: Extractor::new(cache.policy, cache.bytes, repo.config.container_size as u64),
            steps: Vec::new(),
        }
    }

    /// Reads listings and tree nodes (metadata, not through the policy).
    pub(crate) fn blob(&mut self) -> BlobReader<'_> {
        BlobReader::new(&self.store, self.meta.as_mut())
    }

    /// What the data policy did so far.
    pub fn policy_stats(&self) -> PolicyStats {
        self.extract.stats()
    }

    /// Reads and decodes a directory listing blob.
    pub fn read_listing(&mut self, blob: &BlobRef) -> Result<Vec<DirEntry>> {
        let bytes = self.blob().read_all(blob)?;
        decode_dir(&bytes, self.store.fp_width())
    }

    /// The entries of directory `dir`: its inline listing (a copy), or its
    /// listing blob read from the repository.
    pub fn children(&mut self, dir: &DirEntry) -> Result<Vec<DirEntry>> {
        match (&dir.children, &dir.content) {
            (Some(inline), _) => Ok(inline.clone()),
            (None, Some(blob)) => self.read_listing(blob),
            (None, None) => Ok(Vec::new()),
        }
    }

    /// Like [`Reader::children`], but moves an inline listing out of `dir`
    /// instead of copying it (`dir.children` is `None` afterwards).
    pub fn take_children(&mut self, dir: &mut DirEntry) -> Result<Vec<DirEntry>> {
        match dir.children.take() {
            Some(inline) => Ok(inline),
            None => self.children(dir),
        }
    }

    pub fn root_entries(&mut self, snap: &SnapshotRecord) -> Result<Vec<DirEntry>> {
        let root = BlobRef::try_from(&snap.root)?;
        self.read_listing(&root)
    }

    /// The entry at `path` (components separated by `/`, names as
    /// `crate::names` writes them); `None` for the root.
    pub fn find(&mut self, snap: &SnapshotRecord, path: &str) -> Result<Option<DirEntry>> {
        Ok(self.find_named(snap, path)?.map(|(_, e)| e))
    }

    /// [`Reader::find`], with the entry's path as the names' bytes.
    pub fn find_named(
        &mut self,
        snap: &SnapshotRecord,
        path: &str,
    ) -> Result<Option<(PathBuf, DirEntry)>> {
        let mut entries = self.root_entries(snap)?;
        let mut found: Option<DirEntry> = None;
        let mut named = PathBuf::new();
        let comps: Vec<&str> = path
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        for (i, comp) in comps.iter().enumerate() {
            // The name that is literally `comp` first, then an escaped one.
            let at = entries
                .iter()
                .position(|e| e.name == comp.as_bytes())
                .or_else(|| {
                    entries
                        .iter()
                        .position(|e| crate::names::text_names(comp, &e.name))
                })
                .ok_or_else(|| Error::NotFound(format!("{path} in the snapshot")))?;
            let e = entries.swap_remove(at);
            named.push(OsStr::from_bytes(&e.name));
            if i + 1 < comps.len() {
                if e.kind != EntryKind::Dir {
                    return Err(Error::NotFound(format!("{path} in the snapshot")));
                }
                entries = self.children(&e)?;
            } else {
                entries = Vec::new();
            }
            found = Some(e);
        }
        Ok(found.map(|e| (named, e)))
    }

    /// Visits every entry under `path` depth-first in name order.
    pub fn walk(
        &mut self,
        snap: &SnapshotRecord,
        path: &str,
        visit: &mut dyn FnMut(Walked) -> Result<()>,
    ) -> Result<()> {
        let (prefix, entries) = match self.find(snap, path)? {
            None => (String::new(), self.root_entries(snap)?),
            Some(e) if e.kind == EntryKind::Dir => {
                let prefix = path.trim_matches('/').to_string();
                let children = self.children(&e)?;
                visit(Walked {
                    path: prefix.clone(),
                    entry: e,
                })?;
                (prefix, children)
            }
            Some(e) => {
                return visit(Walked {
                    path: path.trim_matches('/').to_string(),
                    entry: e,
                })
            }
        };
        self.walk_entries(&prefix, entries, visit)
    }

    fn walk_entries(
        &mut self,
        prefix: &str,
        entries: Vec<DirEntry>,
        visit: &mut dyn FnMut(Walked) -> Result<()>,
    ) -> Result<()> {
        for mut e in entries {
            let path = join(prefix, &e.name);
            let children = if e.kind == EntryKind::Dir {
                Some(self.take_children(&mut e)?)
            } else {
                None
            };
            visit(Walked {
                path: path.clone(),
                entry: e,
            })?;
            if let Some(c) = children {
                self.walk_entries(&path, c, visit)?;
            }
        }
        Ok(())
    }

    /// Streams the content of the file at `path` into `out`.
    pub fn cat(&mut self, snap: &SnapshotRecord, path: &str, out: &mut dyn Write) -> Result<u64> {
        let e = self
            .find(snap, path)?
            .ok_or_else(|| Error::invalid("cat needs a file path inside the snapshot"))?;
        if e.kind != EntryKind::File {
            return Err(Error::invalid(format!("{path} is not a regular file")));
        }
        self.for_each_logical(&e, &mut |c| {
            out.write_all(c).ctx(|| "writing to standard output".into())
        })
    }
}

impl Reader {
    /// Calls `sink` with each data chunk of a file's blob, in order,
    /// verified: plan, policy, extraction.
    pub fn for_each_chunk(
        &mut self,
        blob: &BlobRef,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let mut steps = std::mem::take(&mut self.steps);
        steps.clear();
        let r = self.extract_planned(blob, &mut steps, sink);
        self.steps = steps;
        r
    }

    fn extract_planned(
        &mut self,
        blob: &BlobRef,
        steps: &mut Vec<PlanStep>,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        plan::plan_blob(&self.store, self.meta.as_mut(), blob, steps)?;
        self.extract
            .extract(&self.store, steps, &mut |step, bytes| {
                if bytes.len() as u64 != step.size {
                    return Err(Error::corrupt(
                        format!("tree under {}", blob.root),
                        format!(
                            "chunk {} recorded as {} bytes holds {}",
                            step.fp,
                            step.size,
                            bytes.len()
                        ),
                    ));
                }
                sink(bytes)
            })
    }

    /// The container the index (or, failing it, the containers' own
    /// metadata) places chunk `fp` in.
    pub(crate) fn locate(&self, fp: &cairn_core::Fingerprint) -> Result<cairn_core::ContainerId> {
        self.store.locate(fp)
    }

    /// Plans a blob (its recipe nodes read and checked, levels and sizes)
    /// and hands each data chunk's fingerprint to `leaf` without reading
    /// the chunk: how `repair snapshots` finds files that reference chunks
    /// no container holds.
    pub fn for_each_leaf(
        &mut self,
        blob: &BlobRef,
        leaf: &mut dyn FnMut(&cairn_core::Fingerprint) -> Result<()>,
    ) -> Result<()> {
        self.for_each_leaf_noting_nodes(blob, None, leaf)
    }

    /// The fingerprints of a blob's recipe nodes (`nodes`) and data chunks
    /// (`leaves`), the nodes read and checked as [`Reader::for_each_leaf`]
    /// reads them, the chunks not read.
    pub(crate) fn recipe_fingerprints(
        &mut self,
        blob: &BlobRef,
        nodes: &mut Vec<cairn_core::Fingerprint>,
        leaves: &mut Vec<cairn_core::Fingerprint>,
    ) -> Result<()> {
        self.for_each_leaf_noting_nodes(blob, Some(nodes), &mut |fp| {
            leaves.push(*fp);
            Ok(())
        })
    }

    fn for_each_leaf_noting_nodes(
        &mut self,
        blob: &BlobRef,
        nodes: Option<&mut Vec<cairn_core::Fingerprint>>,
        leaf: &mut dyn FnMut(&cairn_core::Fingerprint) -> Result<()>,
    ) -> Result<()> {
        let mut steps = std::mem::take(&mut self.steps);
        steps.clear();
        let r =
            plan::plan_blob_noting_nodes(&self.store, self.meta.as_mut(), blob, &mut steps, nodes)
                .and_then(|()| steps.iter().try_for_each(|s| leaf(&s.fp)));
        self.steps = steps;
        r
    }

    /// A blob's data chunks in order with their sizes, as a restore plans
    /// them (recipe nodes read and checked), without reading the chunks.
    pub fn plan_steps(&mut self, blob: &BlobRef, out: &mut Vec<PlanStep>) -> Result<()> {
        plan::plan_blob(&self.store, self.meta.as_mut(), blob, out)
    }

    /// Reads one chunk (any kind) through the metadata cache, verified.
    pub fn read_chunk(&mut self, fp: &cairn_core::Fingerprint, out: &mut Vec<u8>) -> Result<()> {
        self.meta.read_chunk(fp, &self.store, out)
    }
}
