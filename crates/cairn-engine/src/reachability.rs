//! Reachability: from snapshot roots through directory listings and recipe
//! trees (`003_ea5fccc485a97c5d.txt` §2: a snapshot is a Merkle tree whose
//! leaves are data chunks) to every chunk a snapshot needs. `check` walks
//! it to find what is missing or damaged; garbage collection and `forget`
//! walk it to find what is live (003 §3.1 "Enumeration").
//!
//! The walk reads listings and tree nodes through the [`Visitor`] (which
//! locates, reads and reports as it needs) and reports data chunks without
//! reading them. Damage the walk itself finds (a node of the wrong level, an
//! undecodable node or listing) goes to [`Visitor::damage`], and the walk
//! goes on with the rest. A sound subtree is walked once per walker: a file
//! recipe or a whole directory already found sound is not walked again, so
//! snapshots that share most of their tree cost little more than one; a
//! damaged one is walked again for every snapshot that reaches it, so each
//! is told about it.

use cairn_core::{Fingerprint, FpSet};
use cairn_format::dir::{decode_dir, BlobRef, DirEntry, EntryKind};
use cairn_format::tree::decode_tree_node;

/// Where a chunk was reached: the snapshot id and the path inside it.
#[derive(Clone, Copy, Debug)]
pub struct At<'a> {
    pub snapshot: &'a str,
    pub path: &'a str,
}

pub trait Visitor {
    /// A data chunk (a leaf of a file's recipe) is reachable. `false` if it
    /// is missing or damaged (the visitor reports it).
    fn data(&mut self, fp: &Fingerprint, at: At<'_>) -> bool;

    /// The bytes of a recipe node (`level` >= 1) or listing chunk (level
    /// 0), verified; `None` if it cannot be read (the visitor reports it).
    fn read(&mut self, fp: &Fingerprint, level: u8, at: At<'_>) -> Option<Vec<u8>>;

    /// A file's content tree. `None` (the default): the walk descends into
    /// it; `Some(sound)`: the visitor took it over (physical GC only walks
    /// the namespace and scans file trees level by level, 003 §3.2).
    fn file(&mut self, _content: &BlobRef, _at: At<'_>) -> Option<bool> {
        None
    }

    /// Damage the walk found in bytes it was given.
    fn damage(&mut self, message: String, fp: Option<&Fingerprint>, at: At<'_>);
}

pub struct Reachability {
    fp_width: usize,
    /// Whether sound subtrees are remembered and skipped. Logical GC (003
    /// §3.1) walks every file of every snapshot, shared or not: that cost,
    /// growing with logical size, is what the paper measures.
    memo: bool,
    /// File recipes (tree roots and nodes) found sound.
    sound_files: FpSet,
    /// Directory listings whose whole subtree was found sound.
    sound_dirs: FpSet,
}

impl Reachability {
    pub fn new(fp_width: usize) -> Self {
        Reachability {
            fp_width,
            memo: true,
            sound_files: FpSet::default(),
            sound_dirs: FpSet::default(),
        }
    }

    /// A walker that forgets what it walked: every snapshot's whole tree
    /// is visited (003 §3.1 logical enumeration).
    pub fn logical(fp_width: usize) -> Self {
        Reachability {
            memo: false,
            ..Self::new(fp_width)
        }
    }

    /// Walks one snapshot's tree from its root listing; `true` if every
    /// chunk it needs is sound.
    pub fn walk_snapshot(&mut self, snapshot: &str, root: &BlobRef, v: &mut dyn Visitor) -> bool {
        self.walk_dir(v, snapshot, "", root)
    }

    fn walk_dir(
        &mut self,
        v: &mut dyn Visitor,
        snapshot: &str,
        path: &str,
        blob: &BlobRef,
    ) -> bool {
        if self.sound_dirs.contains(&blob.root) {
            return true;
        }
        let shown = if path.is_empty() { "/" } else { path };
        let at = At {
            snapshot,
            path: shown,
        };
        let mut bytes = Vec::with_capacity(blob.size.min(1 << 24) as usize);
        if !self.read_blob(v, at, blob.root, blob.level, &mut bytes) {
            return false;
        }
        let entries = match check_len(blob, &bytes).and_then(|()| decode_dir(&bytes, self.fp_width))
        {
            Ok(e) => e,
            Err(e) => {
                v.damage(format!("directory listing unreadable: {e}"), None, at);
                return false;
            }
        };
        let sound = self.walk_entries(v, snapshot, path, entries);
        if sound && self.memo {
            self.sound_dirs.insert(blob.root);
        }
        sound
    }

    /// One directory's entries; inline listings are walked in place (they
    /// are part of the listing blob already read, so sound only with it).
    fn walk_entries(
        &mut self,
        v: &mut dyn Visitor,
        snapshot: &str,
        path: &str,
        entries: Vec<DirEntry>,
    ) -> bool {
        let mut sound = true;
        for e in entries {
            let child = crate::read::join(path, &e.name);
            match (e.kind, &e.content, e.children) {
                (EntryKind::Dir, _, Some(inline)) => {
                    sound &= self.walk_entries(v, snapshot, &child, inline)
                }
                (EntryKind::Dir, Some(b), None) => sound &= self.walk_dir(v, snapshot, &child, b),
                (EntryKind::File, Some(b), _) => {
                    let at = At {
                        snapshot,
                        path: &child,
                    };
                    sound &= match v.file(b, at) {
                        Some(s) => s,
                        None => self.walk_file(v, at, b.root, b.level),
                    };
                }
                _ => {}
            }
        }
        sound
    }

    /// A file's recipe: nodes read, data leaves reported.
    fn walk_file(&mut self, v: &mut dyn Visitor, at: At<'_>, fp: Fingerprint, level: u8) -> bool {
        if self.sound_files.contains(&fp) {
            return true;
        }
        let sound = if level == 0 {
            v.data(&fp, at)
        } else {
            match self.node(v, at, fp, level) {
                None => false,
                Some(children) => {
                    let mut ok = true;
                    for c in children {
                        ok &= self.walk_file(v, at, c, level - 1);
                    }
                    ok
                }
            }
        };
        if sound && self.memo {
            self.sound_files.insert(fp);
        }
        sound
    }

    /// A listing's recipe: every node and leaf read, leaves appended to `out`.
    fn read_blob(
        &mut self,
        v: &mut dyn Visitor,
        at: At<'_>,
        fp: Fingerprint,
        level: u8,
        out: &mut Vec<u8>,
    ) -> bool {
        if level == 0 {
            return match v.read(&fp, 0, at) {
                Some(b) => {
                    out.extend_from_slice(&b);
                    true
                }
                None => false,
            };
        }
        let Some(children) = self.node(v, at, fp, level) else {
            return false;
        };
        let mut ok = true;
        for c in children {
            ok &= self.read_blob(v, at, c, level - 1, out);
        }
        ok
    }

    /// Reads and decodes recipe node `fp`, which must be at `level`.
    fn node(
        &mut self,
        v: &mut dyn Visitor,
        at: At<'_>,
        fp: Fingerprint,
        level: u8,
    ) -> Option<Vec<Fingerprint>> {
        let bytes = v.read(&fp, level, at)?;
        match decode_tree_node(&bytes, self.fp_width) {
            Ok(node) if node.level == level => Some(node.children.iter().map(|c| c.fp).collect()),
            Ok(node) => {
                v.damage(
                    format!("tree node {fp} has level {}, expected {level}", node.level),
                    Some(&fp),
                    at,
                );
                None
            }
            Err(e) => {
                v.damage(format!("tree node {fp}: {e}"), Some(&fp), at);
                None
            }
        }
    }
}

fn check_len(blob: &BlobRef, bytes: &[u8]) -> cairn_core::Result<()> {
    if bytes.len() as u64 != blob.size {
        return Err(cairn_core::Error::corrupt(
            format!("tree under {}", blob.root),
            format!(
                "recorded size {} bytes, content holds {}",
                blob.size,
                bytes.len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use cairn_format::dir::{encode_dir, DirEntry};
    use cairn_format::tree::{encode_tree_node, ChildRef, TreeNode};

    use super::*;

    /// Chunks by fingerprint; records what the walk asked for.
    #[derive(Default)]
    struct Store {
        chunks: HashMap<Fingerprint, Vec<u8>>,
        data: Vec<(Fingerprint, String, String)>,
        reads: usize,
        damage: Vec<String>,
        missing: Vec<Fingerprint>,
    }

    fn fp_of(b: &[u8]) -> Fingerprint {
        Fingerprint::from_slice(blake3::hash(b).as_bytes())
    }

    impl Store {
        fn put(&mut self, bytes: Vec<u8>) -> Fingerprint {
            let fp = fp_of(&bytes);
            self.chunks.insert(fp, bytes);
            fp
        }

        /// A file of two data chunks under one L1 node.
        fn file(&mut self, name: &str, a: &[u8], b: &[u8]) -> DirEntry {
            let (fa, fb) = (fp_of(a), fp_of(b));
            let node = TreeNode {
                level: 1,
                children: vec![
                    ChildRef {
                        fp: fa,
                        size: a.len() as u64,
                    },
                    ChildRef {
                        fp: fb,
                        size: b.len() as u64,
                    },
                ],
            };
            let mut bytes = Vec::new();
            encode_tree_node(&node, &mut bytes);
            let root = self.put(bytes);
            entry(
                name,
                EntryKind::File,
                Some(BlobRef {
                    root,
                    level: 1,
                    size: (a.len() + b.len()) as u64,
                }),
            )
        }

        fn dir(&mut self, name: &str, mut entries: Vec<DirEntry>) -> DirEntry {
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            let mut bytes = Vec::new();
            encode_dir(&entries, &mut bytes).unwrap();
            let size = bytes.len() as u64;
            let root = self.put(bytes);
            entry(
                name,
                EntryKind::Dir,
                Some(BlobRef {
                    root,
                    level: 0,
                    size,
                }),
            )
        }
    }

    fn entry(name: &str, kind: EntryKind, content: Option<BlobRef>) -> DirEntry {
        DirEntry {
            name: name.as_bytes().to_vec(),
            kind,
            mode: 0o644,
            uid: 0,
            gid: 0,
            mtime_ns: 0,
            size: content.as_ref().map_or(0, |b| b.size),
            target: None,
            content,
            ctime_ns: 0,
            inode: 0,
            children: None,
            extras: Default::default(),
        }
    }

    impl Visitor for Store {
        fn data(&mut self, fp: &Fingerprint, at: At<'_>) -> bool {
            self.data.push((*fp, at.snapshot.into(), at.path.into()));
            !self.missing.contains(fp)
        }
        fn read(&mut self, fp: &Fingerprint, _level: u8, _at: At<'_>) -> Option<Vec<u8>> {
            self.reads += 1;
            self.chunks.get(fp).cloned()
        }
        fn damage(&mut self, message: String, _fp: Option<&Fingerprint>, at: At<'_>) {
            self.damage
                .push(format!("{}:{}: {message}", at.snapshot, at.path));
        }
    }

    #[test]
    fn shared_subtrees_are_walked_once_damage_in_each_snapshot() {
        let mut s = Store::default();
        let f1 = s.file("f1", b"aaaa", b"bbbb");
        let f2 = s.file("f2", b"cccc", b"dddd");
        let shared = s.dir("shared", vec![f1]);
        let root1 = s.dir("", vec![shared.clone(), f2.clone()]).content.unwrap();
        let root2 = s.dir("", vec![shared, f2]).content.unwrap();
        let mut r = Reachability::new(32);
        assert!(r.walk_snapshot("s1", &root1, &mut s));
        let (data, reads) = (s.data.len(), s.reads);
        assert_eq!(data, 4, "every data chunk reported once");
        // Same tree again: both roots are identical listings, sound: nothing read.
        assert!(r.walk_snapshot("s2", &root2, &mut s));
        assert_eq!((s.data.len(), s.reads), (data, reads));

        // A missing data chunk is reported for each snapshot reaching it.
        let mut s2 = Store {
            chunks: s.chunks.clone(),
            missing: vec![fp_of(b"dddd")],
            ..Default::default()
        };
        let mut r = Reachability::new(32);
        assert!(!r.walk_snapshot("s1", &root1, &mut s2));
        assert!(!r.walk_snapshot("s2", &root2, &mut s2));
        let at: Vec<_> = s2
            .data
            .iter()
            .filter(|(fp, ..)| *fp == fp_of(b"dddd"))
            .map(|(_, snap, path)| format!("{snap}:{path}"))
            .collect();
        assert_eq!(at, vec!["s1:f2", "s2:f2"]);
    }

    #[test]
    fn an_unreadable_node_is_reported_and_the_walk_goes_on() {
        let mut s = Store::default();
        let bad = s.file("bad", b"1111", b"2222");
        let good = s.file("good", b"3333", b"4444");
        // The bad file's recipe node decodes to garbage.
        let bad_root = bad.content.unwrap().root;
        s.chunks.insert(bad_root, vec![9, 9, 9]);
        let root = s.dir("", vec![bad, good]).content.unwrap();
        let mut r = Reachability::new(32);
        assert!(!r.walk_snapshot("s", &root, &mut s));
        assert_eq!(s.damage.len(), 1, "{:?}", s.damage);
        assert!(
            s.damage[0].starts_with("s:bad: tree node"),
            "{:?}",
            s.damage
        );
        assert!(s.data.iter().any(|(fp, ..)| *fp == fp_of(b"4444")));
    }
}
