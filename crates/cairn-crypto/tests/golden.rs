//! Golden bytes of the encrypted formats. With fixed keys, nonces and salts
//! the sealed objects, the subkeys and a key file are pinned byte for byte:
//! if one of these tests fails, existing repositories would no longer open.
//! The construction is also recomputed here from its specification
//! (docs/security.md) with the primitives alone.

use aes_gcm::Aes256Gcm;
use cairn_crypto::keyfile::FixedForTests;
use cairn_crypto::{Algorithm, KdfParams, KeyFile, KeyLabel, MasterKey, ObjectCipher, Password};
use chacha20poly1305::aead::{AeadInOut, KeyInit};
use chacha20poly1305::XChaCha20Poly1305;
use zeroize::Zeroizing;

fn master() -> MasterKey {
    MasterKey::from_bytes(std::array::from_fn(|i| i as u8))
}

fn nonce() -> [u8; 24] {
    std::array::from_fn(|i| 0xa0 + i as u8)
}

const AD: &[u8] = b"chunk 0f1e2d3c";
const PLAINTEXT: &[u8] = b"cairn golden plaintext";

const SEALED_AES: &str = "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7\
    efa475d1853ea13afd06f09300551010d9be9453ba73\
    ba2427b3ad40c4169420da7bec390e49";
const SEALED_CHACHA: &str = "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7\
    9a2bc439551ffd2c60c85f7b3e7887bbc469ccbbea9c\
    30d93eaaf15e84da5af937e92a62328b";

fn sealed_hex(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::Aes256Gcm => SEALED_AES,
        Algorithm::ChaCha20Poly1305 => SEALED_CHACHA,
    }
}

#[test]
fn sealed_objects_are_pinned() {
    for alg in Algorithm::ALL {
        let cipher = ObjectCipher::new(&master(), alg);
        let mut out = Vec::new();
        cipher
            .seal_with_fixed_nonce_for_tests(&nonce(), AD, PLAINTEXT, &mut out)
            .unwrap();
        assert_eq!(hex::encode(&out), sealed_hex(alg), "{alg}");
        let mut opened = Vec::new();
        cipher
            .open(AD, &hex::decode(sealed_hex(alg)).unwrap(), &mut opened)
            .unwrap();
        assert_eq!(opened, PLAINTEXT);
    }
}

/// The sealed format recomputed from its definition: object key =
/// `derive_key("cairn 2026-11 object encryption key <alg>", master)`;
/// XChaCha20-Poly1305 uses the 24-byte nonce directly; AES-256-GCM uses the
/// key `BLAKE3-keyed(object key, "aes-256-gcm" || nonce[..12])` and the GCM
/// nonce `nonce[12..]`. Output: nonce | ciphertext | tag.
#[test]
fn sealed_objects_follow_the_specification() {
    let master_bytes: [u8; 32] = std::array::from_fn(|i| i as u8);
    let n = nonce();
    let mut body = PLAINTEXT.to_vec();

    let key = blake3::derive_key(
        "cairn 2026-11 object encryption key xchacha20poly1305",
        &master_bytes,
    );
    let tag = XChaCha20Poly1305::new((&key).into())
        .encrypt_inout_detached((&n).into(), AD, body.as_mut_slice().into())
        .unwrap();
    let expected = [&n[..], &body, &tag[..]].concat();
    assert_eq!(hex::encode(expected), SEALED_CHACHA);

    let mut body = PLAINTEXT.to_vec();
    let key = blake3::derive_key(
        "cairn 2026-11 object encryption key aes-256-gcm",
        &master_bytes,
    );
    let mut input = b"aes-256-gcm".to_vec();
    input.extend_from_slice(&n[..12]);
    let message_key: [u8; 32] = blake3::keyed_hash(&key, &input).into();
    let gcm_nonce: &[u8; 12] = n[12..].try_into().unwrap();
    let tag = Aes256Gcm::new((&message_key).into())
        .encrypt_inout_detached(gcm_nonce.into(), AD, body.as_mut_slice().into())
        .unwrap();
    let expected = [&n[..], &body, &tag[..]].concat();
    assert_eq!(hex::encode(expected), SEALED_AES);
}

#[test]
fn subkeys_are_pinned() {
    let m = master();
    assert_eq!(
        hex::encode(*m.fingerprint_key()),
        "8ef4389c14a381cf20f07f970d78a71ab7e4f0f9477977a7f2df5cf60ca9f66f"
    );
    assert_eq!(
        hex::encode(*m.chunker_seed()),
        "73cdbbff5fbf8c0bfc075848f71d6ebb8b0da638611e553d27fb74734adc1408"
    );
}

const KEY_FILE: &str = concat!(
    r#"{"version":1,"id":"1122334455667788","created":1795000000,"#,
    r#""host":"golden-host","user":"golden-user","repository":"9f86d081884c7d65","#,
    r#""kdf":{"name":"argon2id","m_cost_kib":8,"t_cost":1,"p_cost":1,"#,
    r#""salt":"303132333435363738393a3b3c3d3e3f"},"cipher":"xchacha20poly1305","#,
    r#""wrapped_key":"a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7"#,
    r#"ae57ba66b9a822ceeea6529342462e57ed42f02c8499c6d4f1425959e4d9c291"#,
    r#"4ed95e1e703e30bc51771901323b8531"}"#,
    "\n"
);

fn password(s: &str) -> Password {
    Password::new(Zeroizing::new(s.to_string()), "test").unwrap()
}

#[test]
fn pinned_key_file_keeps_opening() {
    let kf = KeyFile::from_bytes(KEY_FILE.as_bytes()).unwrap();
    assert_eq!(kf.open(&password("golden password")).unwrap(), master());
    assert!(kf
        .open(&password("golden passwore"))
        .unwrap_err()
        .is_authentication());
    assert_eq!(kf.to_bytes(), KEY_FILE.as_bytes());
}

#[test]
fn key_file_bytes_are_pinned() {
    let kf = KeyFile::create_fixed_for_tests(
        &master(),
        &password("golden password"),
        KdfParams::for_tests(),
        KeyLabel {
            host: "golden-host".into(),
            user: "golden-user".into(),
        },
        "9f86d081884c7d65",
        FixedForTests {
            id: [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88],
            created: 1_795_000_000,
            salt: std::array::from_fn(|i| 0x30 + i as u8),
            nonce: nonce(),
        },
    )
    .unwrap();
    assert_eq!(String::from_utf8(kf.to_bytes()).unwrap(), KEY_FILE);
}
