//! The stream-map table (`DIR/state/`): one [`Entry`] per optimized inode,
//! keyed by inode number, in an embedded ACID database (`redb`: every
//! commit is durable when it returns, and a crash leaves the last commit).
//! A copy of every entry is kept in memory, updated only after its commit,
//! so readers never see an entry the disk does not hold.

mod entry;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use parking_lot::{Mutex, RwLock};
use redb::{Database, Durability, ReadableTable, TableDefinition};

use cairn_core::{Error, Result};

pub use entry::{Entry, FileTimes, Identity};

/// The file in `DIR/state/` holding the table.
pub const TABLE_FILE: &str = "stream-maps.redb";

/// Memory the database may use for caching pages (its default is far
/// larger; entries are also held in memory here).
const TABLE_CACHE_BYTES: usize = 16 << 20;

/// inode number -> encoded [`Entry`] (docs/FORMAT.md, "Volume").
const ENTRIES: TableDefinition<u64, &[u8]> = TableDefinition::new("stream_maps");

/// One change of a batch: an entry written or an inode's entry dropped.
#[derive(Clone, Debug)]
pub enum Change {
    Put(Entry),
    Remove(u64),
}

/// The table, and its entries in memory.
pub struct StreamMapTable {
    db: Database,
    path: PathBuf,
    entries: RwLock<HashMap<u64, Entry>>,
    /// Held across a commit and the memory update after it, so the memory
    /// copy applies commits in the order the database did.
    writer: Mutex<()>,
}

impl std::fmt::Debug for StreamMapTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamMapTable")
            .field("path", &self.path)
            .field("entries", &self.entries.read().len())
            .finish()
    }
}

impl StreamMapTable {
    /// Opens the table in `state_dir`, creating it if absent, and loads
    /// every entry (each checked as it is decoded).
    pub fn open(state_dir: &Path) -> Result<Self> {
        let path = state_dir.join(TABLE_FILE);
        let mut db = Database::builder()
            .set_cache_size(TABLE_CACHE_BYTES)
            .create(&path)
            .map_err(|e| db_error(&path, e))?;
        // Copy-on-write commits leave free pages behind; giving them back
        // on open keeps the file near the entries' size.
        db.compact().map_err(|e| db_error(&path, e))?;
        let table = StreamMapTable {
            db,
            path,
            entries: RwLock::new(HashMap::new()),
            writer: Mutex::new(()),
        };
        // An empty write creates the table in a new database.
        table.apply(&[])?;
        let mut loaded = HashMap::new();
        let rtx = table.db.begin_read().map_err(|e| table.err(e))?;
        let t = rtx.open_table(ENTRIES).map_err(|e| table.err(e))?;
        for row in t.iter().map_err(|e| table.err(e))? {
            let (k, v) = row.map_err(|e| table.err(e))?;
            let entry = Entry::decode(v.value())?;
            if entry.identity.ino != k.value() {
                return Err(Error::corrupt(
                    "stream-map table",
                    format!(
                        "entry of inode {} filed under {}",
                        entry.identity.ino,
                        k.value()
                    ),
                ));
            }
            loaded.insert(k.value(), entry);
        }
        *table.entries.write() = loaded;
        Ok(table)
    }

    fn err(&self, e: impl Into<redb::Error>) -> Error {
        db_error(&self.path, e)
    }

    /// The entry of `ino`, if the file is optimized.
    pub fn get(&self, ino: u64) -> Option<Entry> {
        self.entries.read().get(&ino).cloned()
    }

    /// Whether `ino` has an entry.
    pub fn contains(&self, ino: u64) -> bool {
        self.entries.read().contains_key(&ino)
    }

    /// Every entry (in no particular order).
    pub fn all(&self) -> Vec<Entry> {
        self.entries.read().values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.entries.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes `entry` durably (returns once committed).
    pub fn put(&self, entry: Entry) -> Result<()> {
        self.apply(&[Change::Put(entry)])
    }

    /// Drops `ino`'s entry durably (nothing to do if it has none).
    pub fn remove(&self, ino: u64) -> Result<()> {
        self.apply(&[Change::Remove(ino)])
    }

    /// Commits `changes` as one transaction: all or none survive a crash.
    pub fn apply(&self, changes: &[Change]) -> Result<()> {
        self.commit(changes, Durability::Immediate)
    }

    /// Writes `entry` without waiting for the disk: the next durable commit
    /// (any [`StreamMapTable::apply`], or [`StreamMapTable::flush`]) makes
    /// it durable; a crash before may lose it, leaving the entry as the
    /// last durable commit wrote it. For changes whose loss only repeats
    /// harmless work.
    pub fn put_lazily(&self, entry: Entry) -> Result<()> {
        self.commit(&[Change::Put(entry)], Durability::None)
    }

    /// [`Self::put_lazily`] for several entries, in one commit.
    pub fn put_many_lazily(&self, entries: Vec<Entry>) -> Result<()> {
        let changes: Vec<Change> = entries.into_iter().map(Change::Put).collect();
        self.commit(&changes, Durability::None)
    }

    /// Makes every commit so far durable.
    pub fn flush(&self) -> Result<()> {
        self.apply(&[])
    }

    fn commit(&self, changes: &[Change], durability: Durability) -> Result<()> {
        let _writer = self.writer.lock();
        let mut tx = self.db.begin_write().map_err(|e| self.err(e))?;
        tx.set_durability(durability);
        {
            let mut t = tx.open_table(ENTRIES).map_err(|e| self.err(e))?;
            for c in changes {
                match c {
                    Change::Put(e) => {
                        t.insert(e.identity.ino, e.encode().as_slice())
                            .map_err(|e| self.err(e))?;
                    }
                    Change::Remove(ino) => {
                        t.remove(*ino).map_err(|e| self.err(e))?;
                    }
                }
            }
        }
        tx.commit().map_err(|e| self.err(e))?;
        let mut entries = self.entries.write();
        for c in changes {
            match c {
                Change::Put(e) => {
                    entries.insert(e.identity.ino, e.clone());
                }
                Change::Remove(ino) => {
                    entries.remove(ino);
                }
            }
        }
        Ok(())
    }
}

fn db_error(path: &Path, e: impl Into<redb::Error>) -> Error {
    let e: redb::Error = e.into();
    Error::io(
        format!("stream-map table {}", path.display()),
        std::io::Error::other(e.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::Fingerprint;
    use cairn_format::dir::BlobRef;

    fn entry(ino: u64) -> Entry {
        Entry::new(
            Identity {
                ino,
                birth_ns: None,
            },
            BlobRef {
                root: Fingerprint::from_slice(&[ino as u8; 32]),
                level: 0,
                size: 1000 + ino,
            },
        )
    }

    #[test]
    fn entries_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let t = StreamMapTable::open(dir.path()).unwrap();
            t.apply(&[Change::Put(entry(1)), Change::Put(entry(2))])
                .unwrap();
            let mut e = entry(2);
            e.recalled.insert(0, 10);
            t.put(e).unwrap();
            t.remove(1).unwrap();
        }
        let t = StreamMapTable::open(dir.path()).unwrap();
        assert_eq!(t.len(), 1);
        assert!(!t.contains(1));
        assert_eq!(t.get(2).unwrap().recalled.ranges(), &[(0, 10)]);
    }
}
