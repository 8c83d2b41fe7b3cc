//! A shared sink for non-fatal problems (a skipped unreadable file, a file that
//! changed while read, a damaged container skipped during replay). The CLI
//! prints them one per line and turns a non-empty "skipped" list into a
//! non-zero exit.

use std::sync::Arc;

use parking_lot::Mutex;

#[derive(Clone, Default)]
pub struct Warnings {
    inner: Arc<Mutex<Vec<String>>>,
    sink: Option<Arc<dyn Fn(&str) + Send + Sync>>,
}

impl Warnings {
    /// Warnings that are also passed to `sink` as they happen.
    pub fn with_sink(sink: Arc<dyn Fn(&str) + Send + Sync>) -> Self {
        Warnings {
            inner: Arc::default(),
            sink: Some(sink),
        }
    }

    pub fn push(&self, msg: String) {
        if let Some(s) = &self.sink {
            s(&msg);
        }
        self.inner.lock().push(msg);
    }

    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.inner.lock())
    }

    pub fn len(&self) -> usize {
        self.inner.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
