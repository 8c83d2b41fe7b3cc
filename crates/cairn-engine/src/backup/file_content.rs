//! Files whose bytes are not all in the file system: a backup asks a
//! [`FileContent`] hook before reading a regular file, so a caller whose
//! files are partly or wholly stored in the repository already (the
//! primary volume's optimized files, docs/volume.md "Snapshots") records
//! them without the file system's bytes: a stored file by its recipe,
//! unread (as an unchanged file keeps its parent's), and a partly stored
//! one through a reader that assembles its bytes.

use std::fs::{File, Metadata};
use std::io::{self, Read};

use cairn_format::dir::BlobRef;

/// Where a file's bytes come from.
pub enum FileSource {
    /// Every byte is this recipe's, in this repository: recorded as the
    /// file's content without reading. Its size must be the file's length.
    Stored(BlobRef),
    /// The file's bytes, read from here instead of the file.
    Read(Box<dyn Read + Send>),
}

/// Asked for each regular file a backup is about to read.
pub trait FileContent: Send + Sync {
    /// `None`: read the file itself. `file` is the file, open for reading;
    /// `meta` what the walk stat'ed.
    fn source(&self, file: &File, meta: &Metadata) -> io::Result<Option<FileSource>>;
}
