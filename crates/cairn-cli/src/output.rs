//! Human-readable formatting: sizes, ratios, times, one-line errors.

/// An error and its causes on one line ("a: b: c"), without repeats.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    parts.join(": ").replace('\n', " ")
}

pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// RFC 3339 UTC time, to the second, for any `i64` nanoseconds since the
/// epoch (before 1970 too: file times can be).
pub fn time(unix_ns: i64) -> String {
    let secs = unix_ns.div_euclid(1_000_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = cairn_core::time::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A file name for a terminal: control characters escaped, invalid UTF-8 lossy.
pub fn display_name(s: &str) -> String {
    if s.chars().any(char::is_control) {
        s.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect()
    } else {
        s.to_string()
    }
}

/// Parses "8KiB", "4MiB", "1GiB", "8K", "4M" or plain bytes.
pub fn parse_size(s: &str) -> anyhow::Result<u32> {
    u32::try_from(parse_size_u64(s)?).map_err(|_| anyhow::anyhow!("size {s:?} is too large"))
}

/// [`parse_size`] without the 4 GiB limit.
pub fn parse_size_u64(s: &str) -> anyhow::Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| anyhow::anyhow!("invalid size {s:?} (examples: 8KiB, 4MiB, 65536)"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        "g" | "gib" | "gb" => 1 << 30,
        _ => anyhow::bail!("invalid size unit in {s:?} (use B, KiB, MiB or GiB)"),
    };
    n.checked_mul(mult)
        .ok_or_else(|| anyhow::anyhow!("size {s:?} is too large"))
}

pub fn mode_string(kind: &str, mode: u32) -> String {
    let mut s = String::with_capacity(10);
    s.push(match kind {
        "dir" => 'd',
        "symlink" => 'l',
        "fifo" => 'p',
        "chardev" => 'c',
        "blockdev" => 'b',
        "socket" => 's',
        _ => '-',
    });
    // (shift, special bit, its letter when executable)
    for (shift, special, letter) in [(6u32, 0o4000, 's'), (3, 0o2000, 's'), (0, 0o1000, 't')] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        let x = bits & 1 != 0;
        s.push(match (mode & special != 0, x) {
            (true, true) => letter,
            (true, false) => letter.to_ascii_uppercase(),
            (false, true) => 'x',
            (false, false) => '-',
        });
    }
    s
}

/// Backup's human summary. By default what a user checks: the snapshot,
/// what was read, what it added to the repository, how long it took;
/// `stats` (`--stats`) adds chunk, container, lookup, index and per-phase
/// figures (all of them are in `--json` too).
pub fn print_backup(o: &cairn_engine::BackupOutcome, dedup: cairn_engine::DedupMode, stats: bool) {
    let st = &o.record.stats;
    let secs = o.phases.total_seconds.max(1e-9);
    println!(
        "snapshot {} saved",
        cairn_engine::catalog::short_id(&o.snapshot_id)
    );
    println!(
        "  files: {} new, {} changed, {} unmodified{}",
        st.files_new,
        st.files_changed,
        st.files_unmodified,
        if st.parent.is_empty() {
            String::new()
        } else {
            format!(
                " (parent {}, {} not read)",
                cairn_engine::catalog::short_id(&st.parent),
                bytes(st.unmodified_bytes)
            )
        }
    );
    println!(
        "  processed {} files, {} dirs, {} symlinks: {} in {:.2}s ({:.1} MB/s)",
        st.files,
        st.dirs,
        st.symlinks,
        bytes(st.logical_bytes),
        secs,
        st.logical_bytes as f64 / 1e6 / secs
    );
    println!(
        "  added to the repository: {} (after dedup and compression)",
        bytes(st.new_stored_bytes)
    );
    if !o.changed_while_read.is_empty() {
        println!(
            "  {} files changed while being read (stored as read)",
            o.changed_while_read.len()
        );
    }
    if !o.excluded.is_empty() {
        println!("  {} entries excluded", o.excluded.len());
    }
    if o.concurrent_duplicates > 0 {
        println!(
            "  {} new chunks were stored by another backup at the same time; the next `cairn gc` keeps one copy",
            o.concurrent_duplicates
        );
    }
    if stats {
        println!(
            "  {} chunks, {} new ({} raw, {} stored), {} containers written",
            st.chunks,
            st.new_chunks,
            bytes(st.new_raw_bytes),
            bytes(st.new_stored_bytes),
            st.containers_written
        );
        if st.rewritten_data_chunks > 0 {
            println!(
                "  rewritten for restore speed ({}): {} chunks, {} stored",
                st.rewrite,
                st.rewritten_data_chunks,
                bytes(st.rewritten_data_stored_bytes)
            );
        }
        let c = &o.counters;
        println!(
            "  lookups: {} cache hits, {} bloom negatives, {} index page reads, {} prefetches",
            c.cache_hits, c.bloom_negatives, c.index_page_reads, c.prefetches
        );
        println!(
            "  index RAM: {:.2} bytes per chunk; {} containers replayed",
            o.index_ram_bytes_per_chunk, o.replayed_containers
        );
        let phases: Vec<String> = o
            .phases
            .as_map()
            .iter()
            .filter(|(k, _)| k.as_str() != "total")
            .map(|(k, v)| format!("{k} {v:.2}s"))
            .collect();
        println!("  phases: {}", phases.join(", "));
        for e in &o.excluded {
            println!("  excluded {}", display_name(e));
        }
    }
    if dedup == cairn_engine::DedupMode::Deferred {
        println!("  dedup deferred: chunks stored before this backup were not looked up; `cairn gc` removes their older copies");
    }
}

/// The name of an entry kind, as `ls` and `find` print it.
pub(crate) fn kind_name(k: cairn_format::dir::EntryKind) -> &'static str {
    match k {
        cairn_format::dir::EntryKind::File => "file",
        cairn_format::dir::EntryKind::Dir => "dir",
        cairn_format::dir::EntryKind::Symlink => "symlink",
        cairn_format::dir::EntryKind::Fifo => "fifo",
        cairn_format::dir::EntryKind::CharDevice => "chardev",
        cairn_format::dir::EntryKind::BlockDevice => "blockdev",
        cairn_format::dir::EntryKind::Socket => "socket",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("8KiB").unwrap(), 8192);
        assert_eq!(parse_size("4M").unwrap(), 4 << 20);
        assert_eq!(parse_size("123").unwrap(), 123);
        assert!(parse_size("x").is_err());
        assert!(parse_size("8 parsecs").is_err());
        assert!(parse_size("8GiB").is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(bytes(10), "10 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(mode_string("dir", 0o755), "drwxr-xr-x");
        assert_eq!(time(0), "1970-01-01T00:00:00Z");
        assert_eq!(time(-1), "1969-12-31T23:59:59Z");
        assert_eq!(time(951_782_400_000_000_000), "2000-02-29T00:00:00Z");
        assert_eq!(time(-315_619_200_000_000_000), "1960-01-01T00:00:00Z");
        assert_eq!(mode_string("file", 0o4755), "-rwsr-xr-x");
        assert_eq!(mode_string("dir", 0o1777), "drwxrwxrwt");
        assert_eq!(mode_string("file", 0o2640), "-rw-r-S---");
        assert_eq!(display_name("a\nb"), "a\\nb");
    }
}
