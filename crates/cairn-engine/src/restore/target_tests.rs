//! Unit tests of `target.rs`: what a restore may and may not do to what is
//! already in its target, at ordinary depth and beyond `PATH_MAX`.

use super::*;
use cairn_format::dir::EntryKind;

fn entry(kind: EntryKind, size: u64) -> DirEntry {
    DirEntry {
        name: b"f".to_vec(),
        kind,
        mode: 0o640,
        uid: 0,
        gid: 0,
        size,
        mtime_ns: 1_500_000_000_123_456_789,
        target: (kind == EntryKind::Symlink).then(|| b"pointee".to_vec()),
        content: None,
        ctime_ns: 0,
        inode: 0,
        children: None,
        extras: Default::default(),
    }
}

fn temps(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(TEMP_PREFIX))
        .collect()
}

fn write(data: &'static [u8]) -> impl FnMut(&mut dyn Write) -> Result<()> {
    move |w| w.write_all(data).ctx(|| "writing".into())
}

#[test]
fn replaces_a_hard_link_instead_of_writing_through_it() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    fs::write(&outside, b"outside bytes").unwrap();
    let t = tmp.path().join("t");
    fs::create_dir(&t).unwrap();
    fs::hard_link(&outside, t.join("f")).unwrap();
    let target = Target::new(RestoreOptions::default());
    let e = entry(EntryKind::File, 3);
    let placed = target
        .place_file(&t.join("f"), &e, &mut write(b"new"))
        .unwrap();
    assert_eq!(placed, Placed::Replaced);
    assert_eq!(fs::read(&outside).unwrap(), b"outside bytes");
    assert_eq!(fs::read(t.join("f")).unwrap(), b"new");
    let m = fs::metadata(t.join("f")).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o640);
    assert_eq!(m.mtime_nsec(), 123_456_789);
    assert!(temps(&t).is_empty());
}

#[test]
fn a_failed_write_leaves_the_old_file_and_no_temporary() {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("f");
    fs::write(&dest, b"old").unwrap();
    let target = Target::new(RestoreOptions::default());
    let e = entry(EntryKind::File, 3);
    let err = target
        .place_file(&dest, &e, &mut |w| {
            w.write_all(b"partial").ctx(|| "writing".into())?;
            Err(Error::io("writing f", io::Error::from_raw_os_error(28)))
        })
        .unwrap_err();
    let fatal = full_disk(err, &dest).expect("ENOSPC is a full disk");
    assert!(
        fatal.to_string().starts_with(&format!(
            "target file system is full while writing {}",
            dest.display()
        )),
        "{fatal}"
    );
    assert_eq!(fs::read(&dest).unwrap(), b"old");
    assert!(temps(tmp.path()).is_empty());
    // Any other error is not a full disk.
    let other = Error::io("x", io::Error::from_raw_os_error(5));
    assert!(full_disk(other, &dest).is_err());
    assert!(is_full_disk(&io::Error::from_raw_os_error(122)));
}

#[test]
fn simulated_capacity_fails_with_enospc_and_cleans_up() {
    let tmp = tempfile::tempdir().unwrap();
    let target = Target::with_capacity(RestoreOptions::default(), 10);
    let e = entry(EntryKind::File, 16);
    let err = target
        .place_file(&tmp.path().join("f"), &e, &mut write(b"0123456789abcdef"))
        .unwrap_err();
    assert!(full_disk(err, Path::new("f")).is_ok());
    assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn symlinks_where_directories_go_are_unlinked_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("keep"), b"x").unwrap();
    let t = tmp.path().join("t");
    fs::create_dir(&t).unwrap();
    std::os::unix::fs::symlink(&outside, t.join("d")).unwrap();
    let always = Target::new(RestoreOptions::default());
    let never = Target::new(RestoreOptions {
        overwrite: Overwrite::Never,
        delete: false,
        dry_run: false,
    });
    assert_eq!(never.prepare_dir(&t.join("d")).unwrap(), DirState::Skipped);
    assert!(fs::symlink_metadata(t.join("d")).unwrap().is_symlink());
    assert_eq!(
        always.prepare_dir(&t.join("d")).unwrap(),
        DirState::Replaced
    );
    assert!(fs::symlink_metadata(t.join("d")).unwrap().is_dir());
    assert_eq!(
        always.prepare_dir(&t.join("d")).unwrap(),
        DirState::Existing
    );
    assert_eq!(
        always.prepare_dir(&t.join("new")).unwrap(),
        DirState::Created
    );
    assert_eq!(fs::read(outside.join("keep")).unwrap(), b"x");
}

#[test]
fn directories_in_the_way_of_files() {
    let tmp = tempfile::tempdir().unwrap();
    let e = entry(EntryKind::File, 3);
    let empty = tmp.path().join("empty");
    let full = tmp.path().join("full");
    fs::create_dir(&empty).unwrap();
    fs::create_dir(&full).unwrap();
    fs::write(full.join("inner"), b"x").unwrap();
    let always = Target::new(RestoreOptions::default());
    let p = always.place_file(&empty, &e, &mut write(b"new")).unwrap();
    assert_eq!(p, Placed::Replaced);
    assert_eq!(fs::read(&empty).unwrap(), b"new");
    let p = always.place_file(&full, &e, &mut write(b"new")).unwrap();
    assert_eq!(p, Placed::NonEmptyDir);
    assert_eq!(fs::read(full.join("inner")).unwrap(), b"x");
    let delete = Target::new(RestoreOptions {
        overwrite: Overwrite::Always,
        delete: true,
        dry_run: false,
    });
    let p = delete.place_file(&full, &e, &mut write(b"new")).unwrap();
    assert_eq!(p, Placed::Replaced);
    assert_eq!(fs::read(&full).unwrap(), b"new");
    assert!(temps(tmp.path()).is_empty());
}

#[test]
fn never_and_if_changed_keep_existing_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("f");
    fs::write(&dest, b"old").unwrap();
    let e = entry(EntryKind::File, 3);
    let never = Target::new(RestoreOptions {
        overwrite: Overwrite::Never,
        delete: false,
        dry_run: false,
    });
    let p = never.place_file(&dest, &e, &mut write(b"new")).unwrap();
    assert_eq!(p, Placed::Skipped);
    let changed = Target::new(RestoreOptions {
        overwrite: Overwrite::IfChanged,
        delete: false,
        dry_run: false,
    });
    // Different mtime: replaced.
    let p = changed.place_file(&dest, &e, &mut write(b"new")).unwrap();
    assert_eq!(p, Placed::Replaced);
    assert_eq!(fs::read(&dest).unwrap(), b"new");
    // Same size and mtime now: skipped.
    let p = changed.place_file(&dest, &e, &mut write(b"zzz")).unwrap();
    assert_eq!(p, Placed::Skipped);
    assert_eq!(fs::read(&dest).unwrap(), b"new");
    // Symlinks: replaced by rename, then unchanged.
    let l = tmp.path().join("l");
    std::os::unix::fs::symlink("elsewhere", &l).unwrap();
    let s = entry(EntryKind::Symlink, 0);
    assert_eq!(changed.place_symlink(&l, &s).unwrap(), Placed::Replaced);
    assert_eq!(fs::read_link(&l).unwrap(), Path::new("pointee"));
    assert_eq!(changed.place_symlink(&l, &s).unwrap(), Placed::Skipped);
    assert!(temps(tmp.path()).is_empty());
}

/// Verifies the claim the module relies on: `fs::remove_dir_all` unlinks
/// symlinks inside the tree instead of following them.
#[test]
fn remove_dir_all_and_prune_do_not_follow_symlinks() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("keep"), b"x").unwrap();
    let t = tmp.path().join("t");
    fs::create_dir_all(t.join("d/sub")).unwrap();
    std::os::unix::fs::symlink(&outside, t.join("d/sub/link")).unwrap();
    std::os::unix::fs::symlink(&outside, t.join("toplink")).unwrap();
    fs::write(t.join("stay"), b"s").unwrap();
    let target = Target::new(RestoreOptions {
        overwrite: Overwrite::Always,
        delete: true,
        dry_run: false,
    });
    let keep: HashSet<&[u8]> = [b"stay".as_slice()].into_iter().collect();
    let mut errors = Vec::new();
    assert_eq!(target.prune(&t, &keep, &mut errors), 2);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(fs::read(outside.join("keep")).unwrap(), b"x");
    assert_eq!(fs::read_dir(&t).unwrap().count(), 1);
}

/// Beyond `PATH_MAX` the same rules hold: a symlink where a directory goes
/// is replaced, not followed; a hard link at a destination is replaced, not
/// written through; symlinks, hard links and FIFOs are placed by temporary
/// and rename; `--delete` prunes; directory metadata is applied.
#[test]
fn deep_destinations_keep_the_rules() {
    use std::io::Read;
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("o"), b"outside").unwrap();
    let target = Target::new(RestoreOptions {
        overwrite: Overwrite::Always,
        delete: true,
        dry_run: false,
    });
    let mut deep = tmp.path().join("t");
    fs::create_dir(&deep).unwrap();
    while deep.as_os_str().len() < 5000 {
        deep.push("d".repeat(200));
        assert_eq!(target.prepare_dir(&deep).unwrap(), DirState::Created);
    }
    let d = deep.join("d");
    target.dirs().symlink(outside.as_os_str(), &d).unwrap();
    assert_eq!(target.prepare_dir(&d).unwrap(), DirState::Replaced);
    assert!(target.dirs().lstat(&d).unwrap().is_dir());

    let f = d.join("f");
    target.dirs().hard_link(&outside.join("o"), &f).unwrap();
    let e = entry(EntryKind::File, 3);
    let placed = target.place_file(&f, &e, &mut write(b"new")).unwrap();
    assert_eq!(placed, Placed::Replaced);
    assert_eq!(fs::read(outside.join("o")).unwrap(), b"outside");
    let mut got = Vec::new();
    let opened = target.dirs().open(&f, nix::fcntl::OFlag::O_RDONLY, 0);
    opened.unwrap().read_to_end(&mut got).unwrap();
    assert_eq!(got, b"new");
    let m = target.dirs().lstat(&f).unwrap();
    assert_eq!((m.mode() & 0o7777, m.mtime_nsec()), (0o640, 123_456_789));

    let l = entry(EntryKind::Symlink, 0);
    assert_eq!(target.place_symlink(&d.join("l"), &l).unwrap(), Placed::New);
    let link = target.dirs().read_link(&d.join("l")).unwrap();
    assert_eq!(link, Path::new("pointee"));
    let h = target.place_hard_link(&d.join("h"), &e, &f).unwrap();
    assert_eq!(h, Placed::New);
    assert_eq!(target.dirs().lstat(&d.join("h")).unwrap().ino(), m.ino());
    let p = entry(EntryKind::Fifo, 0);
    assert_eq!(target.place_special(&d.join("p"), &p).unwrap(), Placed::New);
    assert!(target
        .dirs()
        .lstat(&d.join("p"))
        .unwrap()
        .file_type()
        .is_fifo());

    let keep: HashSet<&[u8]> = [b"f".as_slice()].into_iter().collect();
    let mut errors = Vec::new();
    assert_eq!(target.prune(&d, &keep, &mut errors), 3);
    assert!(errors.is_empty(), "{errors:?}");
    let left = target.dirs().read_dir(&d).unwrap();
    assert_eq!(
        left.into_iter().map(|n| n.unwrap()).collect::<Vec<_>>(),
        ["f"]
    );

    let mut de = entry(EntryKind::Dir, 0);
    de.mode = 0o750;
    assert!(target.apply_dir_meta(&d, &de).unwrap().is_empty());
    let m = target.dirs().lstat(&d).unwrap();
    assert_eq!((m.mode() & 0o7777, m.mtime_nsec()), (0o750, 123_456_789));

    // A non-empty directory replaced by a file (`--delete`).
    let placed = target.place_file(&d, &e, &mut write(b"xyz")).unwrap();
    assert_eq!(placed, Placed::Replaced);
    assert!(target.dirs().lstat(&d).unwrap().is_file());
    assert_eq!(fs::read(outside.join("o")).unwrap(), b"outside");
}
