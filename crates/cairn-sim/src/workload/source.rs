//! The [`TraceSource`] the generators return: a listing of directories and
//! files whose contents are run-length chunk identities, expanded into
//! [`TraceEvent`]s on the fly through a [`ChunkModel`].
//!
//! The source holds runs, not chunks, so a generation of millions of chunks
//! costs memory proportional to its edits. The layout of a backup (one file
//! per DDFS stream, `001_3652cceaf162c5a1.txt` §5.3; one directory per
//! lineage, `003_ea5fccc485a97c5d.txt` §4.2) is decided by the generators.

use cairn_core::{Result, TraceEvent, TraceMeta, TraceSource};

use super::model::{ChunkModel, Run};

/// Regular file, rw-r--r--.
pub const FILE_MODE: u32 = 0o100_644;
/// Directory, rwxr-xr-x.
pub const DIR_MODE: u32 = 0o040_755;
/// mtime of generation 0 (2020-09-13T12:26:40Z); generation `g` is `g` days
/// later, like a daily backup.
pub const BASE_MTIME_NS: i64 = 1_600_000_000 * 1_000_000_000;
const DAY_NS: i64 = 86_400 * 1_000_000_000;

/// The mtime the generators give data written at generation `g`.
pub fn mtime_of(g: usize) -> i64 {
    BASE_MTIME_NS + g as i64 * DAY_NS
}

/// One entry of a listing.
#[derive(Clone, Debug)]
pub enum Entry {
    Dir { name: Vec<u8>, mtime_ns: i64 },
    DirEnd,
    File(FileSpec),
}

/// A file: its name, mtime, byte size if known, and chunk identities.
#[derive(Clone, Debug)]
pub struct FileSpec {
    pub name: Vec<u8>,
    pub mtime_ns: i64,
    /// Sum of the chunk sizes; computed when the file starts if `None`.
    pub size: Option<u64>,
    pub runs: Vec<Run>,
}

enum State {
    /// Next: the entry at `entry`.
    Entry,
    /// Inside a file: next chunk is `runs[run].start + off`.
    Chunks { run: usize, off: u64 },
}

/// Expands a listing into trace events.
pub struct RunSource {
    entries: Vec<Entry>,
    model: ChunkModel,
    describe: String,
    entry: usize,
    state: State,
}

impl RunSource {
    pub fn new(entries: Vec<Entry>, model: ChunkModel, describe: String) -> Self {
        RunSource {
            entries,
            model,
            describe,
            entry: 0,
            state: State::Entry,
        }
    }

    fn file_meta(&self, f: &FileSpec) -> TraceMeta {
        let size = f.size.unwrap_or_else(|| {
            f.runs
                .iter()
                .flat_map(|r| r.start..r.start + r.len)
                .map(|id| self.model.size(id) as u64)
                .sum()
        });
        TraceMeta {
            mode: FILE_MODE,
            uid: 0,
            gid: 0,
            mtime_ns: f.mtime_ns,
            size,
        }
    }
}

impl TraceSource for RunSource {
    fn next_event(&mut self) -> Result<Option<TraceEvent>> {
        loop {
            match self.state {
                State::Entry => {
                    let Some(e) = self.entries.get(self.entry) else {
                        return Ok(None);
                    };
                    let ev = match e {
                        Entry::Dir { name, mtime_ns } => {
                            self.entry += 1;
                            TraceEvent::DirStart {
                                name: name.clone(),
                                meta: TraceMeta {
                                    mode: DIR_MODE,
                                    uid: 0,
                                    gid: 0,
                                    mtime_ns: *mtime_ns,
                                    size: 0,
                                },
                            }
                        }
                        Entry::DirEnd => {
                            self.entry += 1;
                            TraceEvent::DirEnd
                        }
                        Entry::File(f) => {
                            let meta = self.file_meta(f);
                            let name = f.name.clone();
                            self.state = State::Chunks { run: 0, off: 0 };
                            TraceEvent::FileStart { name, meta }
                        }
                    };
                    return Ok(Some(ev));
                }
                State::Chunks { run, off } => {
                    let Some(Entry::File(f)) = self.entries.get(self.entry) else {
                        unreachable!("chunk state outside a file");
                    };
                    match f.runs.get(run) {
                        None => {
                            self.entry += 1;
                            self.state = State::Entry;
                            return Ok(Some(TraceEvent::FileEnd));
                        }
                        Some(r) if off >= r.len => {
                            self.state = State::Chunks {
                                run: run + 1,
                                off: 0,
                            };
                            continue;
                        }
                        Some(r) => {
                            let id = r.start + off;
                            self.state = State::Chunks { run, off: off + 1 };
                            return Ok(Some(TraceEvent::Chunk(self.model.chunk(id))));
                        }
                    }
                }
            }
        }
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_listing() {
        let model = ChunkModel::new(1, 4096, 1.0, 32);
        let entries = vec![
            Entry::Dir {
                name: b"d".to_vec(),
                mtime_ns: 5,
            },
            Entry::File(FileSpec {
                name: b"f".to_vec(),
                mtime_ns: 6,
                size: None,
                runs: vec![Run { start: 10, len: 2 }, Run { start: 3, len: 1 }],
            }),
            Entry::File(FileSpec {
                name: b"empty".to_vec(),
                mtime_ns: 6,
                size: Some(0),
                runs: vec![],
            }),
            Entry::DirEnd,
        ];
        let mut s = RunSource::new(entries, model, "t".into());
        let mut evs = Vec::new();
        while let Some(e) = s.next_event().unwrap() {
            evs.push(e);
        }
        assert_eq!(evs.len(), 1 + 1 + 3 + 1 + 2 + 1);
        let want = [10u64, 11, 3].map(|i| model.chunk(i));
        let got: Vec<_> = evs
            .iter()
            .filter_map(|e| match e {
                TraceEvent::Chunk(c) => Some(*c),
                _ => None,
            })
            .collect();
        assert_eq!(got, want);
        match &evs[1] {
            TraceEvent::FileStart { meta, .. } => {
                assert_eq!(meta.size, want.iter().map(|c| c.size as u64).sum::<u64>());
                assert_eq!(meta.mode, FILE_MODE);
            }
            e => panic!("{e:?}"),
        }
        assert_eq!(evs.last(), Some(&TraceEvent::DirEnd));
        assert_eq!(s.describe(), "t");
    }
}
