//! Deterministic benchmark data.
//!
//! Content is a sequence of *segments* (16 KiB..1 MiB), each either
//! incompressible pseudo-random bytes (splitmix64) or, with probability
//! [`TEXT_PCT`]%, compressible text (words drawn from a small vocabulary); a
//! segment is a pure function of its seed, kind and length, so a stream can
//! repeat earlier content without storing it.
//!
//! [`Dataset::prepare`] writes two generations of real files:
//!
//! * `gen1/`: `--mib` MiB in files of 64 KiB..64 MiB (log-uniform sizes) in
//!   [`DIRS`] directories `d00..`;
//! * `gen2/`: gen1 edited so that at least `dup_pct`% of its bytes are
//!   duplicates of gen1: an edit budget of 95% of the remaining share is
//!   spent 70% on regions of 8 KiB..512 KiB in files chosen by byte weight
//!   (overwrite 50%, insert 30%, delete 20%; each also charged 16 KiB for the
//!   chunks its edges change) and 30% on new files. Other files are copied.
//!
//! A `dataset.json` manifest written last marks a complete dataset; a later
//! run with the same parameters reuses it.
//!
//! [`Evolving`] is the other shape, for the garbage-collection benchmark: one
//! tree changed in place generation after generation (whole-file rewrites,
//! overwritten regions, deletions replaced by new files), so that data of
//! older generations becomes garbage once their snapshots are forgotten.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use cairn_core::rng::SplitMix64;
use serde_json::{json, Value};

pub const MIN_FILE: u64 = 64 << 10;
pub const MAX_FILE: u64 = 64 << 20;
pub const DIRS: u64 = 8;
/// Share of segments that are compressible text.
pub const TEXT_PCT: u64 = 15;
const SEED: u64 = 0x6361_6972_6e2d_6473;
const VERSION: u64 = 2;

/// The workspace's deterministic generator (`cairn_core::rng`, splitmix64),
/// with the draws a dataset needs.
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(SplitMix64::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }

    /// Uniform in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo)
    }

    /// Log-uniform in `lo..hi`.
    pub fn log_uniform(&mut self, lo: u64, hi: u64) -> u64 {
        let f = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((lo as f64) * (hi as f64 / lo as f64).powf(f)) as u64
    }

    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

/// Fills `out` with pseudo-random bytes from `seed`.
pub fn fill_random(seed: u64, out: &mut [u8]) {
    let mut r = Rng::new(seed);
    let mut words = out.chunks_exact_mut(8);
    for w in &mut words {
        w.copy_from_slice(&r.next_u64().to_le_bytes());
    }
    let rest = words.into_remainder();
    let last = r.next_u64().to_le_bytes();
    let n = rest.len();
    rest.copy_from_slice(&last[..n]);
}

const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "had",
    "they",
    "you",
    "were",
    "their",
    "one",
    "all",
    "we",
    "can",
    "her",
    "has",
    "there",
    "been",
    "if",
    "more",
    "when",
    "will",
    "would",
    "who",
    "so",
    "no",
    "backup",
    "chunk",
    "container",
    "index",
    "segment",
    "restore",
    "snapshot",
    "fingerprint",
    "locality",
    "cache",
    "stream",
    "bloom",
    "filter",
    "repository",
    "deduplication",
    "storage",
];

/// Fills `out` with text: words from [`WORDS`], lines of about ten words.
pub fn fill_text(seed: u64, out: &mut [u8]) {
    let mut r = Rng::new(seed);
    let mut pos = 0;
    let mut col = 0;
    while pos < out.len() {
        let x = r.next_u64();
        let w = WORDS[(x % WORDS.len() as u64) as usize].as_bytes();
        col += 1;
        let sep: &[u8] = if col == 11 {
            col = 0;
            b".\n"
        } else if ((x >> 32) as u8) < 15 {
            b", "
        } else {
            b" "
        };
        for part in [w, sep] {
            let n = part.len().min(out.len() - pos);
            out[pos..pos + n].copy_from_slice(&part[..n]);
            pos += n;
        }
    }
}

/// A run of generated content: a pure function of its fields.
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    pub seed: u64,
    pub len: usize,
    pub text: bool,
}

impl Segment {
    /// A segment of 16 KiB..1 MiB (at most `max_len`), text with
    /// probability [`TEXT_PCT`]%.
    pub fn draw(rng: &mut Rng, max_len: u64) -> Segment {
        let len = rng_len(rng).min(max_len);
        Segment::draw_len(rng, len)
    }

    pub fn draw_len(rng: &mut Rng, len: u64) -> Segment {
        Segment {
            text: rng.chance(TEXT_PCT),
            seed: rng.next_u64(),
            len: len as usize,
        }
    }

    /// Writes the segment's bytes into `out` (resized to its length).
    pub fn fill(&self, out: &mut Vec<u8>) {
        out.resize(self.len, 0);
        if self.text {
            fill_text(self.seed, out);
        } else {
            fill_random(self.seed, out);
        }
    }
}

fn rng_len(rng: &mut Rng) -> u64 {
    rng.range(16 << 10, (1 << 20) + 1)
}

/// Writes `size` bytes of fresh segments to `path`.
pub fn write_fresh(path: &Path, size: u64, rng: &mut Rng, buf: &mut Vec<u8>) -> Result<()> {
    let f = fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let mut left = size;
    while left > 0 {
        let s = Segment::draw(rng, left);
        s.fill(buf);
        w.write_all(buf)?;
        left -= s.len as u64;
    }
    w.flush()
        .with_context(|| format!("writing {}", path.display()))
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum EditKind {
    Overwrite,
    Insert,
    Delete,
}

struct Edit {
    kind: EditKind,
    len: u64,
}

/// A prepared two-generation dataset.
pub struct Dataset {
    pub root: PathBuf,
    pub mib: u64,
    pub dup_pct: u64,
    /// The manifest: sizes, file counts and edit counts.
    pub manifest: Value,
    pub reused: bool,
    pub gen_bytes: [u64; 2],
    pub gen_files: [u64; 2],
}

impl Dataset {
    pub fn gen_dir(&self, generation: usize) -> PathBuf {
        self.root.join(format!("gen{generation}"))
    }

    /// Reuses the dataset under `root` if its manifest matches, otherwise
    /// (re)generates it.
    pub fn prepare(root: &Path, mib: u64, dup_pct: u64) -> Result<Dataset> {
        anyhow::ensure!(mib > 0, "--mib must be positive");
        anyhow::ensure!(dup_pct <= 100, "--dup-pct must be at most 100");
        let manifest_path = root.join("dataset.json");
        if let Ok(bytes) = fs::read(&manifest_path) {
            if let Ok(m) = serde_json::from_slice::<Value>(&bytes) {
                if m["version"] == VERSION && m["mib"] == mib && m["dup_pct"] == dup_pct {
                    return Ok(Self::from_manifest(root, m, true));
                }
            }
        }
        let _ = fs::remove_file(&manifest_path);
        let m = generate(root, mib, dup_pct)?;
        fs::write(&manifest_path, serde_json::to_vec_pretty(&m)?)
            .with_context(|| format!("writing {}", manifest_path.display()))?;
        Ok(Self::from_manifest(root, m, false))
    }

    fn from_manifest(root: &Path, m: Value, reused: bool) -> Dataset {
        let n = |g: &str, k: &str| m[g][k].as_u64().unwrap_or(0);
        Dataset {
            root: root.to_path_buf(),
            mib: m["mib"].as_u64().unwrap_or(0),
            dup_pct: m["dup_pct"].as_u64().unwrap_or(0),
            gen_bytes: [n("gen1", "bytes"), n("gen2", "bytes")],
            gen_files: [n("gen1", "files"), n("gen2", "files")],
            manifest: m,
            reused,
        }
    }
}

fn generate(root: &Path, mib: u64, dup_pct: u64) -> Result<Value> {
    let (g1, g2) = (root.join("gen1"), root.join("gen2"));
    for g in [&g1, &g2] {
        crate::common::remove(g)?;
        for d in 0..DIRS {
            fs::create_dir_all(g.join(format!("d{d:02}")))?;
        }
    }
    let mut rng = Rng::new(SEED);
    let mut buf = Vec::with_capacity(1 << 20);

    // Generation 1.
    let total = mib << 20;
    let mut files: Vec<(PathBuf, u64)> = Vec::new();
    let mut left = total;
    while left > 0 {
        let mut size = rng.log_uniform(MIN_FILE, MAX_FILE).min(left);
        if left - size < MIN_FILE {
            size = left;
        }
        let rel = PathBuf::from(format!("d{:02}/f{:05}", rng.below(DIRS), files.len()));
        write_fresh(&g1.join(&rel), size, &mut rng, &mut buf)?;
        files.push((rel, size));
        left -= size;
    }

    // Generation 2: plan the edits.
    let budget = (total as f64 * (100 - dup_pct) as f64 / 100.0 * 0.95) as u64;
    let mut new_budget = budget * 3 / 10;
    let mut edit_budget = budget - new_budget;
    let starts: Vec<u64> = files
        .iter()
        .scan(0, |acc, (_, s)| {
            let start = *acc;
            *acc += s;
            Some(start)
        })
        .collect();
    let mut edits: Vec<Vec<Edit>> = (0..files.len()).map(|_| Vec::new()).collect();
    const EDGE_COST: u64 = 16 << 10;
    while edit_budget > EDGE_COST {
        let at = rng.below(total);
        let i = starts.partition_point(|&s| s <= at) - 1;
        let kind = match rng.below(10) {
            0..=4 => EditKind::Overwrite,
            5..=7 => EditKind::Insert,
            _ => EditKind::Delete,
        };
        let len = rng.log_uniform(8 << 10, 512 << 10);
        let cost = EDGE_COST + if kind == EditKind::Delete { 0 } else { len };
        edits[i].push(Edit { kind, len });
        edit_budget = edit_budget.saturating_sub(cost);
    }

    // Generation 2: write it.
    let (mut counts, mut bytes) = ([0u64; 3], [0u64; 3]);
    let (mut g2_bytes, mut g2_files, mut edited) = (0u64, 0u64, 0u64);
    let mut seg = Vec::new();
    for ((rel, _), file_edits) in files.iter().zip(&edits) {
        let (src, dst) = (g1.join(rel), g2.join(rel));
        if file_edits.is_empty() {
            g2_bytes += fs::copy(&src, &dst)
                .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
        } else {
            edited += 1;
            let mut data = fs::read(&src).with_context(|| format!("reading {}", src.display()))?;
            for e in file_edits {
                let cur = data.len() as u64;
                let pos = rng.below(cur) as usize;
                let k = e.kind as usize;
                counts[k] += 1;
                match e.kind {
                    EditKind::Overwrite => {
                        let n = e.len.min(cur - pos as u64);
                        Segment::draw_len(&mut rng, n).fill(&mut seg);
                        data[pos..pos + seg.len()].copy_from_slice(&seg);
                        bytes[k] += n;
                    }
                    EditKind::Insert => {
                        Segment::draw_len(&mut rng, e.len).fill(&mut seg);
                        data.splice(pos..pos, seg.iter().copied());
                        bytes[k] += e.len;
                    }
                    EditKind::Delete => {
                        let n = e.len.min(cur - pos as u64).min(cur / 2) as usize;
                        data.drain(pos..pos + n);
                        bytes[k] += n as u64;
                    }
                }
            }
            fs::write(&dst, &data).with_context(|| format!("writing {}", dst.display()))?;
            g2_bytes += data.len() as u64;
        }
        g2_files += 1;
    }
    let (mut new_files, mut new_bytes) = (0u64, 0u64);
    while new_budget >= MIN_FILE {
        let size = rng.log_uniform(MIN_FILE, 16 << 20).min(new_budget);
        let rel = format!("d{:02}/n{:05}", rng.below(DIRS), new_files);
        write_fresh(&g2.join(rel), size, &mut rng, &mut buf)?;
        new_budget -= size;
        new_files += 1;
        new_bytes += size;
    }
    g2_bytes += new_bytes;
    g2_files += new_files;

    Ok(json!({
        "version": VERSION,
        "mib": mib,
        "dup_pct": dup_pct,
        "text_pct": TEXT_PCT,
        "gen1": { "bytes": total, "files": files.len() },
        "gen2": {
            "bytes": g2_bytes,
            "files": g2_files,
            "edited_files": edited,
            "overwrites": counts[0], "overwritten_bytes": bytes[0],
            "inserts": counts[1], "inserted_bytes": bytes[1],
            "deletes": counts[2], "deleted_bytes": bytes[2],
            "new_files": new_files, "new_file_bytes": new_bytes,
        },
    }))
}

/// Largest file of an [`Evolving`] tree: smaller than [`MAX_FILE`] so a
/// tree of a few hundred MiB has enough files for a change share to mean
/// something.
pub const EVOLVING_MAX_FILE: u64 = 8 << 20;
const EVOLVING_SEED: u64 = 0x6361_6972_6e2d_6763;

/// What one generation of an [`Evolving`] tree changed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GenChange {
    pub rewritten_files: u64,
    pub rewritten_bytes: u64,
    pub overwritten_regions: u64,
    pub overwritten_bytes: u64,
    pub deleted_files: u64,
    pub deleted_bytes: u64,
    pub new_files: u64,
    pub new_bytes: u64,
}

/// A file tree under `root` (directories `d00..`) changed in place, one
/// generation at a time; deterministic for a given size and change share.
pub struct Evolving {
    pub root: PathBuf,
    rng: Rng,
    buf: Vec<u8>,
    /// (path relative to root, size), in creation order.
    files: Vec<(PathBuf, u64)>,
    next_name: u64,
}

impl Evolving {
    /// Generation 1: `mib` MiB of fresh files of 64 KiB..8 MiB (log-uniform).
    pub fn create(root: &Path, mib: u64) -> Result<Evolving> {
        anyhow::ensure!(mib > 0, "the tree needs at least 1 MiB");
        crate::common::remove(root)?;
        for d in 0..DIRS {
            fs::create_dir_all(root.join(format!("d{d:02}")))?;
        }
        let mut t = Evolving {
            root: root.to_path_buf(),
            rng: Rng::new(EVOLVING_SEED ^ mib),
            buf: Vec::with_capacity(1 << 20),
            files: Vec::new(),
            next_name: 0,
        };
        t.add_files(mib << 20)?;
        Ok(t)
    }

    /// Bytes currently in the tree.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.1).sum()
    }

    pub fn files(&self) -> usize {
        self.files.len()
    }

    /// New files totalling `total` bytes.
    fn add_files(&mut self, total: u64) -> Result<(u64, u64)> {
        let (mut n, mut left) = (0, total);
        while left > 0 {
            let mut size = self.rng.log_uniform(MIN_FILE, EVOLVING_MAX_FILE).min(left);
            if left - size < MIN_FILE {
                size = left;
            }
            let rel = PathBuf::from(format!(
                "d{:02}/f{:06}",
                self.rng.below(DIRS),
                self.next_name
            ));
            self.next_name += 1;
            write_fresh(&self.root.join(&rel), size, &mut self.rng, &mut self.buf)?;
            self.files.push((rel, size));
            left -= size;
            n += 1;
        }
        Ok((n, total))
    }

    /// The next generation: each file is changed with probability
    /// `change_pct`%; a changed file is rewritten whole with fresh content
    /// (40%), gets 1..4 regions of 8 KiB..512 KiB overwritten (40%), or is
    /// deleted (20%). New files replace the deleted bytes, so the tree keeps
    /// its size. Everything a change replaces is garbage once every
    /// snapshot holding it is forgotten.
    pub fn next_generation(&mut self, change_pct: u64) -> Result<GenChange> {
        let mut c = GenChange::default();
        let mut kept = Vec::with_capacity(self.files.len());
        for (rel, size) in std::mem::take(&mut self.files) {
            let path = self.root.join(&rel);
            if !self.rng.chance(change_pct) {
                kept.push((rel, size));
                continue;
            }
            match self.rng.below(10) {
                0..=3 => {
                    write_fresh(&path, size, &mut self.rng, &mut self.buf)?;
                    c.rewritten_files += 1;
                    c.rewritten_bytes += size;
                    kept.push((rel, size));
                }
                4..=7 => {
                    let mut data =
                        fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                    for _ in 0..self.rng.range(1, 5) {
                        let len = self.rng.log_uniform(8 << 10, 512 << 10).min(size);
                        let pos = self.rng.below(size - len + 1) as usize;
                        Segment::draw_len(&mut self.rng, len).fill(&mut self.buf);
                        data[pos..pos + self.buf.len()].copy_from_slice(&self.buf);
                        c.overwritten_regions += 1;
                        c.overwritten_bytes += len;
                    }
                    fs::write(&path, &data)
                        .with_context(|| format!("writing {}", path.display()))?;
                    kept.push((rel, size));
                }
                _ => {
                    fs::remove_file(&path)
                        .with_context(|| format!("removing {}", path.display()))?;
                    c.deleted_files += 1;
                    c.deleted_bytes += size;
                }
            }
        }
        self.files = kept;
        (c.new_files, c.new_bytes) = self.add_files(c.deleted_bytes)?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_deterministic() {
        let mut r = Rng::new(7);
        let s = Segment::draw(&mut r, 100_000);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        s.fill(&mut a);
        s.fill(&mut b);
        assert_eq!(a, b);
        assert_eq!(a.len(), s.len);
        let mut t = vec![0u8; 1001];
        fill_text(3, &mut t);
        assert!(t.iter().all(|c| c.is_ascii()));
        let mut u = vec![0u8; 13];
        fill_random(3, &mut u);
        assert_ne!(u, vec![0u8; 13]);
    }

    #[test]
    fn small_dataset_meets_its_dup_target() {
        let dir = std::env::temp_dir().join(format!("cairn-bench-ds-{}", std::process::id()));
        let ds = Dataset::prepare(&dir, 8, 90).unwrap();
        assert_eq!(ds.gen_bytes[0], 8 << 20);
        assert!(!ds.reused);
        let again = Dataset::prepare(&dir, 8, 90).unwrap();
        assert!(again.reused);
        let new = ds.manifest["gen2"]["new_file_bytes"].as_u64().unwrap()
            + ds.manifest["gen2"]["overwritten_bytes"].as_u64().unwrap()
            + ds.manifest["gen2"]["inserted_bytes"].as_u64().unwrap();
        assert!(
            new * 10 <= ds.gen_bytes[1],
            "new {new} of {}",
            ds.gen_bytes[1]
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn evolving_tree_changes_and_keeps_its_size() {
        let dir = std::env::temp_dir().join(format!("cairn-bench-ev-{}", std::process::id()));
        let mut t = Evolving::create(&dir, 4).unwrap();
        assert_eq!(t.bytes(), 4 << 20);
        let walked = |d: &Path| {
            let mut n = 0u64;
            crate::common::walk(d, &mut |_| Ok(()), &mut |p, _| {
                n += fs::metadata(p)?.len();
                Ok(())
            })
            .unwrap();
            n
        };
        let before = crate::common::warm(&[&dir]).unwrap();
        let c = t.next_generation(50).unwrap();
        assert!(c.rewritten_files + c.overwritten_regions + c.deleted_files > 0);
        assert_eq!(c.new_bytes, c.deleted_bytes);
        assert_eq!(t.bytes(), 4 << 20);
        assert_eq!(walked(&dir), 4 << 20);
        assert_eq!(before, 4 << 20);
        // Same size and share: the same tree.
        let other = dir.with_extension("b");
        let mut u = Evolving::create(&other, 4).unwrap();
        assert_eq!(u.next_generation(50).unwrap(), c);
        fs::remove_dir_all(&dir).unwrap();
        fs::remove_dir_all(&other).unwrap();
    }
}
