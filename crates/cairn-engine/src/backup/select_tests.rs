//! Tests of the backup selection's pattern semantics (name vs. anchored vs.
//! relative-with-slash patterns, `**`, case folding, exclude-file syntax)
//! and of the directory and metadata rules, on real temporary files.

use std::path::Path;

use proptest::prelude::*;

use super::*;

fn sel(patterns: &[&str]) -> Selection {
    let mut b = Selection::builder();
    for p in patterns {
        b.pattern(p, false).unwrap();
    }
    b.build().unwrap()
}

fn hit(s: &Selection, path: &str) -> bool {
    s.excluded_by_pattern(Path::new(path)).is_some()
}

#[test]
fn name_pattern_matches_any_component_name_only() {
    let s = sel(&["*.o"]);
    assert!(hit(&s, "/src/a.o"));
    assert!(hit(&s, "/src/deep/er/b.o"));
    assert!(hit(&s, "/x.o"));
    assert!(!hit(&s, "/src/a.oo"));
    // `*` never crosses a `/`: the name must match entirely.
    assert!(!hit(&s, "/src/a.o/b"));
    let s = sel(&["cache"]);
    assert!(hit(&s, "/home/u/cache"));
    assert!(!hit(&s, "/home/u/cache2"));
    assert!(!hit(&s, "/home/u/xcache"));
}

#[test]
fn anchored_pattern_matches_whole_absolute_path() {
    let s = sel(&["/home/*/tmp"]);
    assert!(hit(&s, "/home/u/tmp"));
    assert!(!hit(&s, "/srv/home/u/tmp"));
    assert!(!hit(&s, "/home/u/v/tmp"));
    // Below a matched directory the walker never looks; the pattern itself
    // does not match deeper paths.
    assert!(!hit(&s, "/home/u/tmp/f"));
}

#[test]
fn relative_pattern_with_slash_matches_trailing_components() {
    let s = sel(&["build/*.tmp"]);
    assert!(hit(&s, "/p/build/x.tmp"));
    assert!(hit(&s, "/build/x.tmp"));
    assert!(!hit(&s, "/p/build/sub/x.tmp"));
    assert!(!hit(&s, "/p/rebuild/x.tmp"));
}

#[test]
fn double_star_crosses_directories() {
    let s = sel(&["/data/**/*.log"]);
    assert!(hit(&s, "/data/a.log"));
    assert!(hit(&s, "/data/x/y/z/a.log"));
    assert!(!hit(&s, "/other/data/a.log"));
    let s = sel(&["node_modules/**/test"]);
    assert!(hit(&s, "/p/node_modules/test"));
    assert!(hit(&s, "/p/node_modules/a/b/test"));
    assert!(!hit(&s, "/p/node_modules/a/b/test2"));
}

#[test]
fn classes_and_question_mark() {
    let s = sel(&["file[0-9].?"]);
    assert!(hit(&s, "/a/file3.c"));
    assert!(!hit(&s, "/a/fileX.c"));
    assert!(!hit(&s, "/a/file3.cc"));
    let s = sel(&["[!a]*"]);
    assert!(hit(&s, "/x/bcd"));
    assert!(!hit(&s, "/abc"));
    // A class is one character of one component, never the separator.
    let s = sel(&["/a[!b]c", "/d[^e]f", "/x[!]]y"]);
    assert!(hit(&s, "/azc") && hit(&s, "/dzf") && hit(&s, "/xzy"));
    assert!(!hit(&s, "/abc") && !hit(&s, "/x]y"));
    assert!(!hit(&s, "/a/c") && !hit(&s, "/d/f") && !hit(&s, "/x/y"));
}

#[test]
fn case_insensitive_only_where_asked() {
    let mut b = Selection::builder();
    b.pattern("*.JPG", true).unwrap();
    b.pattern("Thumbs.db", false).unwrap();
    let s = b.build().unwrap();
    assert!(hit(&s, "/p/a.jpg"));
    assert!(hit(&s, "/p/a.JpG"));
    assert!(hit(&s, "/p/Thumbs.db"));
    assert!(!hit(&s, "/p/thumbs.db"));
    assert_eq!(
        s.excluded_by_pattern(Path::new("/p/a.jpg")),
        Some(ExcludeReason::Pattern("\"*.JPG\" (any case)".into()))
    );
}

#[test]
fn first_matching_pattern_is_reported() {
    let s = sel(&["*.c", "a*", "*"]);
    assert_eq!(
        s.excluded_by_pattern(Path::new("/d/a.c")),
        Some(ExcludeReason::Pattern("\"*.c\"".into()))
    );
    assert_eq!(
        s.excluded_by_pattern(Path::new("/d/ab")),
        Some(ExcludeReason::Pattern("\"a*\"".into()))
    );
}

#[test]
fn trailing_and_repeated_slashes_are_cleaned() {
    let s = sel(&["cache/", "/a//b"]);
    assert!(hit(&s, "/x/cache"));
    assert!(hit(&s, "/a/b"));
}

#[test]
fn bad_patterns_are_errors_naming_the_pattern() {
    for bad in ["", "/", "[abc", "a**b/c"] {
        let mut b = Selection::builder();
        let r = b.pattern(bad, false).map(|_| ());
        if bad == "a**b/c" && r.is_ok() {
            // globset reads a `**` inside a component as `*`; then it must
            // still behave like one.
            assert!(hit(&b.build().unwrap(), "/q/axxb/c"));
            continue;
        }
        let e = r.expect_err(bad).to_string();
        assert!(e.contains(&format!("{bad:?}")), "{bad:?}: {e}");
    }
}

#[test]
fn exclude_file_lines_comments_and_blanks() {
    let mut b = Selection::builder();
    b.pattern_lines(
        "# build output\n*.o\n\n   \n  /tmp/x  \r\n#*.c\n",
        false,
        "f",
    )
    .unwrap();
    let s = b.build().unwrap();
    assert!(hit(&s, "/a/b.o"));
    assert!(hit(&s, "/tmp/x"));
    assert!(!hit(&s, "/a/b.c"), "a commented pattern is not a pattern");
    assert!(!hit(&s, "/a/# build output"));

    let mut b = Selection::builder();
    let e = b
        .pattern_lines("ok\n\n[bad\n", false, "list.txt")
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("list.txt, line 3") && e.contains("[bad"), "{e}");
}

#[test]
fn missing_exclude_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Selection::builder();
    let e = b
        .pattern_file(&dir.path().join("nope"), false)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot read exclude file"), "{e}");
}

#[test]
fn cache_tag_needs_the_signature_and_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut b = Selection::builder();
    b.exclude_caches(true);
    let s = b.build().unwrap();
    let names = [std::ffi::OsStr::new(CACHEDIR_TAG)];

    std::fs::write(d.join(CACHEDIR_TAG), b"not a tag").unwrap();
    assert_eq!(s.excluded_dir(d, &names), None);
    let mut tag = CACHEDIR_SIGNATURE.to_vec();
    tag.extend_from_slice(b"\n# comment\n");
    std::fs::write(d.join(CACHEDIR_TAG), &tag).unwrap();
    assert_eq!(s.excluded_dir(d, &names), Some(ExcludeReason::CacheDir));
    // A truncated signature is no tag.
    std::fs::write(d.join(CACHEDIR_TAG), &CACHEDIR_SIGNATURE[..20]).unwrap();
    assert_eq!(s.excluded_dir(d, &names), None);
    // Nor is a symlink to a valid one.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("real"), &tag).unwrap();
    std::fs::remove_file(d.join(CACHEDIR_TAG)).unwrap();
    std::os::unix::fs::symlink(other.path().join("real"), d.join(CACHEDIR_TAG)).unwrap();
    assert_eq!(s.excluded_dir(d, &names), None);
    // Without the flag a valid tag changes nothing.
    assert_eq!(Selection::default().excluded_dir(d, &names), None);
}

#[test]
fn marker_files_and_size_limit() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Selection::builder();
    b.if_present(".nobackup").unwrap().larger_than(Some(10));
    assert!(b.if_present("a/b").is_err());
    let s = b.build().unwrap();
    let names = [std::ffi::OsStr::new("x"), std::ffi::OsStr::new(".nobackup")];
    assert_eq!(
        s.excluded_dir(dir.path(), &names),
        Some(ExcludeReason::MarkerFile(".nobackup".into()))
    );
    assert_eq!(s.excluded_dir(dir.path(), &names[..1]), None);

    let small = dir.path().join("small");
    let big = dir.path().join("big");
    std::fs::write(&small, [0u8; 10]).unwrap();
    std::fs::write(&big, [0u8; 11]).unwrap();
    let dev = std::fs::metadata(dir.path()).unwrap().dev();
    let m = |p: &Path| std::fs::symlink_metadata(p).unwrap();
    assert_eq!(s.excluded_by_meta(&m(&small), dev), None);
    assert_eq!(
        s.excluded_by_meta(&m(&big), dev),
        Some(ExcludeReason::Larger(11))
    );
    // The size limit is for files; a directory is never "larger".
    let mut b = Selection::builder();
    b.larger_than(Some(0)).one_file_system(true);
    let s = b.build().unwrap();
    assert_eq!(s.excluded_by_meta(&m(dir.path()), dev), None);
    assert_eq!(
        s.excluded_by_meta(&m(dir.path()), dev.wrapping_add(1)),
        Some(ExcludeReason::OtherFileSystem)
    );
}

#[test]
fn absolute_clean_resolves_dots_lexically() {
    assert_eq!(absolute_clean(Path::new("/a/./b/../c")), Path::new("/a/c"));
    assert_eq!(absolute_clean(Path::new("/..")), Path::new("/"));
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(absolute_clean(Path::new("x/..")), absolute_clean(&cwd));
}

proptest! {
    /// A literal name pattern (no glob characters) excludes exactly the
    /// paths whose last component is that name, at any depth.
    #[test]
    fn literal_name_matches_last_component(
        dirs in proptest::collection::vec("[a-c]{1,3}", 0..5),
        name in "[a-c]{1,3}",
        pat in "[a-c]{1,3}",
    ) {
        let s = sel(&[&pat]);
        let mut path = String::new();
        for d in &dirs {
            path.push('/');
            path.push_str(d);
        }
        path.push('/');
        path.push_str(&name);
        prop_assert_eq!(hit(&s, &path), name == pat);
    }

    /// Anchoring: `/P` matches a path exactly when the path is `/P` (for
    /// literal patterns), and `**/P` style name patterns agree with
    /// anchored ones at the root.
    #[test]
    fn anchored_literal_is_equality(
        a in proptest::collection::vec("[ab]{1,2}", 1..4),
        b in proptest::collection::vec("[ab]{1,2}", 1..4),
    ) {
        let pa = format!("/{}", a.join("/"));
        let pb = format!("/{}", b.join("/"));
        let s = sel(&[&pa]);
        prop_assert_eq!(hit(&s, &pb), pa == pb);
    }

    /// Case-insensitive matching agrees with matching the lower-cased
    /// pattern against the lower-cased path.
    #[test]
    fn iexclude_is_case_folding(pat in "[a-cA-C*?]{1,4}", name in "[a-cA-C]{1,4}") {
        let mut b = Selection::builder();
        b.pattern(&pat, true).unwrap();
        let ci = b.build().unwrap();
        let lower = sel(&[&pat.to_lowercase()]);
        let path = format!("/d/{name}");
        prop_assert_eq!(hit(&ci, &path), hit(&lower, &path.to_lowercase()));
    }
}

#[test]
fn documented_syntax_details() {
    // Alternation (globset's extension over restic), escapes, and `!` as an
    // ordinary character outside a class.
    let s = sel(&["*.{jpg,png}", r"lit\*", "!keep"]);
    assert!(hit(&s, "/p/a.jpg") && hit(&s, "/p/a.png") && !hit(&s, "/p/a.gif"));
    assert!(hit(&s, "/p/lit*") && !hit(&s, "/p/litx"));
    assert!(hit(&s, "/p/!keep") && !hit(&s, "/p/keep"));
}

#[test]
fn only_files_keeps_directories_and_the_chosen_inodes() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let chosen = dir.path().join("chosen");
    let other = dir.path().join("other");
    std::fs::write(&chosen, b"a").unwrap();
    std::fs::write(&other, b"b").unwrap();
    let m = |p: &Path| std::fs::symlink_metadata(p).unwrap();
    let dev = m(dir.path()).dev();
    let mut b = Selection::builder();
    b.only_files([(m(&chosen).dev(), m(&chosen).ino())].into_iter().collect());
    let s = b.build().unwrap();
    assert!(!s.is_empty());
    assert_eq!(s.excluded_by_meta(&m(&chosen), dev), None);
    assert_eq!(s.excluded_by_meta(&m(dir.path()), dev), None);
    assert_eq!(
        s.excluded_by_meta(&m(&other), dev),
        Some(ExcludeReason::NotChosen)
    );
}
