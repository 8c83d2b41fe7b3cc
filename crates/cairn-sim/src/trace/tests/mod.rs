//! Tests of the trace readers: the reference traces in the shared testdata
//! folder, Destor/FSL agreement, detection, and (in the submodules) FSL
//! hand-made files, robustness against truncation and corruption, and the
//! cairn format.
//!
//! The reference traces are read from `$CAIRN_TESTDATA` (default: the
//! repository's `testdata/`, a copy of the shared reference traces), which holds `destor/` and `fsl/` with
//! `gen0`, `gen1` and `expected.json` each.

mod cairn_fmt;
mod destor_cases;
mod fsl_enc;
mod robust;

use std::io::Cursor;
use std::path::PathBuf;

use cairn_core::{Error, Fingerprint, FpSet, Result, TraceEvent, TraceSource};

use super::{detect, open_trace, DestorReader, FslReader, TraceFormat};

/// Reads every event of `src`, or the first error.
pub(super) fn read_all(src: &mut dyn TraceSource) -> Result<Vec<TraceEvent>> {
    let mut out = Vec::new();
    while let Some(ev) = src.next_event()? {
        out.push(ev);
    }
    Ok(out)
}

/// Reads `bytes` in `format` to the end.
pub(super) fn read_bytes(bytes: &[u8], format: TraceFormat) -> Result<Vec<TraceEvent>> {
    let mut src = super::open_reader(Cursor::new(bytes.to_vec()), "t", format)?;
    read_all(src.as_mut())
}

/// The first number after "byte " (or "byte offset ") in `msg`.
pub(super) fn offset_in(msg: &str) -> Option<u64> {
    let mut rest = msg;
    while let Some(i) = rest.find("byte ") {
        rest = &rest[i + 5..];
        let r = rest.strip_prefix("offset ").unwrap_or(rest);
        let digits: String = r.chars().take_while(|c| c.is_ascii_digit()).collect();
        if let Ok(n) = digits.parse() {
            return Some(n);
        }
    }
    None
}

/// Asserts `r` is a corruption error naming an offset no later than `max`.
pub(super) fn assert_corrupt_at_most<T: std::fmt::Debug>(r: &Result<T>, max: u64, ctx: &str) {
    match r {
        Err(e @ Error::Corrupt { .. }) => {
            let msg = e.to_string();
            let off = offset_in(&msg).unwrap_or_else(|| panic!("{ctx}: no offset in `{msg}`"));
            assert!(off <= max, "{ctx}: offset {off} > {max} in `{msg}`");
        }
        other => panic!("{ctx}: expected a corruption error, got {other:?}"),
    }
}

pub(super) fn testdata() -> PathBuf {
    let dir = PathBuf::from(
        std::env::var("CAIRN_TESTDATA")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata").into()),
    );
    assert!(
        dir.join("destor").is_dir() && dir.join("fsl").is_dir(),
        "reference traces not found in {} (set CAIRN_TESTDATA)",
        dir.display()
    );
    dir
}

/// One file of a trace: name and (fingerprint, size) of each chunk.
type FileChunks = (Vec<u8>, Vec<(Fingerprint, u32)>);

fn files_of(events: &[TraceEvent]) -> Vec<FileChunks> {
    let mut files: Vec<FileChunks> = Vec::new();
    let mut open = false;
    for ev in events {
        match ev {
            TraceEvent::FileStart { name, .. } => {
                assert!(!open, "nested FileStart");
                files.push((name.clone(), Vec::new()));
                open = true;
            }
            TraceEvent::Chunk(c) => {
                assert!(open, "chunk outside a file");
                assert_eq!(c.stored_size, c.size, "reference traces are uncompressed");
                files.last_mut().unwrap().1.push((c.fp, c.size));
            }
            TraceEvent::FileEnd => {
                assert!(open, "FileEnd without FileStart");
                open = false;
            }
            other => panic!("unexpected event in a reference trace: {other:?}"),
        }
    }
    assert!(!open, "unterminated file");
    files
}

fn expected(dir: &str) -> Vec<(u64, u64, u64)> {
    let text = std::fs::read_to_string(testdata().join(dir).join("expected.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let f = |k: &str| g[k].as_u64().unwrap();
            (f("chunks"), f("distinct"), f("new_vs_previous"))
        })
        .collect()
}

fn read_generation(dir: &str, file: &str, format: TraceFormat) -> Vec<TraceEvent> {
    let path = testdata().join(dir).join(file);
    let mut src = open_trace(&path, None).unwrap();
    assert_eq!(src.describe(), file);
    let head = std::fs::read(&path).unwrap();
    assert_eq!(detect(&head[..16]), Some(format));
    read_all(src.as_mut()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Chunk count, distinct fingerprints and fingerprints new to an exact-dedup
/// store, per generation, in order.
fn dedup_stats(gens: &[Vec<TraceEvent>]) -> Vec<(u64, u64, u64)> {
    let mut store = FpSet::default();
    gens.iter()
        .map(|events| {
            let mut distinct = FpSet::default();
            let mut chunks = 0;
            for ev in events {
                if let TraceEvent::Chunk(c) = ev {
                    chunks += 1;
                    distinct.insert(c.fp);
                }
            }
            let new = distinct.iter().filter(|fp| !store.contains(*fp)).count() as u64;
            store.extend(distinct.iter().copied());
            (chunks, distinct.len() as u64, new)
        })
        .collect()
}

fn check_set(dir: &str, ext: &str, format: TraceFormat, fp_len: usize) -> Vec<Vec<TraceEvent>> {
    let gens: Vec<_> = ["gen0", "gen1"]
        .iter()
        .map(|g| read_generation(dir, &format!("{g}.{ext}"), format))
        .collect();
    for events in &gens {
        for (_, chunks) in files_of(events) {
            assert!(chunks.iter().all(|(fp, _)| fp.len() == fp_len));
        }
    }
    assert_eq!(dedup_stats(&gens), expected(dir), "{dir}");
    gens
}

#[test]
fn destor_reference_traces_match_expected_counts() {
    let gens = check_set("destor", "trace", TraceFormat::Destor, 20);
    let files = files_of(&gens[0]);
    assert_eq!(files.len(), 3);
    assert_eq!(files[0].0, b"dir/file0.dat");
    assert_eq!(files[0].1.len(), 230);
    assert_eq!(
        files[0].1[0],
        (
            Fingerprint::from_hex("a5aec7978306d03bf38b2ffc80a4df5a51c9bc70").unwrap(),
            16138
        )
    );
}

#[test]
fn fsl_reference_traces_match_expected_counts() {
    check_set("fsl", "hash", TraceFormat::Fsl, 6);
}

#[test]
fn fsl_reference_header_fields() {
    let bytes = std::fs::read(testdata().join("fsl/gen0.hash")).unwrap();
    let mut r = FslReader::new(Cursor::new(bytes), "gen0.hash").unwrap();
    let h = r.header().clone();
    assert_eq!(h.version, 7);
    assert_eq!(h.files, 3);
    assert_eq!(h.chunks, 887);
    assert_eq!(h.root_path, b"/synthetic/");
    assert_eq!(h.sysid, b"synthetic");
    assert_eq!(
        h.chunking,
        super::FslChunking::Variable {
            algo: 3,
            min_size: 2048,
            max_size: 65536
        }
    );
    assert_eq!((h.hash_method, h.hash_bits, h.hash_len()), (3, 48, 6));
    let events = read_all(&mut r).unwrap();
    let bytes: u64 = files_of(&events)
        .iter()
        .flat_map(|(_, c)| c.iter().map(|&(_, s)| u64::from(s)))
        .sum();
    assert_eq!(bytes, h.bytes);
}

#[test]
fn destor_and_fsl_generations_agree() {
    for g in ["gen0", "gen1"] {
        let d = files_of(&read_generation(
            "destor",
            &format!("{g}.trace"),
            TraceFormat::Destor,
        ));
        let f = files_of(&read_generation(
            "fsl",
            &format!("{g}.hash"),
            TraceFormat::Fsl,
        ));
        assert_eq!(d.len(), f.len(), "{g}: file count");
        for ((dn, dc), (fname, fc)) in d.iter().zip(&f) {
            assert_eq!(dn, fname, "{g}: file names");
            assert_eq!(dc.len(), fc.len(), "{g}: chunk count of {dn:?}");
            for (i, ((dfp, ds), (ffp, fs))) in dc.iter().zip(fc).enumerate() {
                assert_eq!(ds, fs, "{g}: size of chunk {i} of {dn:?}");
                assert_eq!(
                    &dfp.as_bytes()[..6],
                    ffp.as_bytes(),
                    "{g}: fingerprint prefix of chunk {i} of {dn:?}"
                );
            }
        }
    }
}

#[test]
fn detect_recognises_each_format_and_nothing_else() {
    assert_eq!(detect(b"CAIRNTRC\x01\0\0\0"), Some(TraceFormat::Cairn));
    assert_eq!(
        detect(&[0xad, 0xde, 0xad, 0xde, 7, 0]),
        Some(TraceFormat::Fsl)
    );
    assert_eq!(detect(b"file start 13\nd"), Some(TraceFormat::Destor));
    assert_eq!(detect(b"stream end"), Some(TraceFormat::Destor));
    assert_eq!(detect(b""), None);
    assert_eq!(detect(b"CAIRN"), None);
    assert_eq!(detect(b"hello world"), None);
    assert_eq!(detect(&[0xde, 0xad, 0xde, 0xad]), None);
    for (s, f) in [
        ("destor", TraceFormat::Destor),
        ("FSL", TraceFormat::Fsl),
        ("cairn", TraceFormat::Cairn),
    ] {
        assert_eq!(s.parse::<TraceFormat>().unwrap(), f);
        assert_eq!(f.to_string().parse::<TraceFormat>().unwrap(), f);
    }
    assert!("csv".parse::<TraceFormat>().is_err());
}

#[test]
fn open_trace_errors_are_one_line_and_clear() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.trace");
    let e = open_trace(&missing, None).err().unwrap();
    assert!(e.is_not_found(), "{e}");
    let msg = e.to_string();
    assert!(
        msg.starts_with("cannot open trace ") && msg.contains("nope.trace"),
        "{msg}"
    );
    assert!(!msg.contains('\n'));

    let junk = dir.path().join("junk.bin");
    std::fs::write(&junk, b"not a trace at all").unwrap();
    let msg = open_trace(&junk, None).err().unwrap().to_string();
    assert!(
        msg.contains("junk.bin") && msg.contains("unknown trace format"),
        "{msg}"
    );
    assert!(!msg.contains('\n'));

    // An explicit format overrides detection; the reader then reports why
    // the bytes are not in that format.
    let e = open_trace(&junk, Some(TraceFormat::Fsl)).err().unwrap();
    assert!(
        e.is_corruption() && e.to_string().contains("bad magic"),
        "{e}"
    );
    let e = open_trace(&junk, Some(TraceFormat::Cairn)).err().unwrap();
    assert!(e.is_corruption(), "{e}");

    // Short files are detected from what there is.
    let short = dir.path().join("empty.trace");
    std::fs::write(&short, b"stream end\n").unwrap();
    let mut src = open_trace(&short, None).unwrap();
    assert_eq!(src.describe(), "empty.trace");
    assert_eq!(read_all(src.as_mut()).unwrap(), vec![]);
}

#[test]
fn readers_stay_failed_after_an_error() {
    let mut r = DestorReader::new(Cursor::new(b"file start 1\nx\nbogus\n".to_vec()), "t");
    assert!(matches!(
        r.next_event(),
        Ok(Some(TraceEvent::FileStart { .. }))
    ));
    let first = r.next_event().unwrap_err().to_string();
    for _ in 0..3 {
        let again = r.next_event().unwrap_err().to_string();
        assert!(again.contains(&first), "{again}");
    }
}

/// A trace compressed whole (zstd or gzip) reads as the plain trace: the
/// same events, the format detected through the compression. A truncated
/// compressed trace is an error, never a shorter trace.
#[test]
fn compressed_traces_read_as_the_plain_ones() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    for (set, file) in [("fsl", "gen0.hash"), ("destor", "gen1.trace")] {
        let plain = std::fs::read(testdata().join(set).join(file)).unwrap();
        let want = read_all(
            open_trace(&testdata().join(set).join(file), None)
                .unwrap()
                .as_mut(),
        )
        .unwrap();
        let zst = zstd::encode_all(&plain[..], 3).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&plain).unwrap();
        let gz = gz.finish().unwrap();
        for (ext, bytes) in [("zst", zst), ("gz", gz)] {
            let path = dir.path().join(format!("{file}.{ext}"));
            std::fs::write(&path, &bytes).unwrap();
            let (mut src, format) = super::detect::open_trace_as(&path, None).unwrap();
            assert_eq!(Some(format), detect(&plain[..16]), "{path:?}");
            let got = read_all(src.as_mut()).unwrap();
            assert_eq!(got, want, "{path:?}");

            let cut = dir.path().join(format!("cut-{file}.{ext}"));
            std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
            let r = open_trace(&cut, None).and_then(|mut s| read_all(s.as_mut()));
            let e = r.expect_err("a truncated compressed trace must fail");
            assert!(!e.to_string().contains('\n'), "{e}");
        }
    }
}
