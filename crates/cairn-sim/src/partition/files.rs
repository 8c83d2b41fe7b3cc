//! `files`: a built-in, deterministic dataset of typed files in directory
//! trees, for the partitioning study of `004_62bf1a5ddd5ed253.txt`.
//!
//! cairn's synthetic workloads (`crate::workload`) carry paths but no file
//! types (`ddfs`: `part-NNN` files, one per stream; `lineage`: one
//! directory per lineage, nothing shared across lineages), so they cannot
//! show the type/path contrast 004 measured. This generator stands in for
//! 004's primary file server (its datasets: home folders, group file shares,
//! software deployment shares, virtualization libraries) with the
//! duplication processes such data has. It is a model, not a measurement:
//! the parameters below are chosen by hand, not fitted to 004's data, except
//! that the two placement probabilities (copies and versions next to their
//! original) were adjusted once so that path partitioning loses about as
//! much as on 004's group file shares. Its numbers show the mechanisms, not
//! 004's datasets.
//!
//! * Volumes (top-level directories): `home-us`, `home-eu`, `home-asia`
//!   (`user-NNN/{Documents,Desktop,Downloads,Pictures,Mail}`), `share-eng`,
//!   `share-biz` (`proj-NN/{docs,data,builds,lab}`), `deploy`
//!   (`product-NN/vN`), `vmlib` (`group-N`).
//! * Each file draws a type ([`TYPES`], by weight), then an action: an exact
//!   **copy** of an earlier file of the same type, a **version** of one (a
//!   fraction of its chunks replaced, sometimes a tail appended), or **new**
//!   content (size log-uniform in the type's range). A copy sits in its
//!   original's directory with probability 0.35, a version with 0.7;
//!   otherwise they go wherever their type goes (another user, share or
//!   volume). Cross-type duplicates are rare: `.bak` copies of office
//!   documents and `.zip` bundles of earlier documents and photos. VHDs are
//!   built from a few shared OS base images (edited, plus unique data and a
//!   zero-filled region); mail stores and VHDs hold zero chunks.
//! * Chunks: 32..96 KiB (mean 64 KiB, 004's chunk size), 20-byte
//!   fingerprints (SHA-1 width, as 004 logged); stored size = size / the
//!   type's compression ratio.
//!
//! The files are emitted in sorted path order (a directory walk) as one
//! input stream.

use cairn_core::{mix64, Error, Fingerprint, Result, TraceChunk};

use super::Dataset;
use crate::workload::SplitMix64;

/// Where files of a type are placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Office,
    Media,
    Mail,
    Software,
    Vm,
    Data,
    Archive,
}

/// How files of one type are made.
#[derive(Clone, Copy, Debug)]
pub struct TypeSpec {
    pub ext: &'static str,
    /// Files of this type per 1000.
    pub weight: u32,
    /// Size range of new content in bytes (log-uniform), at scale 1.
    pub min: u64,
    pub max: u64,
    /// Probability that a file is an exact copy of an earlier one.
    pub copy: f64,
    /// Probability that a file is a version of an earlier one.
    pub version: f64,
    /// Fraction of a version's chunks replaced.
    pub edit: f64,
    /// Local compression ratio (logical / stored).
    pub ratio: f64,
    place: Place,
}

const K: u64 = 1024;
const M: u64 = 1024 * 1024;
const G: u64 = 1024 * 1024 * 1024;

const fn t(
    ext: &'static str,
    weight: u32,
    (min, max): (u64, u64),
    (copy, version, edit): (f64, f64, f64),
    ratio: f64,
    place: Place,
) -> TypeSpec {
    TypeSpec {
        ext,
        weight,
        min,
        max,
        copy,
        version,
        edit,
        ratio,
        place,
    }
}

/// The file types of the dataset. `bak` and `zip` are the cross-type
/// cases; `vhd` is built from base images (its `copy`/`version` still
/// apply).
pub const TYPES: &[TypeSpec] = &[
    t(
        "docx",
        170,
        (20 * K, 3 * M),
        (0.18, 0.22, 0.15),
        1.05,
        Place::Office,
    ),
    t(
        "xlsx",
        110,
        (10 * K, 5 * M),
        (0.15, 0.28, 0.2),
        1.1,
        Place::Office,
    ),
    t(
        "pptx",
        70,
        (300 * K, 30 * M),
        (0.22, 0.2, 0.1),
        1.05,
        Place::Office,
    ),
    t(
        "pdf",
        140,
        (50 * K, 15 * M),
        (0.28, 0.03, 0.3),
        1.1,
        Place::Office,
    ),
    t(
        "txt",
        60,
        (K, 300 * K),
        (0.05, 0.1, 0.3),
        3.0,
        Place::Office,
    ),
    t(
        "bak",
        12,
        (20 * K, 3 * M),
        (0.0, 0.0, 0.0),
        1.05,
        Place::Office,
    ),
    t(
        "jpg",
        150,
        (300 * K, 8 * M),
        (0.12, 0.0, 0.0),
        1.0,
        Place::Media,
    ),
    t(
        "mp4",
        12,
        (10 * M, 400 * M),
        (0.08, 0.0, 0.0),
        1.0,
        Place::Media,
    ),
    t("pst", 8, (50 * M, G), (0.0, 0.1, 0.3), 1.5, Place::Mail),
    t(
        "log",
        50,
        (20 * K, 40 * M),
        (0.0, 0.0, 0.0),
        4.0,
        Place::Data,
    ),
    t(
        "csv",
        30,
        (5 * K, 20 * M),
        (0.05, 0.1, 0.3),
        3.0,
        Place::Data,
    ),
    t(
        "zip",
        35,
        (M, 200 * M),
        (0.0, 0.0, 0.0),
        1.0,
        Place::Archive,
    ),
    t(
        "exe",
        40,
        (500 * K, 80 * M),
        (0.45, 0.2, 0.35),
        1.6,
        Place::Software,
    ),
    t(
        "msi",
        25,
        (2 * M, 300 * M),
        (0.4, 0.25, 0.35),
        1.3,
        Place::Software,
    ),
    t(
        "dll",
        70,
        (50 * K, 10 * M),
        (0.55, 0.15, 0.3),
        1.8,
        Place::Software,
    ),
    t(
        "iso",
        5,
        (100 * M, G),
        (0.25, 0.1, 0.2),
        1.1,
        Place::Software,
    ),
    t("vhd", 5, (256 * M, 4 * G), (0.1, 0.3, 0.05), 1.8, Place::Vm),
];

/// Probability that a copy sits in its original's directory (else it is
/// placed like a new file: anywhere its type goes).
const COPY_NEAR: f64 = 0.35;
/// Probability that a version sits in its original's directory.
const VERSION_NEAR: f64 = 0.7;
/// Share of `.zip` files that bundle earlier documents and photos.
const ZIP_BUNDLE: f64 = 0.3;
/// OS base images the VHDs derive from.
const VHD_BASES: usize = 3;
/// Size of a base image at scale 1.
const VHD_BASE_BYTES: u64 = G;
/// Fraction of a new VHD's base-image chunks replaced.
const VHD_BASE_EDIT: f64 = 0.15;
/// Zero-filled share of a new VHD and of a mail store.
const ZERO_SHARE: f64 = 0.1;
/// Chunk sizes: uniform in `CHUNK_MIN..CHUNK_MAX`.
const CHUNK_MIN: u64 = 32 * K;
const CHUNK_MAX: u64 = 96 * K;
/// Size of the zero chunk.
const ZERO_CHUNK: u32 = 64 * K as u32;
/// The zero chunk's id (no other id reaches it).
const ZERO_ID: u64 = u64::MAX;

/// Largest accepted [`FilesParams::size_scale`] and file count: beyond them
/// the dataset would not fit in memory.
const MAX_SCALE: f64 = 16.0;
const MAX_FILES: usize = 1_000_000;

/// Parameters of [`generate`] (out-of-range values are an error).
#[derive(Clone, Copy, Debug)]
pub struct FilesParams {
    pub files: usize,
    /// Multiplies every size range and the base-image size.
    pub size_scale: f64,
    pub seed: u64,
}

impl FilesParams {
    /// The experiment's sizes: 4000 files, 78 GB, 1.2 million chunks;
    /// `quick`: 800 files at 1/32 the sizes (413 MB, 7,186 chunks).
    pub fn for_run(quick: bool) -> Self {
        if quick {
            FilesParams {
                files: 800,
                size_scale: 1.0 / 32.0,
                seed: 4,
            }
        } else {
            FilesParams {
                files: 4000,
                size_scale: 1.0,
                seed: 4,
            }
        }
    }
}

/// A file's content: (chunk id, size) in order.
type Content = Vec<(u64, u32)>;

struct File {
    path: String,
    ty: usize,
    content: Content,
}

struct Gen {
    rng: SplitMix64,
    next_id: u64,
    scale: f64,
    users: u64,
    projects: u64,
    products: u64,
    groups: u64,
}

impl Gen {
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.rng.below(xs.len() as u64) as usize]
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.next_f64() < p
    }

    /// New content of about `bytes` (at least one chunk).
    fn fresh(&mut self, bytes: u64) -> Content {
        let mut out = Vec::new();
        let mut left = bytes.max(1);
        while left > 0 {
            let size = self.rng.range_inclusive(CHUNK_MIN, CHUNK_MAX - 1).min(left);
            out.push((self.next_id, size as u32));
            self.next_id += 1;
            left -= size;
        }
        out
    }

    fn zeros(&self, bytes: u64) -> Content {
        vec![(ZERO_ID, ZERO_CHUNK); (bytes / ZERO_CHUNK as u64) as usize]
    }

    /// A size log-uniform in the type's range, scaled.
    fn size(&mut self, ty: &TypeSpec) -> u64 {
        let (lo, hi) = (ty.min as f64 * self.scale, ty.max as f64 * self.scale);
        let lo = lo.max(1.0);
        (lo * (hi.max(lo) / lo).powf(self.rng.next_f64())) as u64
    }

    /// `base` with about `frac` of its chunks replaced by new ones (runs of
    /// 1..=3 chunks), and with probability 1/2 a new tail of up to 10%.
    fn edit(&mut self, base: &Content, frac: f64) -> Content {
        let mut out = base.clone();
        let runs = ((out.len() as f64 * frac / 2.0).round() as usize).max(1);
        for _ in 0..runs {
            if out.is_empty() {
                break;
            }
            let at = self.rng.below(out.len() as u64) as usize;
            let len = (self.rng.range_inclusive(1, 3) as usize).min(out.len() - at);
            let bytes: u64 = out[at..at + len].iter().map(|c| c.1 as u64).sum();
            let new = self.fresh(bytes);
            out.splice(at..at + len, new);
        }
        if self.chance(0.5) {
            let bytes: u64 = out.iter().map(|c| c.1 as u64).sum();
            let tail = self.rng.below(bytes / 10 + 1);
            if tail > 0 {
                let new = self.fresh(tail);
                out.extend(new);
            }
        }
        out
    }

    /// A directory for a new file of placement `place`.
    fn place(&mut self, place: Place) -> String {
        let home = |g: &mut Gen, sub: &str| {
            let vol = g.pick(&["home-us", "home-eu", "home-asia"]);
            format!("{vol}/user-{:03}/{sub}", g.rng.below(g.users))
        };
        let share = |g: &mut Gen, sub: &str| {
            let vol = g.pick(&["share-eng", "share-biz"]);
            format!("{vol}/proj-{:02}/{sub}", g.rng.below(g.projects))
        };
        let deploy = |g: &mut Gen| {
            format!(
                "deploy/product-{:02}/v{}",
                g.rng.below(g.products),
                g.rng.range_inclusive(1, 4)
            )
        };
        match place {
            Place::Office => {
                if self.chance(0.6) {
                    let sub = self.pick(&["Documents", "Documents", "Desktop"]);
                    home(self, sub)
                } else {
                    let sub = self.pick(&["docs", "docs", "data"]);
                    share(self, sub)
                }
            }
            Place::Media => {
                if self.chance(0.8) {
                    home(self, "Pictures")
                } else {
                    share(self, "docs")
                }
            }
            Place::Mail => home(self, "Mail"),
            Place::Software => {
                let r = self.rng.next_f64();
                if r < 0.55 {
                    deploy(self)
                } else if r < 0.85 {
                    home(self, "Downloads")
                } else {
                    format!("share-eng/proj-{:02}/builds", self.rng.below(self.projects))
                }
            }
            Place::Vm => {
                if self.chance(0.8) {
                    format!("vmlib/group-{}", self.rng.below(self.groups))
                } else {
                    format!("share-eng/proj-{:02}/lab", self.rng.below(self.projects))
                }
            }
            Place::Data => {
                if self.chance(0.7) {
                    share(self, "data")
                } else {
                    deploy(self)
                }
            }
            Place::Archive => {
                if self.chance(0.5) {
                    home(self, "Downloads")
                } else {
                    share(self, "data")
                }
            }
        }
    }
}

fn ty_index(ext: &str) -> usize {
    TYPES.iter().position(|t| t.ext == ext).unwrap_or(0)
}

/// The fingerprint of chunk `id`: 20 bytes derived from the id.
pub fn chunk_fp(id: u64) -> Fingerprint {
    let mut b = [0u8; 20];
    b[..8].copy_from_slice(&mix64(id ^ 0x0004_f11e_5eed).to_le_bytes());
    b[8..16].copy_from_slice(&mix64(id.wrapping_add(0x9e37_79b9)).to_le_bytes());
    b[16..].copy_from_slice(&(mix64(!id) as u32).to_le_bytes());
    Fingerprint::from_slice(&b)
}

/// Generates the dataset (see the module doc); same parameters, same
/// dataset.
pub fn generate(p: &FilesParams) -> Result<Dataset> {
    if !(p.size_scale > 0.0 && p.size_scale <= MAX_SCALE) || p.files > MAX_FILES {
        return Err(Error::invalid(format!(
            "files dataset: size_scale must be in (0, {MAX_SCALE}] and files at most \
             {MAX_FILES} (got {} and {})",
            p.size_scale, p.files
        )));
    }
    let n = p.files.max(1);
    let mut g = Gen {
        rng: SplitMix64::new(p.seed),
        next_id: 0,
        scale: p.size_scale,
        users: (n as u64 / 100).max(3),
        projects: (n as u64 / 250).max(3),
        products: (n as u64 / 400).max(2),
        groups: (n as u64 / 800).max(3),
    };
    let total_weight: u64 = TYPES.iter().map(|t| t.weight as u64).sum();
    let base_bytes = (VHD_BASE_BYTES as f64 * g.scale) as u64;
    let bases: Vec<Content> = (0..VHD_BASES).map(|_| g.fresh(base_bytes)).collect();
    let mut files: Vec<File> = Vec::with_capacity(n);
    // Files of each type, by index into `files`.
    let mut of_type: Vec<Vec<usize>> = vec![Vec::new(); TYPES.len()];
    for i in 0..n {
        let mut w = g.rng.below(total_weight);
        let ty = TYPES
            .iter()
            .position(|t| {
                let hit = w < t.weight as u64;
                w = w.saturating_sub(t.weight as u64);
                hit
            })
            .unwrap_or(0);
        let spec = TYPES[ty];
        let pool = &of_type[ty];
        let r = g.rng.next_f64();
        let (content, dir) = if !pool.is_empty() && r < spec.copy + spec.version {
            let src = &files[pool[g.rng.below(pool.len() as u64) as usize]];
            let (content, near) = if r < spec.copy {
                (src.content.clone(), COPY_NEAR)
            } else {
                (g.edit(&src.content, spec.edit), VERSION_NEAR)
            };
            let dir = if g.chance(near) {
                src.path[..src.path.rfind('/').unwrap_or(0)].to_string()
            } else {
                g.place(spec.place)
            };
            (content, dir)
        } else {
            (
                new_content(&mut g, &files, &of_type, &bases, ty),
                g.place(spec.place),
            )
        };
        files.push(File {
            path: format!("{dir}/{}-{i:05}.{}", stem(spec.ext), spec.ext),
            ty,
            content,
        });
        of_type[ty].push(i);
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));

    let mut ds = Dataset::new();
    let stream = ds.add_stream("files")?;
    for f in &files {
        let id = ds.add_file(stream, &f.path)?;
        let ratio = TYPES[f.ty].ratio.max(1.0);
        for &(cid, size) in &f.content {
            let stored = if cid == ZERO_ID {
                (size / 100).max(1)
            } else {
                ((size as f64 / ratio) as u32).max(1)
            };
            ds.add_chunk(
                id,
                TraceChunk {
                    fp: chunk_fp(cid),
                    size,
                    stored_size: stored,
                },
            )?;
        }
    }
    Ok(ds)
}

/// New content of type `ty`: fresh data, or the cross-type and base-image
/// cases.
fn new_content(
    g: &mut Gen,
    files: &[File],
    of_type: &[Vec<usize>],
    bases: &[Content],
    ty: usize,
) -> Content {
    let spec = TYPES[ty];
    let size = g.size(&spec);
    match spec.ext {
        "bak" => {
            // A renamed copy of an office document.
            let src_ty = ty_index(g.pick(&["docx", "xlsx", "pptx"]));
            let pool = &of_type[src_ty];
            if pool.is_empty() {
                g.fresh(size)
            } else {
                files[pool[g.rng.below(pool.len() as u64) as usize]]
                    .content
                    .clone()
            }
        }
        "zip" if g.chance(ZIP_BUNDLE) => {
            // Stored (uncompressed) bundle of earlier documents and photos.
            let mut out = Content::new();
            for _ in 0..g.rng.range_inclusive(2, 6) {
                let src_ty = ty_index(g.pick(&["docx", "pdf", "jpg", "pptx"]));
                let pool = &of_type[src_ty];
                if !pool.is_empty() {
                    let f = &files[pool[g.rng.below(pool.len() as u64) as usize]];
                    out.extend_from_slice(&f.content);
                }
            }
            if out.is_empty() {
                g.fresh(size)
            } else {
                out
            }
        }
        "vhd" => {
            let base = &bases[g.rng.below(bases.len() as u64) as usize];
            let mut out = g.edit(base, VHD_BASE_EDIT);
            out.extend(g.zeros((size as f64 * ZERO_SHARE) as u64));
            let have: u64 = out.iter().map(|c| c.1 as u64).sum();
            out.extend(g.fresh(size.saturating_sub(have).max(1)));
            out
        }
        "pst" => {
            let mut out = g.fresh((size as f64 * (1.0 - ZERO_SHARE)) as u64);
            out.extend(g.zeros((size as f64 * ZERO_SHARE) as u64));
            out
        }
        _ => g.fresh(size),
    }
}

/// File name stem by type.
fn stem(ext: &str) -> &'static str {
    match ext {
        "docx" => "report",
        "xlsx" => "budget",
        "pptx" => "slides",
        "pdf" => "paper",
        "txt" => "notes",
        "bak" => "backup",
        "jpg" => "photo",
        "mp4" => "video",
        "pst" => "mailbox",
        "log" => "server",
        "csv" => "export",
        "zip" => "archive",
        "exe" => "setup",
        "msi" => "installer",
        "dll" => "lib",
        "iso" => "media",
        "vhd" => "disk",
        _ => "file",
    }
}
