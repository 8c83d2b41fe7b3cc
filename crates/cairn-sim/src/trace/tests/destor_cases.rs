//! Destor reader cases: accepted variations and the error for each kind of
//! malformed line.

use cairn_core::{Fingerprint, TraceChunk, TraceEvent, TraceMeta};

use super::{assert_corrupt_at_most, read_bytes};
use crate::trace::TraceFormat;

const FP_A: &str = "A5AEC7978306D03BF38B2FFC80A4DF5A51C9BC70";
const FP_B: &str = "9f19950499dd251de512148239292d22e255accb";

fn chunk(hex: &str, size: u32) -> TraceEvent {
    TraceEvent::Chunk(TraceChunk {
        fp: Fingerprint::from_hex(hex).unwrap(),
        size,
        stored_size: size,
    })
}

fn destor(text: &str) -> cairn_core::Result<Vec<TraceEvent>> {
    read_bytes(text.as_bytes(), TraceFormat::Destor)
}

/// The error message of reading `text`.
fn destor_err(text: &str) -> String {
    destor(text).unwrap_err().to_string()
}

#[test]
fn reads_files_chunks_and_accepts_line_variations() {
    let text = format!(
        "file start 5\r\na/b c\r\n{FP_A} 16138\r\n{FP_B} 7\nfile end\nfile start 0\n\nfile end\n\
         stream end\n\n"
    );
    let events = destor(&text).unwrap();
    assert_eq!(
        events,
        vec![
            TraceEvent::FileStart {
                name: b"a/b c".to_vec(),
                meta: TraceMeta::default()
            },
            chunk(FP_A, 16138),
            chunk(FP_B, 7),
            TraceEvent::FileEnd,
            TraceEvent::FileStart {
                name: vec![],
                meta: TraceMeta::default()
            },
            TraceEvent::FileEnd,
        ]
    );
    assert_eq!(destor("stream end").unwrap(), vec![]);
}

#[test]
fn errors_name_line_and_byte_offset() {
    let text = format!("file start 1\nx\n{FP_A} 12\n{FP_A} 1x\nfile end\nstream end");
    let msg = destor_err(&text);
    // Line 4 starts after "file start 1\n" (13) + "x\n" (2) + 44 bytes.
    assert!(
        msg.starts_with("corrupt t line 4 (byte offset 59): chunk size must be a decimal"),
        "{msg}"
    );
}

#[test]
fn each_malformation_is_reported() {
    let cases: Vec<(String, &str)> = vec![
        ("".into(), "missing `stream end`"),
        ("file start x\n".into(), "name length in decimal"),
        ("file start 99999999999\n".into(), "exceeds the limit"),
        (
            "file start 3\nab\n".into(),
            "file name is 2 bytes but `file start` announced 3",
        ),
        ("file start 3\nabcd\n".into(), "file name is 4 bytes"),
        ("file start 3\nabcde\n".into(), "longer than the 3 bytes"),
        ("file start 3\nabc".into(), "end of input in the file name"),
        ("file start 1\nx\n".into(), "missing `file end`"),
        ("file start 1\nx\nfile end\n".into(), "missing `stream end`"),
        (
            "file begin 1\n".into(),
            "expected `file start <name length>`",
        ),
        (
            format!("file start 1\nx\n{FP_A}\n"),
            "expected `<40 hex digits> <size>`",
        ),
        (
            format!("file start 1\nx\n{FP_A}  5\n"),
            "chunk size must be a decimal",
        ),
        (
            format!("file start 1\nx\n{FP_A} 5 6\n"),
            "chunk size must be a decimal",
        ),
        (
            format!("file start 1\nx\n{FP_A} -5\n"),
            "chunk size must be a decimal",
        ),
        (
            format!("file start 1\nx\n{FP_A} 4294967296\n"),
            "does not fit in 32 bits",
        ),
        (
            format!("file start 1\nx\nG{} 5\n", &FP_A[1..]),
            "expected `<40 hex digits>",
        ),
        (
            format!("file start 1\nx\n{}A 5\n", FP_A),
            "expected `<40 hex digits>",
        ),
        (
            "stream end\nfile start 1\n".into(),
            "data after `stream end`",
        ),
        (
            format!("file start 1\nx\n{}\n", "7".repeat(300)),
            "line longer than 256 bytes",
        ),
    ];
    for (text, want) in cases {
        let r = destor(&text);
        assert_corrupt_at_most(&r, text.len() as u64, &text);
        let msg = r.unwrap_err().to_string();
        assert!(msg.contains(want), "{text:?}: `{msg}` lacks `{want}`");
        assert!(!msg.contains('\n'), "{msg}");
    }
}

#[test]
fn a_line_without_newline_is_bounded() {
    // 1 MiB of non-newline bytes: reported after 256, not buffered whole.
    let mut text = b"file start 1\nx\n".to_vec();
    text.extend(std::iter::repeat_n(b'a', 1 << 20));
    let msg = read_bytes(&text, TraceFormat::Destor)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("line longer than 256 bytes"), "{msg}");
}
