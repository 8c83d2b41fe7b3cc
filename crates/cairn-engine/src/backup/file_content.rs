//! Files whose bytes are not all in the file system: a backup asks a
//! [`FileContent`] hook before reading a regular file, so a caller whose
//! files are partly or wholly stored in the repository already (the
//! primary volume's optimized files, docs/volume.md "Snapshots") records
//! them without the file system's bytes: a stored file by its recipe,
//! unread (as an unchanged file keeps its parent's), a partly stored one
//! through a reader that assembles its bytes, or as pieces: runs of its
//! stored chunks kept unread and the changed ranges between them read and
//! chunked (the volume's incremental optimization, 004: "incremental dedup
//! will later optimize the new data").

use std::fs::{File, Metadata};
use std::io::{self, Read};

use cairn_core::Fingerprint;
use cairn_format::dir::BlobRef;

/// Where a file's bytes come from.
pub enum FileSource {
    /// Every byte is this recipe's, in this repository: recorded as the
    /// file's content without reading. Its size must be the file's length.
    Stored(BlobRef),
    /// The file's bytes, read from here instead of the file.
    Read(Box<dyn Read + Send>),
    /// The file's bytes as pieces, in order; their sizes add up to the
    /// file's length.
    Pieces(Vec<Piece>),
}

/// Part of a file given as [`FileSource::Pieces`].
pub enum Piece {
    /// Data chunks stored in this repository (the caller guarantees they
    /// are, and stay until the backup commits): recorded as the file's
    /// next chunks without reading, looking up or storing anything.
    Stored(Vec<StoredChunk>),
    /// Bytes to read and chunk as a file's bytes are. The piece is chunked
    /// on its own: a chunk boundary falls at its start and at its end, so
    /// the stored chunks around it stay chunks of the file.
    Read(Box<dyn Read + Send>),
}

/// A data chunk already in the repository, by fingerprint and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredChunk {
    pub fp: Fingerprint,
    pub size: u64,
}

/// Asked for each regular file a backup is about to read.
pub trait FileContent: Send + Sync {
    /// `None`: read the file itself. `file` is the file, open for reading;
    /// `meta` what the walk stat'ed.
    fn source(&self, file: &File, meta: &Metadata) -> io::Result<Option<FileSource>>;
}
