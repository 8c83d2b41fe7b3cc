//! Lock modes between processes' handles on one local repository (flock
//! locks are per open file, so two handles in one process contend like two
//! processes): readers share, a backup writer never waits for readers nor
//! they for it, and a writer that deletes excludes readers both ways.

use cairn_core::Error;
use cairn_engine::Repository;

fn locked<T>(r: cairn_core::Result<T>) -> bool {
    matches!(r, Err(Error::Locked(_)))
}

#[test]
fn readers_share_backups_pass_deleters_exclude() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("repo");
    Repository::init_local(&path, Repository::default_config()).unwrap();
    let a = Repository::open_local(&path).unwrap();
    let b = Repository::open_local(&path).unwrap();

    let r1 = a.lock_reader(false).unwrap();
    let r2 = b.lock_reader(false).expect("readers share");
    let w = b
        .lock_writer(false)
        .expect("a backup does not wait for readers");
    assert!(
        locked(a.lock_out_readers(&w, false)),
        "a deleting writer waits for readers"
    );
    drop((r1, r2));
    let d = a.lock_out_readers(&w, false).expect("no readers left");
    assert!(locked(b.lock_reader(false)), "readers wait for the deleter");
    assert!(locked(a.lock_writer(false)), "still one writer at a time");
    drop(d);
    b.lock_reader(false).expect("released on drop");
    drop(w);

    // A reader waiting for a deleter gets in once it is done.
    let w = a.lock_writer(false).unwrap();
    let d = a.lock_out_readers(&w, false).unwrap();
    let waiter = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        let _r = b.lock_reader(true).unwrap();
        started.elapsed()
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    drop(d);
    let waited = waiter.join().unwrap();
    assert!(
        waited >= std::time::Duration::from_millis(150),
        "{waited:?}"
    );
}
