//! Scratch directories: a fresh directory under the system's temporary
//! directory, removed when dropped (the experiments' generated files and
//! repositories, the simulator's repository objects).

use std::path::PathBuf;

use cairn_core::Result;

/// A directory removed (with what it holds) when dropped.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh `cairn-<tag>-<pid>-<nanos>` directory.
pub(crate) fn tempdir(tag: &str) -> Result<TempDir> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("cairn-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| cairn_core::Error::invalid(format!("create {}: {e}", dir.display())))?;
    Ok(TempDir(dir))
}
