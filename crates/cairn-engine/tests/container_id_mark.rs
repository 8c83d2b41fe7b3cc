//! The container-id mark (`id_mark.rs`): backups keep it above every
//! container, so writers start from it without listing the containers; a
//! mark left below a container is reported by `check` and raised by
//! `repair index`, and the next backup then allocates above every
//! container present. The index that repair rebuilds never takes the name
//! of an earlier file.

mod common;

use std::sync::Arc;

use cairn_backend::MemBackend;
use cairn_core::{Backend, ContainerId};
use cairn_engine::{id_mark, Repository};
use common::*;

#[test]
fn backups_keep_the_mark_above_every_container_and_repair_restores_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let mut rng = Rng(3);
    let bytes: Vec<u8> = (0..300_000).map(|_| rng.next() as u8).collect();
    std::fs::write(src.join("a"), &bytes).unwrap();
    let mem = Arc::new(MemBackend::new());
    let repo = Repository::init(mem.clone(), tiny_config()).unwrap();
    backup(&repo, &src).unwrap();
    let top = *repo.log.ids().unwrap().last().unwrap();
    let mark = id_mark::read(&*mem).unwrap().unwrap();
    assert!(mark > top, "mark {mark}, top container {top}");
    assert_check_clean(&repo);

    // A mark below the containers (written by hand: a rollback of the
    // store, say, that lost the id slots too) is a problem check names;
    // repair index raises it.
    mem.write_atomic(id_mark::KEY, &id_mark::encode(ContainerId(1)))
        .unwrap();
    // The slots alone keep it sound: the mark is a hint.
    assert_check_clean(&repo);
    for slot in mem.list(id_mark::SLOTS).unwrap() {
        mem.delete(&slot).unwrap();
    }
    let report = cairn_engine::check::check(&repo, false).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.message.contains("container-id mark")),
        "{:#?}",
        report.problems
    );
    let generations = || -> Vec<String> { mem.list("index/").unwrap() };
    let before = generations();
    let lock = repo.lock_writer(false).unwrap();
    cairn_engine::repair::repair_index(&repo, &lock, false).unwrap();
    drop(lock);
    // The rebuilt index takes a name no earlier file had (a reader's cache
    // may still hold the old ones).
    let after = generations();
    assert!(
        after.iter().all(|k| !before.contains(k)),
        "{before:?} -> {after:?}"
    );
    assert!(id_mark::read(&*mem).unwrap().unwrap() > top);
    assert_check_clean(&repo);

    // New data goes into new ids above everything present.
    let more: Vec<u8> = (0..200_000).map(|_| rng.next() as u8).collect();
    std::fs::write(src.join("b"), &more).unwrap();
    let before: Vec<ContainerId> = repo.log.ids().unwrap();
    let second = backup(&repo, &src).unwrap();
    let new: Vec<ContainerId> = repo
        .log
        .ids()
        .unwrap()
        .into_iter()
        .filter(|id| !before.contains(id))
        .collect();
    assert!(!new.is_empty() && new.iter().all(|id| *id > top), "{new:?}");
    assert_restores(&repo, &second, &src);
    assert_check_clean(&repo);
}
