use std::sync::Arc;

use cairn_backend::MemBackend;
use cairn_core::Backend;
use cairn_crypto::{Algorithm, MasterKey, OVERHEAD};

use super::*;

fn backends(algorithm: Algorithm) -> (Arc<MemBackend>, SealedBackend) {
    let raw = Arc::new(MemBackend::new());
    let keys = Arc::new(RepoKeys::new(&MasterKey::from_bytes([7; 32]), algorithm));
    let sealed = SealedBackend::new(raw.clone(), keys);
    (raw, sealed)
}

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 251) as u8).collect()
}

const SIZES: [usize; 7] = [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK, 3 * BLOCK + 5];

#[test]
fn objects_round_trip_whole_and_by_range() {
    for algorithm in Algorithm::ALL {
        let (raw, b) = backends(algorithm);
        for (n, size) in SIZES.into_iter().enumerate() {
            let name = format!("index/{n:016x}");
            let d = data(size);
            b.write_atomic(&name, &d).unwrap();
            assert_eq!(b.read(&name).unwrap(), d, "{size}");
            assert_eq!(b.size(&name).unwrap(), size as u64);
            let blocks = size.div_ceil(BLOCK).max(1);
            assert_eq!(raw.size(&name).unwrap(), (size + blocks * OVERHEAD) as u64);
            for (off, len) in [
                (0, size),
                (0, 1),
                (size / 2, size / 3),
                (size.saturating_sub(7), 7),
            ] {
                if off + len <= size {
                    assert_eq!(
                        b.read_at(&name, off as u64, len).unwrap(),
                        d[off..off + len]
                    );
                }
            }
            let (total, tail) = b.read_tail(&name, 100).unwrap();
            assert_eq!(
                (total, tail.as_slice()),
                (size as u64, &d[size.saturating_sub(100)..])
            );
            assert!(b.read_at(&name, size as u64, 1).is_err());
        }
    }
}

#[test]
fn config_and_key_files_are_stored_as_they_are() {
    let (raw, b) = backends(Algorithm::Aes256Gcm);
    b.write_atomic("config", b"clear").unwrap();
    b.create_new("keys/0011223344556677", b"key").unwrap();
    assert_eq!(raw.read("config").unwrap(), b"clear");
    assert_eq!(raw.read("keys/0011223344556677").unwrap(), b"key");
}

#[test]
fn stored_bytes_hide_the_plaintext() {
    let (raw, b) = backends(Algorithm::ChaCha20Poly1305);
    let text = b"a recognisable sentence about a secret file name.txt ".repeat(1000);
    b.create_new("snapshots/ab", &text).unwrap();
    let stored = raw.read("snapshots/ab").unwrap();
    assert!(!stored.windows(16).any(|w| w == &text[..16]));
}

#[test]
fn every_changed_byte_is_caught_and_untouched_blocks_still_read() {
    let (raw, b) = backends(Algorithm::Aes256Gcm);
    let d = data(2 * BLOCK + 100);
    b.write_atomic("containers/00/0000000000000001", &d)
        .unwrap();
    let name = "containers/00/0000000000000001";
    let good = raw.read(name).unwrap();
    let sb = BLOCK + OVERHEAD;
    for pos in [0, 23, 24, sb - 1, sb, sb + 500, good.len() - 1] {
        let mut bad = good.clone();
        bad[pos] ^= 0x40;
        raw.write_atomic(name, &bad).unwrap();
        let fresh = SealedBackend::new(raw.clone(), b.keys.clone());
        let e = fresh.read(name).unwrap_err();
        assert!(e.is_authentication() && e.is_corruption(), "{pos}: {e}");
        // The block after the damaged one (if any) still opens on its own.
        let damaged = (pos / sb) as u64;
        let other = if damaged == 0 { BLOCK as u64 } else { 0 };
        assert_eq!(
            fresh.read_at(name, other, 10).unwrap(),
            d[other as usize..other as usize + 10]
        );
    }
}

/// `read_salvaging` zero-fills exactly the blocks that fail, names them,
/// and returns every other byte authentic; an object with no block left
/// that opens is an error, not a buffer of zeros.
#[test]
fn salvaging_keeps_the_blocks_that_open() {
    let (raw, b) = backends(Algorithm::Aes256Gcm);
    let name = "containers/00/0000000000000002";
    let d = data(3 * BLOCK + 100);
    b.write_atomic(name, &d).unwrap();
    let whole = b.read_salvaging(name).unwrap();
    assert_eq!((whole.bytes.as_slice(), whole.damaged.len()), (&d[..], 0));
    let good = raw.read(name).unwrap();
    let sb = BLOCK + OVERHEAD;
    for damaged in [vec![0], vec![1], vec![3], vec![0, 2]] {
        let mut bad = good.clone();
        for &k in &damaged {
            bad[k * sb + 30] ^= 1;
        }
        raw.write_atomic(name, &bad).unwrap();
        let got = b.read_salvaging(name).unwrap();
        assert_eq!(got.bytes.len(), d.len());
        let ranges: Vec<_> = got.damaged.iter().map(|(r, _)| r.clone()).collect();
        let want: Vec<_> = damaged
            .iter()
            .map(|&k| (k * BLOCK) as u64..(((k + 1) * BLOCK).min(d.len())) as u64)
            .collect();
        assert_eq!(ranges, want);
        assert!(got.damaged[0].1.contains(&format!("block {}", damaged[0])));
        for (i, (&g, &w)) in got.bytes.iter().zip(&d).enumerate() {
            let hit = want.iter().any(|r| r.contains(&(i as u64)));
            assert_eq!(g, if hit { 0 } else { w }, "byte {i} of {damaged:?}");
        }
    }
    let mut all_bad = good.clone();
    for k in 0..4 {
        all_bad[k * sb + 30] ^= 1;
    }
    raw.write_atomic(name, &all_bad).unwrap();
    assert!(b.read_salvaging(name).unwrap_err().is_authentication());
    // Another repository's key opens nothing: an error, not zeros.
    raw.write_atomic(name, &good).unwrap();
    let other = RepoKeys::new(&MasterKey::from_bytes([8; 32]), Algorithm::Aes256Gcm);
    let stranger = SealedBackend::new(raw.clone(), Arc::new(other));
    assert!(stranger
        .read_salvaging(name)
        .unwrap_err()
        .is_authentication());
}

#[test]
fn moved_reordered_or_cut_objects_fail() {
    let (raw, b) = backends(Algorithm::Aes256Gcm);
    let d = data(2 * BLOCK + 100);
    b.write_atomic("index/0000000000000001", &d).unwrap();
    let good = raw.read("index/0000000000000001").unwrap();
    let sb = BLOCK + OVERHEAD;
    // Another name.
    raw.write_atomic("index/0000000000000002", &good).unwrap();
    assert!(b
        .read("index/0000000000000002")
        .unwrap_err()
        .is_authentication());
    // Blocks swapped.
    let mut swapped = good[sb..2 * sb].to_vec();
    swapped.extend_from_slice(&good[..sb]);
    swapped.extend_from_slice(&good[2 * sb..]);
    raw.write_atomic("index/0000000000000001", &swapped)
        .unwrap();
    assert!(b
        .read("index/0000000000000001")
        .unwrap_err()
        .is_authentication());
    // Cut at a block boundary: the new last block was not sealed as last.
    raw.write_atomic("index/0000000000000001", &good[..2 * sb])
        .unwrap();
    assert!(b
        .read("index/0000000000000001")
        .unwrap_err()
        .is_authentication());
    assert!(b
        .read_tail("index/0000000000000001", 10)
        .unwrap_err()
        .is_authentication());
    // Cut inside the overhead of a block: not a sealed size at all.
    raw.write_atomic("index/0000000000000001", &good[..sb + 20])
        .unwrap();
    assert!(b
        .read("index/0000000000000001")
        .unwrap_err()
        .is_corruption());
}

#[test]
fn a_container_size_is_remembered_until_it_is_rewritten() {
    let (_, b) = backends(Algorithm::Aes256Gcm);
    let name = "containers/01/0000000000000001";
    b.create_new(name, &data(100)).unwrap();
    assert_eq!(b.read_at(name, 90, 10).unwrap(), data(100)[90..]);
    b.delete(name).unwrap();
    b.write_atomic(name, &data(BLOCK + 3)).unwrap();
    assert_eq!(b.size(name).unwrap(), BLOCK as u64 + 3);
    assert_eq!(
        b.read_at(name, BLOCK as u64, 3).unwrap(),
        data(BLOCK + 3)[BLOCK..]
    );
}

/// FORMAT.md "Encrypted repositories": an object sealed by hand, block by
/// block, from the documented layout (fixed nonces, a fixed master key)
/// opens through the backend, and its bytes are pinned, so neither the
/// layout nor the associated data can change without this test noticing.
#[test]
fn golden_blocks() {
    let master = MasterKey::from_bytes([7; 32]);
    let name = "snapshots/golden";
    let plain = data(BLOCK + 10);
    let mut pins = Vec::new();
    for algorithm in Algorithm::ALL {
        let cipher = cairn_crypto::ObjectCipher::new(&master, algorithm);
        let mut stored = Vec::new();
        for (i, piece) in [&plain[..BLOCK], &plain[BLOCK..]].into_iter().enumerate() {
            let mut ad = b"cairn block\0".to_vec();
            ad.extend_from_slice(name.as_bytes());
            ad.push(0);
            ad.extend_from_slice(&(i as u64).to_le_bytes());
            ad.push((i == 1) as u8);
            cipher
                .seal_with_fixed_nonce_for_tests(&[i as u8 + 1; 24], &ad, piece, &mut stored)
                .unwrap();
        }
        let (raw, sealed) = backends(algorithm);
        raw.write_atomic(name, &stored).unwrap();
        assert_eq!(sealed.read(name).unwrap(), plain);
        assert_eq!(
            sealed.read_at(name, BLOCK as u64 - 2, 4).unwrap(),
            plain[BLOCK - 2..BLOCK + 2]
        );
        pins.push(blake3::hash(&stored).to_hex().to_string());
    }
    assert_eq!(
        pins,
        [
            "d21864c7f86d052241e6be0d170da40d48540a77e47aa22097c04f4e0f7a9f76",
            "956220d96332d47c687653a44e61c42d072d7bee319494311af8565eda50c1ab"
        ]
    );
}

/// A tail read of an object whose size is not known yet is one read of
/// the store (the size comes with the bytes), and gives the plaintext's
/// last bytes for every size and length.
#[test]
fn a_tail_read_is_one_read_of_the_store() {
    use crate::counts_calls::CountsCalls;
    let keys = Arc::new(RepoKeys::new(
        &MasterKey::from_bytes([7; 32]),
        Algorithm::Aes256Gcm,
    ));
    for name in ["containers/01/0000000000000001", "index/0000000000000001"] {
        for size in SIZES.into_iter().chain([5 * BLOCK + 17, 9 * BLOCK]) {
            let d = data(size);
            for len in [
                0,
                1,
                10,
                BLOCK - 1,
                BLOCK,
                BLOCK + 1,
                3 * BLOCK + 2,
                20 * BLOCK,
            ] {
                let raw = Arc::new(CountsCalls::new(Arc::new(MemBackend::new())));
                let b = SealedBackend::new(raw.clone(), keys.clone());
                b.write_atomic(name, &d).unwrap();
                let (total, tail) = b.read_tail(name, len).unwrap();
                assert_eq!(total, size as u64);
                assert_eq!(tail, d[size - len.min(size)..], "{name} {size} {len}");
                assert_eq!(raw.sizes(), 0, "{name} {size} {len}");
                assert_eq!(raw.reads(), 1, "{name} {size} {len}");
            }
        }
    }
}

/// A store that counts the writes handed to it with their bytes given
/// away.
struct CountsOwnedWrites {
    inner: MemBackend,
    owned: std::sync::atomic::AtomicUsize,
}

impl Backend for CountsOwnedWrites {
    cairn_core::delegate_backend!(
        inner: read, read_at, size, write_atomic, create_new, delete, exists, list, lock, describe
    );

    fn write_atomic_owned(&self, key: &str, data: Vec<u8>) -> cairn_core::Result<()> {
        self.owned
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.write_atomic_owned(key, data)
    }
}

/// A write that finds the scratch buffer taken (parallel uploads) seals
/// into a buffer of its own and gives it to the store below; either way
/// the object reads back as written.
#[test]
fn a_write_beside_another_gives_its_sealed_bytes_away() {
    let store = Arc::new(CountsOwnedWrites {
        inner: MemBackend::new(),
        owned: Default::default(),
    });
    let keys = Arc::new(RepoKeys::new(
        &MasterKey::from_bytes([7; 32]),
        Algorithm::ALL[0],
    ));
    let b = SealedBackend::new(store.clone(), keys);
    let owned = || store.owned.load(std::sync::atomic::Ordering::Relaxed);
    let d = data(3 * BLOCK + 5);
    b.write_atomic("containers/00/0000000000000001", &d)
        .unwrap();
    assert_eq!(owned(), 0, "the scratch buffer was free");
    {
        let _other_write = b.scratch.lock();
        b.write_atomic("containers/00/0000000000000002", &d)
            .unwrap();
    }
    assert_eq!(owned(), 1);
    for key in [
        "containers/00/0000000000000001",
        "containers/00/0000000000000002",
    ] {
        assert_eq!(b.read(key).unwrap(), d);
    }
}

/// A local note is sealed like an object under a name of its own: the
/// store below holds ciphertext, and a note changed there reads as none.
#[test]
fn local_notes_are_sealed_and_authenticated() {
    for algorithm in Algorithm::ALL {
        let (raw, b) = backends(algorithm);
        let note = data(3 * BLOCK + 5);
        b.write_local_note("n", &note);
        assert_eq!(b.read_local_note("n"), Some(note.clone()));
        let sealed = raw.read_local_note("n").unwrap();
        assert_eq!(sealed.len(), note.len() + 4 * OVERHEAD);
        assert!(!sealed
            .windows(64)
            .any(|w| note.windows(64).next() == Some(w)));
        // Not readable as another note, nor once changed.
        raw.write_local_note("m", &sealed);
        assert_eq!(b.read_local_note("m"), None);
        let mut changed = sealed;
        changed[9] ^= 1;
        raw.write_local_note("n", &changed);
        assert_eq!(b.read_local_note("n"), None);
        assert_eq!(b.read_local_note("absent"), None);
    }
}
