//! Per-chunk local compression with selective storage.
//!
//! DDFS compresses segment data as it packs containers
//! (`001_3652cceaf162c5a1.txt` §3.2). The primary-dedup study
//! (`004_62bf1a5ddd5ed253.txt`, "selective compression") found compression
//! savings skewed: many chunks do not compress at all, so compressing them
//! only costs CPU on write and read. [`compress`] therefore stores a chunk
//! raw ([`CompressionCodec::None`]) unless its compressed form saves at least
//! `min_savings_pct` percent (and at least one byte).
//!
//! Stored forms:
//! - `None`: the raw bytes.
//! - `Zstd`: one zstd frame (`zstd::bulk`, level from the config).
//! - `Lz4`: one LZ4 *block* (lz4_flex block format, no size prefix); the raw
//!   length lives in the container descriptor.
//!
//! [`decompress`] never allocates more than the `raw_len` its caller read from
//! a (checksummed) descriptor, and rejects output of any other length.

use std::cell::RefCell;

use cairn_core::{CompressionCodec, CompressionConfig, Error, Result};

thread_local! {
    static ZSTD_COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
    static ZSTD_DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

/// The largest stored size that still counts as saving `min_savings_pct`
/// percent of `raw_len` (and at least one byte).
pub fn max_compressed_len(raw_len: usize, min_savings_pct: u8) -> usize {
    let keep = 100 - u64::from(min_savings_pct.min(100));
    let allowed = (raw_len as u128 * keep as u128 / 100) as usize;
    allowed.min(raw_len.saturating_sub(1))
}

/// Clears `out` and writes the stored form of `raw` into it; returns the codec
/// actually used. Falls back to [`CompressionCodec::None`] (a raw copy) when
/// `cfg.codec` is `None`, `raw` is empty, the codec fails, or the result does
/// not save at least `cfg.min_savings_pct` % of `raw.len()`.
pub fn compress(cfg: &CompressionConfig, raw: &[u8], out: &mut Vec<u8>) -> CompressionCodec {
    out.clear();
    let limit = max_compressed_len(raw.len(), cfg.min_savings_pct);
    let used = match cfg.codec {
        CompressionCodec::None => None,
        _ if limit == 0 => None,
        CompressionCodec::Zstd => zstd_into(cfg.level, raw, limit, out),
        CompressionCodec::Lz4 => lz4_into(raw, limit, out),
    };
    match used {
        Some(codec) => codec,
        None => {
            out.clear();
            out.extend_from_slice(raw);
            CompressionCodec::None
        }
    }
}

fn zstd_into(level: i32, raw: &[u8], limit: usize, out: &mut Vec<u8>) -> Option<CompressionCodec> {
    // A destination of `limit` bytes makes zstd fail fast with "destination
    // too small" instead of producing an output we would throw away.
    out.resize(limit, 0);
    let n = ZSTD_COMPRESSOR.with(|cell| -> Option<usize> {
        let mut slot = cell.borrow_mut();
        match slot.as_mut() {
            Some((l, _)) if *l == level => {}
            Some((l, c)) => {
                c.set_compression_level(level).ok()?;
                *l = level;
            }
            None => *slot = Some((level, zstd::bulk::Compressor::new(level).ok()?)),
        }
        let (_, c) = slot.as_mut()?;
        c.compress_to_buffer(raw, &mut out[..]).ok()
    })?;
    (n <= limit).then(|| {
        out.truncate(n);
        CompressionCodec::Zstd
    })
}

fn lz4_into(raw: &[u8], limit: usize, out: &mut Vec<u8>) -> Option<CompressionCodec> {
    // lz4_flex insists on a worst-case-sized destination.
    out.resize(lz4_flex::block::get_maximum_output_size(raw.len()), 0);
    let n = lz4_flex::block::compress_into(raw, &mut out[..]).ok()?;
    (n <= limit).then(|| {
        out.truncate(n);
        CompressionCodec::Lz4
    })
}

/// Clears `out` and decodes `stored` (written by [`compress`] with `codec`)
/// into exactly `raw_len` bytes. [`Error::Corrupt`] ("chunk payload") if the
/// codec rejects the input or produces any other length.
pub fn decompress(
    codec: CompressionCodec,
    stored: &[u8],
    raw_len: usize,
    out: &mut Vec<u8>,
) -> Result<()> {
    const WHAT: &str = "chunk payload";
    out.clear();
    match codec {
        CompressionCodec::None => {
            if stored.len() != raw_len {
                return Err(Error::corrupt(
                    WHAT,
                    format!(
                        "uncompressed payload is {} bytes, descriptor says {raw_len}",
                        stored.len()
                    ),
                ));
            }
            out.extend_from_slice(stored);
        }
        CompressionCodec::Zstd => {
            out.resize(raw_len, 0);
            let n = ZSTD_DECOMPRESSOR.with(|cell| -> Result<usize> {
                let mut slot = cell.borrow_mut();
                if slot.is_none() {
                    *slot = Some(
                        zstd::bulk::Decompressor::new()
                            .map_err(|e| Error::io("creating a zstd decompressor", e))?,
                    );
                }
                let Some(d) = slot.as_mut() else {
                    return Err(Error::corrupt(WHAT, "zstd decompressor unavailable"));
                };
                d.decompress_to_buffer(stored, &mut out[..])
                    .map_err(|e| Error::corrupt(WHAT, format!("zstd: {e}")))
            });
            let n = match n {
                Ok(n) => n,
                Err(e) => {
                    out.clear();
                    return Err(e);
                }
            };
            if n != raw_len {
                out.clear();
                return Err(Error::corrupt(
                    WHAT,
                    format!("zstd produced {n} bytes, descriptor says {raw_len}"),
                ));
            }
        }
        CompressionCodec::Lz4 => {
            out.resize(raw_len, 0);
            let n = match lz4_flex::block::decompress_into(stored, &mut out[..]) {
                Ok(n) => n,
                Err(e) => {
                    out.clear();
                    return Err(Error::corrupt(WHAT, format!("lz4: {e}")));
                }
            };
            if n != raw_len {
                out.clear();
                return Err(Error::corrupt(
                    WHAT,
                    format!("lz4 produced {n} bytes, descriptor says {raw_len}"),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cfg(codec: CompressionCodec, pct: u8) -> CompressionConfig {
        CompressionConfig {
            codec,
            level: 3,
            min_savings_pct: pct,
        }
    }

    fn compressible(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i % 7) as u8).collect()
    }

    /// Deterministic incompressible bytes (xorshift).
    fn noise(n: usize, mut s: u64) -> Vec<u8> {
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s as u8
            })
            .collect()
    }

    const CODECS: [CompressionCodec; 3] = [
        CompressionCodec::None,
        CompressionCodec::Zstd,
        CompressionCodec::Lz4,
    ];

    #[test]
    fn compressible_data_uses_the_codec() {
        let raw = compressible(8192);
        for codec in CODECS {
            let mut out = vec![1, 2, 3];
            let used = compress(&cfg(codec, 10), &raw, &mut out);
            assert_eq!(used, codec);
            if codec != CompressionCodec::None {
                assert!(out.len() < raw.len() / 2);
            }
            let mut back = vec![9];
            decompress(used, &out, raw.len(), &mut back).unwrap();
            assert_eq!(back, raw);
        }
    }

    #[test]
    fn incompressible_data_is_stored_raw() {
        let raw = noise(4096, 0x9e3779b97f4a7c15);
        for codec in CODECS {
            let mut out = Vec::new();
            assert_eq!(
                compress(&cfg(codec, 10), &raw, &mut out),
                CompressionCodec::None
            );
            assert_eq!(out, raw);
        }
    }

    #[test]
    fn threshold_is_respected() {
        // Half compressible: saves roughly 50%, so 90% demanded savings fails.
        let mut raw = compressible(4096);
        raw.extend(noise(4096, 7));
        for codec in [CompressionCodec::Zstd, CompressionCodec::Lz4] {
            let mut out = Vec::new();
            assert_eq!(
                compress(&cfg(codec, 90), &raw, &mut out),
                CompressionCodec::None
            );
            assert_eq!(compress(&cfg(codec, 20), &raw, &mut out), codec);
            assert!(out.len() <= max_compressed_len(raw.len(), 20));
            assert_eq!(
                compress(&cfg(codec, 100), &raw, &mut out),
                CompressionCodec::None
            );
        }
        assert_eq!(max_compressed_len(100, 10), 90);
        assert_eq!(max_compressed_len(100, 0), 99);
        assert_eq!(max_compressed_len(100, 200), 0);
        assert_eq!(max_compressed_len(0, 0), 0);
    }

    #[test]
    fn empty_input() {
        for codec in CODECS {
            let mut out = vec![5];
            assert_eq!(
                compress(&cfg(codec, 0), &[], &mut out),
                CompressionCodec::None
            );
            assert!(out.is_empty());
            decompress(CompressionCodec::None, &[], 0, &mut out).unwrap();
        }
    }

    #[test]
    fn zstd_level_changes_are_honoured() {
        let raw = compressible(10_000);
        let mut out = Vec::new();
        for level in [1, 19, -5, 3] {
            let c = CompressionConfig {
                codec: CompressionCodec::Zstd,
                level,
                min_savings_pct: 0,
            };
            assert_eq!(compress(&c, &raw, &mut out), CompressionCodec::Zstd);
            let mut back = Vec::new();
            decompress(CompressionCodec::Zstd, &out, raw.len(), &mut back).unwrap();
            assert_eq!(back, raw);
        }
    }

    #[test]
    fn wrong_length_and_garbage_are_corrupt() {
        let raw = compressible(5000);
        for codec in CODECS {
            let mut stored = Vec::new();
            let used = compress(&cfg(codec, 0), &raw, &mut stored);
            let mut out = Vec::new();
            for len in [raw.len() - 1, raw.len() + 1, 0] {
                let e = decompress(used, &stored, len, &mut out).unwrap_err();
                assert!(e.is_corruption(), "{codec:?} {len}: {e}");
            }
            // Every truncation of the stored form fails.
            for cut in [0, 1, stored.len() / 2, stored.len() - 1] {
                assert!(decompress(used, &stored[..cut], raw.len(), &mut out).is_err());
            }
        }
        let mut out = Vec::new();
        assert!(decompress(CompressionCodec::Zstd, b"not zstd", 10, &mut out).is_err());
        assert!(decompress(CompressionCodec::Lz4, &[0xff; 8], 10, &mut out).is_err());
    }

    fn codec_strategy() -> impl Strategy<Value = CompressionCodec> {
        prop_oneof![
            Just(CompressionCodec::None),
            Just(CompressionCodec::Zstd),
            Just(CompressionCodec::Lz4),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn prop_round_trip(
            codec in codec_strategy(),
            pct in 0u8..=100,
            raw in prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..2048),
                proptest::collection::vec(0u8..3, 0..4096),
            ],
        ) {
            let mut stored = Vec::new();
            let used = compress(&cfg(codec, pct), &raw, &mut stored);
            prop_assert!(used == codec || used == CompressionCodec::None);
            if used == CompressionCodec::None {
                prop_assert_eq!(&stored, &raw);
            } else {
                prop_assert!(stored.len() <= max_compressed_len(raw.len(), pct));
            }
            let mut back = Vec::new();
            decompress(used, &stored, raw.len(), &mut back).unwrap();
            prop_assert_eq!(back, raw);
        }

        #[test]
        fn prop_decompress_never_panics(
            codec in codec_strategy(),
            stored in proptest::collection::vec(any::<u8>(), 0..256),
            raw_len in 0usize..4096,
        ) {
            let mut out = Vec::new();
            if decompress(codec, &stored, raw_len, &mut out).is_ok() {
                prop_assert_eq!(out.len(), raw_len);
            }
        }
    }
}
