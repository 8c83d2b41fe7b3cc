//! Where a simulation's RAM goes, per unique chunk (issue 35,
//! `cairn sim --memory-report`; docs/simulation.md, "Memory").
//!
//! The simulated repository keeps in memory the dedup path's lookup
//! structures and one record per container; its objects (index
//! generations and deltas, Summary Vector checkpoints, snapshots) and the
//! containers' metadata sections (`MetaOnlyStore::spilling`) live in a
//! scratch directory. Each is measured
//! at the end of the run, when it is largest (nothing is deleted while the
//! simulator runs); the restore policy's memory is its peak. The process's
//! peak resident set (`VmHWM`) bounds them all; what the structures do not
//! account for (the workload model or trace decoder, the backup pipeline's
//! buffers, allocator slack) is reported as `unattributed`.

use serde::Serialize;

/// One structure's bytes.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StructureBytes {
    pub name: String,
    pub bytes: u64,
    pub bytes_per_unique_chunk: f64,
}

/// The memory of one simulation.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MemoryReport {
    /// Data chunks stored new over the run (the denominator).
    pub unique_chunks: u64,
    /// Peak resident set of the process (`VmHWM`; 0 where unknown).
    pub process_peak_bytes: u64,
    pub process_peak_bytes_per_unique_chunk: f64,
    /// Largest first; `unattributed` last.
    pub structures: Vec<StructureBytes>,
    /// Bytes of the repository's objects (index, Summary Vector
    /// checkpoints, snapshots) and the containers' metadata sections in
    /// the scratch directory: on disk and in the page cache, not in the
    /// process.
    pub scratch_disk_bytes: u64,
}

/// The process's peak resident set so far, from `/proc/self/status`.
pub fn process_peak_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * 1024)
}

impl MemoryReport {
    /// A report over `structures` (name, bytes), against `unique_chunks`
    /// and the process's peak now.
    pub fn new(unique_chunks: u64, structures: Vec<(String, u64)>) -> Self {
        let per = |b: u64| b as f64 / unique_chunks.max(1) as f64;
        let peak = process_peak_bytes();
        let mut structures: Vec<StructureBytes> = structures
            .into_iter()
            .map(|(name, bytes)| StructureBytes {
                name,
                bytes,
                bytes_per_unique_chunk: per(bytes),
            })
            .collect();
        structures.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.name.cmp(&b.name)));
        let counted: u64 = structures.iter().map(|s| s.bytes).sum();
        if peak > 0 {
            let rest = peak.saturating_sub(counted);
            structures.push(StructureBytes {
                name: "unattributed".into(),
                bytes: rest,
                bytes_per_unique_chunk: per(rest),
            });
        }
        MemoryReport {
            unique_chunks,
            process_peak_bytes: peak,
            process_peak_bytes_per_unique_chunk: per(peak),
            structures,
            scratch_disk_bytes: 0,
        }
    }

    /// The report as text, one structure per line.
    pub fn text(&self) -> String {
        let mib = |b: u64| b as f64 / f64::from(1 << 20);
        let mut out = format!(
            "memory: {} unique chunks, process peak {:.1} MiB = {:.1} bytes per unique chunk\n",
            self.unique_chunks,
            mib(self.process_peak_bytes),
            self.process_peak_bytes_per_unique_chunk
        );
        for s in &self.structures {
            out.push_str(&format!(
                "  {:<48} {:>10.1} MiB {:>8.1} B/chunk\n",
                s.name,
                mib(s.bytes),
                s.bytes_per_unique_chunk
            ));
        }
        out.push_str(&format!(
            "  {:<48} {:>10.1} MiB on disk, not in RAM\n",
            "scratch directory (objects, container metadata)",
            mib(self.scratch_disk_bytes)
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structures_are_sorted_and_the_rest_is_unattributed() {
        let r = MemoryReport::new(1000, vec![("a".into(), 10_000), ("b".into(), 50_000)]);
        assert_eq!(r.structures[0].name, "b");
        assert_eq!(r.structures[0].bytes_per_unique_chunk, 50.0);
        assert!(r.process_peak_bytes > 60_000, "{r:?}");
        let last = r.structures.last().unwrap();
        assert_eq!(last.name, "unattributed");
        assert_eq!(last.bytes, r.process_peak_bytes - 60_000);
        assert!(r.text().contains("bytes per unique chunk"));
    }
}
