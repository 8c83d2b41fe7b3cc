//! Parsing of `key=value` workload parameters (the strings of
//! [`super::from_name`]): integers, byte sizes with binary suffixes, ratios.
//!
//! Every error is [`Error::invalid`] naming the workload, the key and what was
//! expected. The parameters themselves and their paper sources are described
//! with the generators (`ddfs.rs`: `001_3652cceaf162c5a1.txt` §5.3;
//! `lineage.rs`: `003_ea5fccc485a97c5d.txt` §4.2).

use cairn_core::{Error, Result};

/// The error for a key the workload does not know.
pub fn unknown_key(workload: &str, key: &str, accepted: &[&str]) -> Error {
    Error::invalid(format!(
        "unknown parameter {key:?} for workload {workload} (accepted: {})",
        accepted.join(", ")
    ))
}

fn bad(workload: &str, key: &str, value: &str, expected: &str) -> Error {
    Error::invalid(format!(
        "workload {workload}: parameter {key}={value:?}: expected {expected}"
    ))
}

/// An unsigned integer in `lo..=hi`.
pub fn int(workload: &str, key: &str, value: &str, lo: u64, hi: u64) -> Result<u64> {
    match value.trim().replace('_', "").parse::<u64>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(bad(
            workload,
            key,
            value,
            &format!("an integer between {lo} and {hi}"),
        )),
    }
}

/// A finite number in `lo..=hi`.
pub fn float(workload: &str, key: &str, value: &str, lo: f64, hi: f64) -> Result<f64> {
    match value.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= lo && v <= hi => Ok(v),
        _ => Err(bad(
            workload,
            key,
            value,
            &format!("a number between {lo} and {hi}"),
        )),
    }
}

/// A byte count: digits (optionally with a fraction) and an optional binary
/// suffix `B`, `K`/`KiB`, `M`/`MiB`, `G`/`GiB`, `T`/`TiB` (case-insensitive;
/// `KB`, `MB`, ... are read as binary too).
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim().replace('_', "");
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let mult: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return None,
    };
    if num.is_empty() {
        return None;
    }
    if let Ok(v) = num.parse::<u64>() {
        return v.checked_mul(mult);
    }
    let v = num.parse::<f64>().ok()?;
    let b = v * mult as f64;
    (0.0..1.8e19).contains(&b).then_some(b.round() as u64)
}

/// A byte count (see [`parse_bytes`]) in `lo..=hi`.
pub fn bytes(workload: &str, key: &str, value: &str, lo: u64, hi: u64) -> Result<u64> {
    match parse_bytes(value) {
        Some(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(bad(
            workload,
            key,
            value,
            &format!("a byte size between {lo} and {hi} (suffixes K, M, G, T: binary)"),
        )),
    }
}

/// A fingerprint width: 8..=32 bytes (20 = SHA-1 as in DDFS, 32 = BLAKE3).
pub fn fp_width(workload: &str, key: &str, value: &str) -> Result<u8> {
    Ok(int(workload, key, value, 8, 32)? as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes() {
        assert_eq!(parse_bytes("8192"), Some(8192));
        assert_eq!(parse_bytes("8K"), Some(8192));
        assert_eq!(parse_bytes("8kib"), Some(8192));
        assert_eq!(parse_bytes("1.5MiB"), Some(3 << 19));
        assert_eq!(parse_bytes("2 GiB"), Some(2 << 30));
        assert_eq!(parse_bytes("1_024"), Some(1024));
        assert_eq!(parse_bytes("x"), None);
        assert_eq!(parse_bytes("MiB"), None);
        assert_eq!(parse_bytes("3Q"), None);
        assert_eq!(parse_bytes("99999999999T"), None);
        assert!(bytes("w", "k", "0", 1, 10).is_err());
        assert!(int("w", "k", "-1", 0, 10).is_err());
        assert!(float("w", "k", "NaN", 0.0, 10.0).is_err());
        assert_eq!(float("w", "k", "2.5", 0.0, 10.0).unwrap(), 2.5);
    }
}
