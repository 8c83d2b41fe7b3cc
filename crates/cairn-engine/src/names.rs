//! Entry names and paths as text. Listings store names as bytes (any bytes
//! but `/` and NUL, as Unix allows); snapshot paths, patterns, JSON and
//! terminal output are strings. A name that is valid UTF-8 is its own
//! text. A name that is not is escaped the way restic quotes such names:
//! each byte outside a valid UTF-8 sequence becomes `\xNN` (two lowercase
//! hex digits) and each backslash `\\`, so the text names exactly one byte
//! string and [`name_bytes`] gives it back.
//!
//! The one ambiguity: a valid UTF-8 name spelled like an escape (`a\xff`)
//! has the same text as the escaped name (`a` and the byte 0xff). Lookups
//! by text try the name that is literally that text first.
//!
//! Command-line arguments arrive as bytes: [`os_path`] turns a path
//! argument into snapshot-path text (each `/`-separated component as
//! above), [`os_pattern`] a glob pattern (the escapes' backslashes
//! themselves escaped, so that the pattern matches the text). Either way a
//! raw name typed in a shell and its escaped text shown by `ls` or `find`
//! address the same entry.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::fmt::Write;
use std::os::unix::ffi::OsStrExt;

/// The text of entry name `name` (borrowed when it is valid UTF-8).
pub fn name_text(name: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(name) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(escape(name, false)),
    }
}

/// `name` with its invalid bytes as `\xNN` and backslashes as `\\`
/// (`glob`: each escape's backslash doubled once more, for a pattern).
fn escape(name: &[u8], glob: bool) -> String {
    let bs = if glob { "\\\\" } else { "\\" };
    let mut out = String::with_capacity(name.len() + 8);
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            // In a pattern the user's backslashes keep their glob meaning.
            if c == '\\' && !glob {
                out.push_str("\\\\");
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "{bs}x{b:02x}");
        }
    }
    out
}

/// Whether `text` names the entry `name`: the name's text, or (for a
/// valid UTF-8 name) the text itself.
pub fn text_names(text: &str, name: &[u8]) -> bool {
    text.as_bytes() == name || (std::str::from_utf8(name).is_err() && name_text(name) == text)
}

/// The bytes a name's text stands for: the inverse of [`name_text`] for
/// escaped text; text with no escape is taken literally.
pub fn name_bytes(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    while i < b.len() {
        match (b[i], b.get(i + 1)) {
            (b'\\', Some(b'\\')) => {
                out.push(b'\\');
                i += 2;
            }
            (b'\\', Some(b'x')) => match (
                b.get(i + 2).and_then(|&c| hex(c)),
                b.get(i + 3).and_then(|&c| hex(c)),
            ) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 4;
                }
                _ => {
                    out.push(b'\\');
                    i += 1;
                }
            },
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    // Only text that escaping produces is decoded; anything else is literal.
    if name_text(&out) == text {
        out
    } else {
        b.to_vec()
    }
}

/// A path argument as snapshot-path text: components escaped one by one.
pub fn os_path(arg: &OsStr) -> String {
    components(arg, false)
}

/// A glob pattern argument as pattern text matching escaped names.
pub fn os_pattern(arg: &OsStr) -> String {
    components(arg, true)
}

fn components(arg: &OsStr, glob: bool) -> String {
    let b = arg.as_bytes();
    if let Ok(s) = std::str::from_utf8(b) {
        return s.to_string();
    }
    b.split(|&c| c == b'/')
        .map(|c| match std::str::from_utf8(c) {
            Ok(s) => s.to_string(),
            Err(_) => escape(c, glob),
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names_are_their_own_text_and_others_escape_reversibly() {
        assert_eq!(name_text(b"plain \\ name"), "plain \\ name");
        assert_eq!(name_text("名前".as_bytes()), "名前");
        assert_eq!(name_text(b"caf\xe9"), "caf\\xe9");
        assert_eq!(name_text(b"a\\b\xff"), "a\\\\b\\xff");
        for n in [&b"caf\xe9"[..], b"a\\b\xff", b"\xff\xfe", b"x\\x41\x80"] {
            assert_eq!(name_bytes(&name_text(n)), n, "{n:?}");
            assert!(text_names(&name_text(n), n));
        }
        // Text no escaping produces stays literal.
        assert_eq!(name_bytes("a\\x41"), b"a\\x41");
        assert_eq!(name_bytes("a\\b"), b"a\\b");
        assert!(text_names("a\\x41", b"a\\x41"));
        assert!(!text_names("a\\x41", b"aA"));
    }

    #[test]
    fn arguments_escape_per_component() {
        let arg = OsStr::from_bytes(b"/tree/caf\xe9/f\xff*.txt");
        assert_eq!(os_path(arg), "/tree/caf\\xe9/f\\xff*.txt");
        assert_eq!(os_pattern(arg), "/tree/caf\\\\xe9/f\\\\xff*.txt");
        assert_eq!(os_path(OsStr::new("/a\\b/c")), "/a\\b/c");
        let g = globset::Glob::new(&os_pattern(OsStr::from_bytes(b"f\xff*")))
            .unwrap()
            .compile_matcher();
        assert!(g.is_match(name_text(b"f\xff.txt").as_ref()));
    }
}
