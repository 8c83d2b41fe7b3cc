//! Lock modes between processes' handles on one local repository (flock
//! locks are per open file, so two handles in one process contend like two
//! processes): readers share, a backup writer never waits for readers nor
//! they for it, and a writer that deletes excludes readers both ways.

use std::sync::{mpsc, Arc};
use std::time::Duration;

use cairn_core::{Error, LockMode};
use cairn_engine::{keys, Repository};

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

    // A reader waiting for a deleter gets in once it is done: the waiter
    // reports that it blocks, has not got in while the deleter holds on,
    // and gets in after the deleter lets go (no timing involved).
    let w = a.lock_writer(false).unwrap();
    let d = a.lock_out_readers(&w, false).unwrap();
    let (blocked_tx, blocked) = mpsc::channel();
    b.on_lock_wait(Arc::new(move |name: &str, mode: LockMode| {
        blocked_tx.send((name.to_string(), mode)).unwrap();
    }));
    let (got_in_tx, got_in) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let r = b.lock_reader(true).unwrap();
        got_in_tx.send(()).unwrap();
        drop(r);
    });
    let hang = Duration::from_secs(120);
    assert_eq!(
        blocked.recv_timeout(hang).expect("the reader never waited"),
        (keys::READERS_LOCK.to_string(), LockMode::Shared)
    );
    assert!(
        got_in.try_recv().is_err(),
        "a reader got in while the deleter held the lock"
    );
    drop(d);
    got_in
        .recv_timeout(hang)
        .expect("the reader did not get in once the deleter let go");
    waiter.join().unwrap();
}
