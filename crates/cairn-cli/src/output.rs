//! Human-readable formatting: sizes, ratios, times, one-line errors.

use std::time::{Duration, UNIX_EPOCH};

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

pub fn time(unix_ns: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_nanos(unix_ns.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Parses "8KiB", "4MiB", "1GiB", "8K", "4M" or plain bytes.
pub fn parse_size(s: &str) -> anyhow::Result<u32> {
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
    u32::try_from(n * mult).map_err(|_| anyhow::anyhow!("size {s:?} is too large"))
}

pub fn mode_string(kind: &str, mode: u32) -> String {
    let mut s = String::with_capacity(10);
    s.push(match kind {
        "dir" => 'd',
        "symlink" => 'l',
        _ => '-',
    });
    for shift in [6u32, 3, 0] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
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
    }
}
