//! The fault modes of FaultBackend: crash after N writes, fail once, bit flips.

use cairn_backend::{
    is_injected_crash, CorruptAt, FaultBackend, FaultPlan, InjectedError, MemBackend,
};
use cairn_core::Backend;
use std::io;

fn setup() -> (MemBackend, FaultBackend<MemBackend>) {
    let store = MemBackend::new();
    (store.clone(), FaultBackend::new(store, FaultPlan::new()))
}

#[test]
fn crash_after_n_writes() {
    let (store, b) = setup();
    b.write_atomic("before", b"0").unwrap();
    let plan = b.plan().clone();
    plan.crash_after_writes(2);
    b.write_atomic("a", b"1").unwrap();
    b.write_atomic("b", b"2").unwrap();
    assert!(!plan.crashed());
    let err = b.write_atomic("c", b"3").unwrap_err();
    assert!(is_injected_crash(&err), "{err}");
    assert!(err.to_string().contains("injected crash"), "{err}");
    assert!(plan.crashed());
    assert!(is_injected_crash(&b.write_atomic("d", b"4").unwrap_err()));
    assert!(is_injected_crash(&b.delete("a").unwrap_err()));
    assert!(is_injected_crash(&b.clean_temporaries().unwrap_err()));
    // Reads still work unless asked otherwise.
    assert_eq!(b.read("a").unwrap(), b"1");
    plan.set_crash_reads(true);
    assert!(is_injected_crash(&b.read("a").unwrap_err()));
    assert!(is_injected_crash(&b.list("").unwrap_err()));
    // The store holds exactly what was written before the crash.
    assert_eq!(store.list("").unwrap(), vec!["a", "b", "before"]);
    // Deletes are numbered like writes: before, a, b, c, d, delete a.
    assert_eq!(plan.writes_attempted(), 6);
    assert_eq!(plan.writes_failed(), 4);
    plan.restart();
    b.write_atomic("c", b"3").unwrap();
    assert_eq!(b.read("c").unwrap(), b"3");
}

#[test]
fn crash_after_zero_writes_and_crash_now() {
    let (_store, b) = setup();
    b.plan().crash_after_writes(0);
    assert!(b.write_atomic("a", b"1").is_err());
    b.plan().restart();
    b.write_atomic("a", b"1").unwrap();
    b.plan().crash_now();
    assert!(is_injected_crash(&b.delete("a").unwrap_err()));
    assert!(!is_injected_crash(&cairn_core::Error::invalid("x")));
}

#[test]
fn fail_nth_write_once() {
    let (store, b) = setup();
    let plan = b.plan();
    plan.fail_write_once(2, InjectedError::DISK_FULL);
    plan.fail_write_once(3, InjectedError::Kind(io::ErrorKind::PermissionDenied));
    b.write_atomic("one", b"1").unwrap();
    match b.write_atomic("two", b"2").unwrap_err() {
        cairn_core::Error::Io { context, source } => {
            assert_eq!(source.raw_os_error(), Some(28));
            assert!(context.contains("two"), "{context}");
        }
        e => panic!("unexpected {e}"),
    }
    let err = b.write_atomic("three", b"3").unwrap_err();
    assert!(!is_injected_crash(&err));
    assert!(!store.exists("two").unwrap() && !store.exists("three").unwrap());
    b.write_atomic("two", b"2").unwrap();
    b.write_atomic("three", b"3").unwrap();
    assert_eq!(store.list("").unwrap(), vec!["one", "three", "two"]);
    assert_eq!((plan.writes_attempted(), plan.writes_failed()), (5, 2));
    assert!(!plan.crashed());
}

#[test]
fn corrupt_reads_flip_one_bit() {
    let (store, b) = setup();
    let data: Vec<u8> = (0..100).collect();
    b.write_atomic("containers/00/1", &data).unwrap();
    b.write_atomic("containers/00/2", &data).unwrap();
    b.write_atomic("index/1", &data).unwrap();
    let plan = b.plan();
    plan.corrupt_read("containers/00/1", CorruptAt::Start(10), 3);

    let mut want = data.clone();
    want[10] ^= 1 << 3;
    assert_eq!(b.read("containers/00/1").unwrap(), want);
    assert_eq!(b.read_at("containers/00/1", 5, 10).unwrap(), want[5..15]);
    assert_eq!(
        b.read_at("containers/00/1", 11, 10).unwrap(),
        data[11..21],
        "range misses the byte"
    );
    assert_eq!(
        b.read("containers/00/2").unwrap(),
        data,
        "other key untouched"
    );
    assert_eq!(
        store.read("containers/00/1").unwrap(),
        data,
        "stored object untouched"
    );
    assert_eq!(plan.reads_corrupted(), 2);

    plan.clear_corruptions();
    plan.corrupt_reads_with_prefix("containers/", CorruptAt::End(1), 0);
    let mut tail = data.clone();
    tail[99] ^= 1;
    assert_eq!(b.read("containers/00/2").unwrap(), tail);
    assert_eq!(
        b.read_tail("containers/00/1", 4).unwrap(),
        (100, tail[96..].to_vec())
    );
    assert_eq!(b.read_at("containers/00/1", 90, 10).unwrap(), tail[90..]);
    assert_eq!(b.read("index/1").unwrap(), data, "prefix does not match");

    plan.reset();
    assert_eq!(b.read("containers/00/2").unwrap(), data);
}
