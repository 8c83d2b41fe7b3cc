//! Include and exclude patterns, one syntax for `backup --exclude` (and its
//! exclude files) and `restore --include`/`--exclude`: each pattern compiled
//! here into a glob over absolute paths. Restic-compatible, glob matching by
//! `globset`:
//!
//! - `*` and `?` match within one path component, `[...]` a character class,
//!   `**` as a whole component any number of components;
//! - a pattern without `/` is tested against every component's name (it is
//!   compiled as `**/PATTERN`);
//! - a pattern starting with `/` is anchored: it must match the entry's
//!   whole absolute path;
//! - any other pattern with a `/` (`cache/*.tmp`) must match the last
//!   components of the path at any depth (compiled as `**/PATTERN`).
//!
//! What each command does with a match (skip a subtree, take a subtree and
//! its parents) is the command's: `backup/select.rs`, `restore/select.rs`.

use globset::GlobBuilder;

use cairn_core::{Error, Result};

/// Compiles one pattern into a glob over absolute paths (see the module
/// doc). `flag` names the option in errors (`exclude`, `include`).
pub fn compile(pattern: &str, case_insensitive: bool, flag: &str) -> Result<globset::Glob> {
    let clean = separator_safe_classes(&clean_pattern(pattern));
    if clean.is_empty() || clean == "/" {
        // `/` could only match the root, and a source is never excluded.
        return Err(Error::invalid(format!(
            "empty {flag} pattern {pattern:?} (it matches nothing)"
        )));
    }
    let full = if clean.starts_with('/') {
        clean
    } else {
        format!("**/{clean}")
    };
    GlobBuilder::new(&full)
        .literal_separator(true)
        .backslash_escape(true)
        .case_insensitive(case_insensitive)
        .build()
        .map_err(|e| Error::invalid(format!("bad {flag} pattern {pattern:?}: {}", e.kind())))
}

/// Adds `/` to every negated class (`[!a]` becomes `[!/a]`): a class is
/// one character of one component, and globset's negated classes would
/// otherwise match the separator (so `[!a]*` would match `/abc` whole).
fn separator_safe_classes(p: &str) -> String {
    let mut out = String::with_capacity(p.len() + 4);
    let mut chars = p.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        out.push(c);
        match c {
            '\\' if !in_class => {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            '[' if !in_class => {
                in_class = true;
                let negated = matches!(chars.peek(), Some('!' | '^'));
                if negated {
                    out.push(chars.next().unwrap_or('!'));
                }
                // A `]` right after the opening (or the negation) is a
                // member, not the end of the class; it must stay first.
                if chars.peek() == Some(&']') {
                    out.push(chars.next().unwrap_or(']'));
                }
                if negated {
                    out.push('/');
                }
            }
            ']' if in_class => in_class = false,
            _ => {}
        }
    }
    out
}

/// Trailing slashes dropped and repeated slashes collapsed, so `cache/`
/// is the name pattern `cache` and `/a//b` is `/a/b`.
pub fn clean_pattern(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for c in p.chars() {
        if c == '/' && out.ends_with('/') {
            continue;
        }
        out.push(c);
    }
    while out.len() > 1 && out.ends_with('/') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negated_classes_never_match_the_separator() {
        assert_eq!(separator_safe_classes(r"[!]a]\[!b"), r"[!]/a]\[!b");
        assert_eq!(separator_safe_classes("[^x]"), "[^/x]");
    }

    #[test]
    fn slashes_are_cleaned_and_empty_patterns_refused() {
        assert_eq!(clean_pattern("cache/"), "cache");
        assert_eq!(clean_pattern("/a//b/"), "/a/b");
        let err = compile("/", false, "include").unwrap_err().to_string();
        assert!(err.contains("empty include pattern"), "{err}");
    }
}
