//! A shared sink for non-fatal problems met while opening the index (a damaged
//! container skipped during replay, an index rebuilt from containers). The
//! backup returns them as notices; the CLI prints them one per line.

use std::sync::Arc;

use parking_lot::Mutex;

#[derive(Clone, Default)]
pub struct Warnings {
    inner: Arc<Mutex<Vec<String>>>,
}

impl Warnings {
    pub fn push(&self, msg: String) {
        self.inner.lock().push(msg);
    }

    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.inner.lock())
    }
}
