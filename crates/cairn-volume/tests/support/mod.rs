//! Shared setup of the volume tests: a clear volume with a 1 s minimum
//! age, trees of files that share content, aging them past that age, and
//! reading a file through the content state.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rand::{Rng, SeedableRng};

use cairn_volume::content::Content;
use cairn_volume::{Policy, Volume, VolumeContent, VolumeSettings};

/// A clear volume taking every file of at least one byte, 1 s after its
/// last change.
pub fn create(dir: &Path) -> Volume {
    Volume::create(
        dir,
        VolumeSettings {
            policy: Policy {
                min_age_secs: 1,
                min_size: 1,
                excluded: Vec::new(),
            },
            encryption: None,
        },
    )
    .unwrap()
}

/// Opens a clear volume (its store never asks for a key).
///
/// A refusal as "open elsewhere" is retried for a few seconds: the
/// volume's `flock` belongs to the open file description, and a test
/// thread of this binary that spawns a child process (the crash tests)
/// duplicates every descriptor into that child until its `exec` closes
/// them, so a volume dropped during that window stays locked for as long
/// as the spawn takes on a loaded machine.
pub fn open(dir: &Path) -> Volume {
    open_with(dir, &mut |_, _| panic!("a clear store needs no key"))
}

/// Opens a volume whose store's key `master_key` decides, retrying a
/// refusal as "open elsewhere" as [`open`] says.
pub fn open_with(dir: &Path, master_key: &mut cairn_engine::MasterKeySource<'_>) -> Volume {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match Volume::open(dir, master_key) {
            Ok(vol) => return vol,
            Err(e)
                if e.to_string().contains("open elsewhere")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("opening {}: {e}", dir.display()),
        }
    }
}

/// Source-like text: lines of words from a small vocabulary (compresses).
pub fn text(rng: &mut impl Rng, len: usize) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "fn", "let", "mut", "return", "match", "impl", "struct", "self", "Ok", "Err", "if", "else",
        "for", "in", "while", "pub", "use", "crate", "value", "index", "chunk",
    ];
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        let w = WORDS[rng.gen_range(0..WORDS.len())];
        out.extend_from_slice(w.as_bytes());
        out.push(if rng.gen_range(0..8) == 0 {
            b'\n'
        } else {
            b' '
        });
    }
    out.truncate(len);
    out
}

/// Writes `versions` versions of a source-like tree of `files` files
/// (each version edits a few lines of the last), plus two large files
/// sharing most of their content. Returns every file's bytes by path
/// below `DIR/files`.
pub fn write_tree(
    files_dir: &Path,
    versions: usize,
    files: usize,
    seed: u64,
) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut contents: Vec<Vec<u8>> = (0..files)
        .map(|_| {
            let len = rng.gen_range(20_000..120_000);
            text(&mut rng, len)
        })
        .collect();
    let mut out = BTreeMap::new();
    for v in 0..versions {
        for (i, c) in contents.iter_mut().enumerate() {
            if v > 0 && i % 3 == 0 {
                let at = rng.gen_range(0..c.len());
                let edit = text(&mut rng, 200);
                c.splice(at..at, edit);
            }
            let rel = PathBuf::from(format!("v{v}/src/mod{}/file{i}.rs", i % 4));
            out.insert(rel, c.clone());
        }
    }
    let base = text(&mut rng, 3 << 20);
    let mut image = base.clone();
    let noise: Vec<u8> = (0..200_000).map(|_| rng.gen()).collect();
    image.splice(1 << 20..1 << 20, noise);
    out.insert(PathBuf::from("images/a.img"), base);
    out.insert(PathBuf::from("images/b.img"), image);
    for (rel, bytes) in &out {
        let path = files_dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, bytes).unwrap();
    }
    out
}

/// Sets every file's times an hour back and waits until its ctime is over
/// 1 s old: the files are then eligible under a 1 s minimum age.
pub fn age(files_dir: &Path) {
    age_all(&[files_dir]);
}

/// [`age`] for several trees, waiting once.
pub fn age_all(files_dirs: &[&Path]) {
    let old = filetime::FileTime::from_system_time(SystemTime::now() - Duration::from_secs(3600));
    for dir in files_dirs {
        for e in walk(dir) {
            filetime::set_file_times(&e, old, old).unwrap();
        }
    }
    std::thread::sleep(Duration::from_millis(1100));
}

/// Every regular file below `dir`.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The inode of `path`.
pub fn ino(path: &Path) -> u64 {
    fs::metadata(path).unwrap().ino()
}

/// `len` bytes at `offset` of the file at `path`, through `content`.
pub fn read(content: &VolumeContent, path: &Path, offset: u64, len: usize) -> Vec<u8> {
    let f = File::open(path).unwrap();
    let mut buf = vec![0u8; len];
    let n = content.read_at(ino(path), &f, offset, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// The whole file at `path`, through `content`.
pub fn read_all(content: &VolumeContent, path: &Path) -> Vec<u8> {
    let len = fs::metadata(path).unwrap().len() as usize;
    read(content, path, 0, len + 1)
}
