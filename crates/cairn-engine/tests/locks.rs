//! Lock modes between processes' handles on one local repository (flock
//! locks are per open file, so two handles in one process contend like two
//! processes): readers share, a backup writer never waits for readers nor
//! they for it, and a writer that deletes excludes readers both ways.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use cairn_core::{Error, LockMode};
use cairn_engine::{object_names, Repository};

/// Waits until the kernel lists a waiter blocked on a flock of `lock_file`
/// (a `->` line of `/proc/locks` naming its inode): the proof that a
/// waiting lock call is inside its wait, not about to start it. `hang`
/// guards against a waiter that never blocks.
fn wait_until_flock_blocked(lock_file: &Path, hang: Duration) {
    let inode = format!(":{} ", std::fs::metadata(lock_file).unwrap().ino());
    let deadline = Instant::now() + hang;
    loop {
        let locks = std::fs::read_to_string("/proc/locks").unwrap();
        if locks
            .lines()
            .any(|l| l.contains("->") && l.contains(&inode))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "nothing blocked on {}",
            lock_file.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

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
    // and gets in after the deleter lets go (no timing involved). The
    // deleter marks the release before it lets go, and the reader must see
    // the mark once in: getting in any earlier fails.
    let w = a.lock_writer(false).unwrap();
    let d = a.lock_out_readers(&w, false).unwrap();
    let (blocked_tx, blocked) = mpsc::channel();
    b.on_lock_wait(Arc::new(move |name: &str, mode: LockMode| {
        blocked_tx.send((name.to_string(), mode)).unwrap();
    }));
    let released = Arc::new(AtomicBool::new(false));
    let released_seen = Arc::clone(&released);
    let (got_in_tx, got_in) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let r = b.lock_reader(true).unwrap();
        got_in_tx
            .send(released_seen.load(Ordering::SeqCst))
            .unwrap();
        drop(r);
    });
    let hang = Duration::from_secs(120);
    assert_eq!(
        blocked.recv_timeout(hang).expect("the reader never waited"),
        (object_names::READERS_LOCK.to_string(), LockMode::Shared)
    );
    // The report comes just before the wait; the kernel then shows the
    // reader blocked on the lock file.
    wait_until_flock_blocked(&path.join("locks").join(object_names::READERS_LOCK), hang);
    assert!(
        got_in.try_recv().is_err(),
        "a reader got in while the deleter held the lock"
    );
    released.store(true, Ordering::SeqCst);
    drop(d);
    assert!(
        got_in
            .recv_timeout(hang)
            .expect("the reader did not get in once the deleter let go"),
        "a reader got in before the deleter let go"
    );
    waiter.join().unwrap();
}
