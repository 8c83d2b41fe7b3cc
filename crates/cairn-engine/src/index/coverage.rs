//! Which containers the index covers (docs/concurrency.md, step 2): those
//! below the index file's `covered_below`, and every container a delta's
//! puts name (a writer's delta puts every chunk it stored). With backups
//! running together one mark cannot say it: a writer's delta may come
//! before another writer's lower-numbered containers are indexed, or they
//! never are because that writer died. A container present and not
//! covered is replayed by a writer's open (DDFS §4.1 replay), and `check`
//! holds only covered containers to being indexed.

use std::collections::HashSet;
use std::sync::Arc;

use cairn_core::ContainerId;

/// The containers an index covers (`DiskIndex::coverage`); the default
/// covers none.
#[derive(Clone, Debug)]
pub struct Coverage {
    below: ContainerId,
    named: Arc<HashSet<ContainerId>>,
}

impl Default for Coverage {
    fn default() -> Self {
        Coverage::new(ContainerId(0), HashSet::new())
    }
}

impl Coverage {
    /// Every container below `below`, and those in `named`.
    pub fn new(below: ContainerId, named: HashSet<ContainerId>) -> Self {
        Coverage {
            below,
            named: Arc::new(named),
        }
    }

    pub fn covers(&self, id: ContainerId) -> bool {
        id < self.below || self.named.contains(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_the_mark_or_named() {
        let c = Coverage::new(ContainerId(10), [ContainerId(40)].into());
        assert!(c.covers(ContainerId(9)));
        assert!(!c.covers(ContainerId(10)));
        assert!(c.covers(ContainerId(40)));
        assert!(!c.covers(ContainerId(41)));
        assert!(!Coverage::default().covers(ContainerId(0)));
    }
}
