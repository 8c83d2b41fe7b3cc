//! Turns the counters of a finished study into the [`AnalyzeReport`] of
//! `cairn analyze` (sections after `004_62bf1a5ddd5ed253.txt`; see `mod.rs`).

use std::path::PathBuf;

use super::study::{Consumer, Index, Scheme, Study};
use super::walk::Tree;
use super::{
    savings, AnalyzeOptions, AnalyzeReport, ChunkingComparison, ChunkingStats, PartitionEntry,
    PartitionReport, PartitionSummary, RefCountReport, RefGroup, SizeBucket, SweepPoint,
    MAX_LISTED, MAX_NOTES,
};

pub(super) fn build(
    study: Study,
    paths: &[PathBuf],
    opts: &AnalyzeOptions,
    tree: &Tree,
) -> AnalyzeReport {
    let memory = study.memory();
    let n = study.consumers.len();
    let compressed = opts.compression.is_some();
    let chunk_size_sweep = study.consumers[..n - 2]
        .iter()
        .map(|c| sweep_point(c, compressed))
        .collect();
    let (basic, regression) = (&study.consumers[n - 2], &study.consumers[n - 1]);
    let chunking = ChunkingComparison {
        sizes: opts.regression,
        bucket_bytes: basic.cuts.bucket,
        basic: chunking_stats("rabin (basic)", basic, false),
        regression: chunking_stats("regression", regression, true),
    };
    let detail = &study.consumers[study.detail];
    let reference_counts = ref_counts(detail);
    let partitioning = partitions(detail, tree, study.files, opts.path_partition_share);
    let mut notes = tree.notes.clone();
    notes.extend(study.notes.iter().cloned());
    notes.truncate(MAX_NOTES);
    AnalyzeReport {
        paths: paths.to_vec(),
        fingerprint: opts.fingerprint,
        compression: opts.compression,
        files: study.files,
        empty_files: study.empty_files,
        logical_bytes: study.bytes,
        truncated: tree.truncated,
        non_regular_skipped: tree.non_regular,
        notes,
        notes_total: tree.notes_total + study.notes_total,
        seconds: 0.0,
        memory,
        chunk_size_sweep,
        chunking,
        reference_counts,
        partitioning,
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn sweep_point(c: &Consumer, compressed: bool) -> SweepPoint {
    let k = &c.counts;
    SweepPoint {
        chunker: c.sizes,
        chunks: k.chunks,
        distinct_chunks: k.distinct,
        logical_bytes: k.logical,
        unique_bytes: k.unique,
        savings: savings(k.unique, k.logical),
        mean_chunk_bytes: ratio(k.logical, k.chunks),
        forced_share: ratio(c.cuts.forced, c.cuts.content_cuts()),
        compressed_unique_bytes: compressed.then_some(k.compressed_unique),
        savings_with_compression: compressed.then(|| savings(k.compressed_unique, k.logical)),
    }
}

fn chunking_stats(name: &str, c: &Consumer, regression: bool) -> ChunkingStats {
    let (k, cuts) = (&c.counts, &c.cuts);
    let content = cuts.content_cuts();
    let regressed: u64 = cuts.regressed.iter().sum();
    let histogram = (0..cuts.hist.len())
        .map(|i| SizeBucket {
            lo: i as u64 * cuts.bucket + 1,
            hi: (i as u64 + 1) * cuts.bucket,
            chunks: cuts.hist[i],
            eof_chunks: cuts.hist_eof[i],
        })
        .collect();
    ChunkingStats {
        algorithm: name.to_string(),
        chunks: k.chunks,
        distinct_chunks: k.distinct,
        logical_bytes: k.logical,
        unique_bytes: k.unique,
        savings: savings(k.unique, k.logical),
        mean_chunk_bytes: ratio(k.logical, k.chunks),
        mean_cut_chunk_bytes: ratio(cuts.cut_bytes, content),
        full_cuts: cuts.full,
        regressed_cuts: if regression {
            cuts.regressed.to_vec()
        } else {
            Vec::new()
        },
        forced_cuts: cuts.forced,
        end_of_input_cuts: cuts.eof,
        forced_share: ratio(cuts.forced, content),
        regressed_share: ratio(regressed, content),
        histogram,
    }
}

/// Group of a reference count: 1 -> 0, 2 -> 1, 3-4 -> 2, 5-8 -> 3, ...
pub(super) fn ref_group(refs: u64) -> usize {
    (64 - refs.saturating_sub(1).leading_zeros()) as usize
}

fn ref_counts(c: &Consumer) -> RefCountReport {
    let mut groups: Vec<RefGroup> = Vec::new();
    if let Index::Counted(map) = &c.index {
        for r in map.values() {
            let (refs, size) = (u64::from(r.refs), u64::from(r.size));
            let g = ref_group(refs);
            while groups.len() <= g {
                let i = groups.len() as u32;
                groups.push(RefGroup {
                    min_refs: if i == 0 { 1 } else { (1u64 << (i - 1)) + 1 },
                    max_refs: 1u64 << i,
                    distinct_chunks: 0,
                    unique_bytes: 0,
                    logical_bytes: 0,
                    duplicate_bytes: 0,
                    duplicate_share: 0.0,
                });
            }
            let e = &mut groups[g];
            e.distinct_chunks += 1;
            e.unique_bytes += size;
            e.logical_bytes += size * refs;
            e.duplicate_bytes += size * (refs - 1);
        }
    }
    let duplicate_bytes: u64 = groups.iter().map(|g| g.duplicate_bytes).sum();
    for g in &mut groups {
        g.duplicate_share = ratio(g.duplicate_bytes, duplicate_bytes);
    }
    RefCountReport {
        chunker: c.sizes,
        distinct_chunks: c.counts.distinct,
        duplicate_bytes,
        groups,
    }
}

fn summary(scheme: &str, s: &Scheme, labels: &[String], logical: u64) -> PartitionSummary {
    let mut order: Vec<usize> = (0..s.parts.len())
        .filter(|&i| s.parts[i].files > 0)
        .collect();
    let partitions = order.len() as u64;
    order.sort_by_key(|&i| (std::cmp::Reverse(s.parts[i].logical), i));
    let largest = order
        .iter()
        .take(MAX_LISTED)
        .map(|&i| {
            let p = &s.parts[i];
            PartitionEntry {
                key: labels[i].clone(),
                files: p.files,
                logical_bytes: p.logical,
                unique_bytes: p.unique,
                savings: savings(p.unique, p.logical),
            }
        })
        .collect();
    let unique = s.unique();
    PartitionSummary {
        scheme: scheme.to_string(),
        partitions,
        unique_bytes: unique,
        savings: savings(unique, logical),
        largest,
    }
}

fn partitions(c: &Consumer, tree: &Tree, files: u64, share: f64) -> PartitionReport {
    let k = &c.counts;
    let global = PartitionSummary {
        scheme: "global".to_string(),
        partitions: 1,
        unique_bytes: k.unique,
        savings: savings(k.unique, k.logical),
        largest: vec![PartitionEntry {
            key: "(all)".to_string(),
            files,
            logical_bytes: k.logical,
            unique_bytes: k.unique,
            savings: savings(k.unique, k.logical),
        }],
    };
    let (by_type, by_path) = c.schemes.as_ref().expect("the detail consumer has schemes");
    PartitionReport {
        chunker: c.sizes,
        logical_bytes: k.logical,
        path_partition_share: share,
        global,
        by_type: summary("file type", by_type, &tree.type_labels, k.logical),
        by_path: summary("file path", by_path, &tree.path_labels, k.logical),
    }
}
