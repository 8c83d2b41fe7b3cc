//! Unit and property tests of `ObjectCipher`: round trips, and every way a
//! sealed object can be wrong failing with the authentication error.

use super::*;
use proptest::prelude::*;

fn cipher(algorithm: Algorithm, key_byte: u8) -> ObjectCipher {
    ObjectCipher::new(&MasterKey::from_bytes([key_byte; KEY_LEN]), algorithm)
}

fn sealed(c: &ObjectCipher, ad: &[u8], plaintext: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    c.seal(ad, plaintext, &mut out).unwrap();
    out
}

/// Opens into a buffer with prior content and checks a failure leaves it as
/// it was.
fn open_fails(c: &ObjectCipher, ad: &[u8], sealed: &[u8]) -> bool {
    let mut out = b"prefix".to_vec();
    match c.open(ad, sealed, &mut out) {
        Ok(()) => false,
        Err(e) => {
            assert!(e.is_authentication(), "{e}");
            // Damage to every code path that handles damage.
            assert!(e.is_corruption());
            assert_eq!(out, b"prefix", "a failed open changed the output");
            true
        }
    }
}

#[test]
fn round_trip_appends_after_existing_output() {
    for alg in Algorithm::ALL {
        let c = cipher(alg, 1);
        assert_eq!(c.overhead(), 40);
        for len in [0usize, 1, 15, 16, 17, 64, 8192] {
            let plain: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let mut out = b"head".to_vec();
            c.seal(b"ad", &plain, &mut out).unwrap();
            assert_eq!(out.len(), 4 + len + OVERHEAD);
            assert_eq!(&out[..4], b"head");
            if len >= 16 {
                assert_ne!(&out[4 + NONCE_LEN..4 + NONCE_LEN + 16], &plain[..16]);
            }
            let mut opened = b"x".to_vec();
            c.open(b"ad", &out[4..], &mut opened).unwrap();
            assert_eq!(&opened[..1], b"x");
            assert_eq!(&opened[1..], &plain[..]);
        }
    }
}

#[test]
fn every_seal_draws_a_fresh_nonce() {
    for alg in Algorithm::ALL {
        let c = cipher(alg, 1);
        let a = sealed(&c, b"", b"same");
        let b = sealed(&c, b"", b"same");
        assert_ne!(a[..NONCE_LEN], b[..NONCE_LEN]);
        assert_ne!(a, b);
    }
}

#[test]
fn wrong_ad_fails() {
    for alg in Algorithm::ALL {
        let c = cipher(alg, 1);
        let s = sealed(&c, b"chunk 00aa", b"payload");
        assert!(open_fails(&c, b"chunk 00ab", &s));
        assert!(open_fails(&c, b"", &s));
        assert!(!open_fails(&c, b"chunk 00aa", &s));
    }
}

#[test]
fn flipping_any_bit_of_any_byte_fails() {
    for alg in Algorithm::ALL {
        let c = cipher(alg, 1);
        let s = sealed(&c, b"ad", b"a small object");
        for pos in 0..s.len() {
            for bit in 0..8 {
                let mut t = s.clone();
                t[pos] ^= 1 << bit;
                assert!(open_fails(&c, b"ad", &t), "{alg}: byte {pos} bit {bit}");
            }
        }
    }
}

#[test]
fn truncated_or_extended_objects_fail() {
    for alg in Algorithm::ALL {
        let c = cipher(alg, 1);
        let s = sealed(&c, b"ad", b"payload");
        for len in 0..s.len() {
            assert!(
                open_fails(&c, b"ad", &s[..len]),
                "{alg}: truncated to {len}"
            );
        }
        let mut longer = s.clone();
        longer.push(0);
        assert!(open_fails(&c, b"ad", &longer));
        // An empty plaintext seals to exactly the overhead and still opens.
        let empty = sealed(&c, b"ad", b"");
        assert_eq!(empty.len(), OVERHEAD);
        assert!(!open_fails(&c, b"ad", &empty));
    }
}

#[test]
fn wrong_key_or_algorithm_fails() {
    for alg in Algorithm::ALL {
        let s = sealed(&cipher(alg, 1), b"ad", b"payload");
        assert!(open_fails(&cipher(alg, 2), b"ad", &s));
        for other in Algorithm::ALL.into_iter().filter(|&o| o != alg) {
            assert!(
                open_fails(&cipher(other, 1), b"ad", &s),
                "{alg} opened as {other}"
            );
        }
    }
}

#[test]
fn error_message_is_one_clear_line() {
    let c = cipher(Algorithm::ChaCha20Poly1305, 1);
    let e = c.open(b"", &[0; 10], &mut Vec::new()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "authentication failed for encrypted object (10 bytes): wrong key or tampered data"
    );
    assert_eq!(
        format!("{c:?}"),
        "ObjectCipher { algorithm: ChaCha20Poly1305, .. }"
    );
}

#[test]
fn fixed_nonce_seal_is_deterministic_and_opens() {
    for alg in Algorithm::ALL {
        let c = cipher(alg, 3);
        let mut a = Vec::new();
        let mut b = Vec::new();
        c.seal_with_fixed_nonce_for_tests(&[9; NONCE_LEN], b"ad", b"text", &mut a)
            .unwrap();
        c.seal_with_fixed_nonce_for_tests(&[9; NONCE_LEN], b"ad", b"text", &mut b)
            .unwrap();
        assert_eq!(a, b);
        assert_eq!(a[..NONCE_LEN], [9; NONCE_LEN]);
        let mut out = Vec::new();
        c.open(b"ad", &a, &mut out).unwrap();
        assert_eq!(out, b"text");
    }
}

#[test]
fn aes_nonce_halves_both_matter() {
    // The first half picks the per-message key, the second is the GCM nonce:
    // changing either changes the ciphertext.
    let c = cipher(Algorithm::Aes256Gcm, 4);
    let seal = |nonce: [u8; NONCE_LEN]| {
        let mut out = Vec::new();
        c.seal_with_fixed_nonce_for_tests(&nonce, b"", &[0; 32], &mut out)
            .unwrap();
        out[NONCE_LEN..].to_vec()
    };
    let base = seal([0; NONCE_LEN]);
    let mut first = [0; NONCE_LEN];
    first[0] = 1;
    let mut second = [0; NONCE_LEN];
    second[23] = 1;
    assert_ne!(base, seal(first));
    assert_ne!(base, seal(second));
    assert_ne!(seal(first), seal(second));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn prop_round_trip(
        plain in proptest::collection::vec(any::<u8>(), 0..2048),
        ad in proptest::collection::vec(any::<u8>(), 0..64),
        chacha in any::<bool>(),
    ) {
        let alg = if chacha { Algorithm::ChaCha20Poly1305 } else { Algorithm::Aes256Gcm };
        let c = cipher(alg, 5);
        let s = sealed(&c, &ad, &plain);
        prop_assert_eq!(s.len(), plain.len() + OVERHEAD);
        let mut out = Vec::new();
        c.open(&ad, &s, &mut out).unwrap();
        prop_assert_eq!(out, plain);
    }

    #[test]
    fn prop_any_single_byte_change_fails(
        plain in proptest::collection::vec(any::<u8>(), 0..512),
        pos in any::<prop::sample::Index>(),
        delta in 1u8..=255,
        chacha in any::<bool>(),
    ) {
        let alg = if chacha { Algorithm::ChaCha20Poly1305 } else { Algorithm::Aes256Gcm };
        let c = cipher(alg, 6);
        let mut s = sealed(&c, b"ad", &plain);
        let i = pos.index(s.len());
        s[i] = s[i].wrapping_add(delta);
        prop_assert!(open_fails(&c, b"ad", &s));
    }
}
