//! Forward assembly (Lillibridge et al., FAST'13; `002_c5d78fa3332f6f9f.txt`
//! §2 and its ref. [8]): the restore is assembled a window at a time, the
//! window being the next steps of the plan whose chunks fill the forward
//! assembly area (`capacity` bytes). Reading a container fills every slot of
//! the window that wants one of its chunks, so no container is read twice
//! within a window; at the window's end the area is emptied and the next
//! window starts.
//!
//! The area is modelled by the chunks it still has to hand out: a chunk is
//! kept from a read while a later slot of the window wants it and let go
//! after its last slot, so memory never exceeds the area.

use cairn_core::{ContainerId, FpMap};

use super::{window_end, ContainerChunk, Memory, PlanStep, RestorePolicy};

pub struct ForwardAssembly {
    capacity: u64,
    /// The window is `plan[start..end]`.
    end: usize,
    /// Slots of the window after the current step, per chunk.
    wanted: FpMap<u32>,
}

impl ForwardAssembly {
    pub fn new(capacity: u64) -> Self {
        ForwardAssembly {
            capacity,
            end: 0,
            wanted: FpMap::default(),
        }
    }
}

/// Counts the slots of `plan[from..end]` per chunk.
pub(super) fn count_slots(plan: &[PlanStep], from: usize, end: usize, out: &mut FpMap<u32>) {
    out.clear();
    for s in &plan[from..end] {
        *out.entry(s.fp).or_insert(0) += 1;
    }
}

/// The current step takes its slot: one fewer wanted; `true` when it was
/// the chunk's last slot of the window.
pub(super) fn take_slot(wanted: &mut FpMap<u32>, step: &PlanStep) -> bool {
    match wanted.get_mut(&step.fp) {
        Some(n) if *n > 1 => {
            *n -= 1;
            false
        }
        Some(_) => {
            wanted.remove(&step.fp);
            true
        }
        None => true,
    }
}

impl RestorePolicy for ForwardAssembly {
    fn begin(&mut self, _plan: &[PlanStep], mem: &mut Memory) {
        for fp in self.wanted.drain().map(|(fp, _)| fp) {
            mem.drop(&fp);
        }
        self.end = 0;
    }

    fn serve(&mut self, pos: usize, plan: &[PlanStep], mem: &mut Memory) -> bool {
        if pos >= self.end {
            // The area is empty here: every kept chunk's last slot passed.
            self.end = window_end(plan, pos, self.capacity);
            count_slots(plan, pos, self.end, &mut self.wanted);
        }
        let s = &plan[pos];
        let hit = mem.holds(&s.fp);
        if take_slot(&mut self.wanted, s) && hit {
            mem.drop(&s.fp);
        }
        hit
    }

    fn read(
        &mut self,
        pos: usize,
        plan: &[PlanStep],
        _container: ContainerId,
        chunks: &[ContainerChunk],
        mem: &mut Memory,
    ) {
        let _ = (pos, plan);
        for c in chunks {
            if self.wanted.contains_key(&c.fp) {
                mem.keep(c.fp, c.size);
            }
        }
    }
}
