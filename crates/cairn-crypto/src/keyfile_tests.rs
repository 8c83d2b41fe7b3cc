//! Tests of key files: round trips, wrong passwords, edited fields, malformed
//! files, rewrapping and parameter tuning.

use super::*;

fn pw(s: &str) -> Password {
    Password::new(Zeroizing::new(s.to_string()), "test").unwrap()
}

fn label() -> KeyLabel {
    KeyLabel {
        host: "host-a".into(),
        user: "alice".into(),
    }
}

fn make(master: &MasterKey) -> KeyFile {
    KeyFile::create(
        master,
        &pw("correct horse"),
        KdfParams::for_tests(),
        label(),
        "repo-1",
    )
    .unwrap()
}

#[test]
fn create_serialise_parse_open() {
    let master = MasterKey::generate().unwrap();
    let kf = make(&master);
    assert_eq!(kf.id().len(), 16);
    assert_eq!(kf.repository(), "repo-1");
    assert_eq!(kf.label(), &label());
    assert!(kf.created() > 1_700_000_000);
    let bytes = kf.to_bytes();
    assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1);
    assert!(bytes.starts_with(b"{\"version\":1,\"id\":\""));
    let parsed = KeyFile::from_bytes(&bytes).unwrap();
    assert_eq!(parsed, kf);
    assert_eq!(parsed.open(&pw("correct horse")).unwrap(), master);
    // Two key files of one master key share nothing but the key.
    let other = make(&master);
    assert_ne!(other.id(), kf.id());
    assert_ne!(other.salt, kf.salt);
    assert_eq!(other.open(&pw("correct horse")).unwrap(), master);
}

#[test]
fn wrong_password_fails_with_authentication() {
    let kf = make(&MasterKey::generate().unwrap());
    let e = kf.open(&pw("correct hors")).unwrap_err();
    assert!(e.is_authentication(), "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "authentication failed for key file {}: wrong key or tampered data",
            kf.id()
        )
    );
}

/// Replaces `from` with `to` in the file's JSON and parses it again.
fn edited(kf: &KeyFile, from: &str, to: &str) -> Result<KeyFile> {
    let text = String::from_utf8(kf.to_bytes()).unwrap();
    assert!(text.contains(from), "{from} not in {text}");
    KeyFile::from_bytes(text.replacen(from, to, 1).as_bytes())
}

#[test]
fn editing_any_header_field_makes_it_fail_to_open() {
    let master = MasterKey::generate().unwrap();
    let kf = make(&master);
    let id = kf.id().to_string();
    let other_id = format!("{}{}", &id[..15], if id.ends_with('0') { '1' } else { '0' });
    let created = kf.created().to_string();
    let salt = hex::encode(kf.salt);
    let other_salt = format!(
        "{}{}",
        &salt[..31],
        if salt.ends_with('0') { '1' } else { '0' }
    );
    let edits = [
        (format!("\"id\":\"{id}\""), format!("\"id\":\"{other_id}\"")),
        (
            format!("\"created\":{created}"),
            "\"created\":1".to_string(),
        ),
        ("\"host\":\"host-a\"".into(), "\"host\":\"host-b\"".into()),
        ("\"user\":\"alice\"".into(), "\"user\":\"mallory\"".into()),
        (
            "\"repository\":\"repo-1\"".into(),
            "\"repository\":\"repo-2\"".into(),
        ),
        ("\"m_cost_kib\":8".into(), "\"m_cost_kib\":16".into()),
        ("\"t_cost\":1".into(), "\"t_cost\":2".into()),
        (
            format!("\"salt\":\"{salt}\""),
            format!("\"salt\":\"{other_salt}\""),
        ),
    ];
    for (from, to) in edits {
        let changed = edited(&kf, &from, &to).unwrap();
        let e = changed.open(&pw("correct horse")).unwrap_err();
        assert!(e.is_authentication(), "{from} -> {to}: {e}");
    }
    // Every byte of the wrapped key is authenticated too.
    for i in 0..WRAPPED_LEN {
        let mut changed = kf.clone();
        changed.wrapped[i] ^= 0x80;
        assert!(changed
            .open(&pw("correct horse"))
            .unwrap_err()
            .is_authentication());
    }
}

#[test]
fn malformed_files_are_one_corrupt_error() {
    let kf = make(&MasterKey::generate().unwrap());
    let good = String::from_utf8(kf.to_bytes()).unwrap();
    let wrapped = hex::encode(kf.wrapped);
    let cases = [
        String::new(),
        "not json".to_string(),
        "{\"version\":1}".to_string(),
        good[..good.len() / 2].to_string(),
        good.replace("\"argon2id\"", "\"scrypt\""),
        good.replace("\"xchacha20poly1305\"", "\"aes\""),
        good.replace(&wrapped, &wrapped[2..]),
        good.replace(&wrapped, &format!("zz{}", &wrapped[2..])),
        good.replace(&format!("\"id\":\"{}\"", kf.id()), "\"id\":\"short\""),
        good.replace("\"m_cost_kib\":8", "\"m_cost_kib\":4"),
        good.replace("\"t_cost\":1", "\"t_cost\":0"),
        good.replace("\"p_cost\":1", "\"p_cost\":-1"),
        good.replace("\"version\":1,", "\"version\":1,\"extra\":true,"),
    ];
    for case in cases {
        let e = KeyFile::from_bytes(case.as_bytes()).unwrap_err();
        assert!(e.is_corruption(), "{case:?}: {e}");
        let msg = e.to_string();
        assert!(msg.starts_with("corrupt key file: "), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }
    let newer = good.replace("\"version\":1,", "\"version\":2,\"extra\":true,");
    let e = KeyFile::from_bytes(newer.as_bytes()).unwrap_err();
    assert!(
        matches!(e, Error::UnsupportedVersion { found: 2, .. }),
        "{e}"
    );
}

#[test]
fn rewrap_changes_the_password_and_keeps_the_identity() {
    let master = MasterKey::generate().unwrap();
    let kf = make(&master);
    let params = KdfParams {
        m_cost_kib: 16,
        ..KdfParams::for_tests()
    };
    let new = kf.rewrap(&master, &pw("battery staple"), params).unwrap();
    assert_eq!(new.id(), kf.id());
    assert_eq!(new.created(), kf.created());
    assert_eq!(new.label(), kf.label());
    assert_eq!(new.repository(), kf.repository());
    assert_eq!(new.params(), params);
    assert_ne!(new.salt, kf.salt);
    assert_eq!(new.open(&pw("battery staple")).unwrap(), master);
    assert!(new
        .open(&pw("correct horse"))
        .unwrap_err()
        .is_authentication());
}

#[test]
fn params_out_of_range_are_refused() {
    let master = MasterKey::generate().unwrap();
    for bad in [
        KdfParams {
            m_cost_kib: 7,
            ..KdfParams::for_tests()
        },
        KdfParams {
            t_cost: 0,
            ..KdfParams::for_tests()
        },
        KdfParams {
            p_cost: 0,
            ..KdfParams::for_tests()
        },
        KdfParams {
            m_cost_kib: 8,
            t_cost: 1,
            p_cost: 2,
        },
        KdfParams {
            m_cost_kib: KdfParams::MAX_M_COST_KIB + 1,
            ..KdfParams::for_tests()
        },
    ] {
        let e = KeyFile::create(&master, &pw("x"), bad, label(), "r").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("Argon2id parameters out of range"),
            "{e}"
        );
    }
}

/// Tunes against a model machine whose derivation takes `setup` plus
/// `per_pass` per pass, and returns the parameters with the pass counts it
/// measured at, in order. No real time is measured.
fn tune_on_model(target: Duration, setup: Duration, per_pass: Duration) -> (KdfParams, Vec<u32>) {
    let mut measured = Vec::new();
    let params = KdfParams::tune_measuring(64, target, |p| {
        assert_eq!((p.m_cost_kib, p.p_cost), (64, 1));
        measured.push(p.t_cost);
        Ok(setup + per_pass * p.t_cost)
    })
    .unwrap();
    (params, measured)
}

#[test]
fn tuning_raises_passes_with_the_target() {
    let ms = Duration::from_millis;
    let passes = |t_cost| KdfParams {
        m_cost_kib: 64,
        t_cost,
        p_cost: 1,
    };
    // A target below one pass: one pass, measured once.
    assert_eq!(
        tune_on_model(Duration::from_nanos(1), ms(5), ms(10)),
        (passes(1), vec![1])
    );
    // 200 ms at 5 ms + 10 ms per pass: one pass takes 15 ms, so the first
    // estimate is 13 passes; 13 take 135 ms, so the corrected estimate is
    // 13 * 200 / 135 = 19.3 passes, and two measurements are all it takes.
    assert_eq!(
        tune_on_model(ms(200), ms(5), ms(10)),
        (passes(19), vec![1, 13])
    );
    // Linear time without setup: the first estimate is exact and confirmed.
    assert_eq!(
        tune_on_model(ms(200), ms(0), ms(10)),
        (passes(20), vec![1, 20])
    );
    // A target far above what the passes may reach: clamped.
    let (huge, _) = tune_on_model(Duration::from_secs(1 << 20), ms(0), ms(1));
    assert_eq!(huge, passes(KdfParams::MAX_T_COST));
    // A failed measurement is the tuning's error.
    let failed = KdfParams::tune_measuring(64, ms(1), |_| Err(cairn_core::Error::invalid("no")));
    assert!(failed.is_err());
    // Memory below Argon2id's minimum is refused before anything is measured.
    let refused = KdfParams::tune_measuring(4, ms(1), |_| panic!("measured invalid parameters"));
    assert!(refused.is_err());
    assert!(KdfParams::tune_with_memory(4, ms(1)).is_err());
}

/// The real measurement runs and tunes to at least one pass (no timing is
/// asserted: a loaded machine may take any time).
#[test]
fn tuning_measures_real_derivations() {
    let p = KdfParams::tune_with_memory(64, Duration::from_millis(1)).unwrap();
    assert_eq!((p.m_cost_kib, p.p_cost), (64, 1));
    assert!((1..=KdfParams::MAX_T_COST).contains(&p.t_cost));
}

/// Mutated valid key files never panic the parser; what parses round-trips
/// through its own bytes (JSON: not byte for byte), and opening it with the right password either fails
/// or gives the very master key that was wrapped: no edit of a key file
/// yields another key. (Opened only while the cost parameters are the
/// tests' tiny ones: an edited memory cost may ask for gigabytes.)
#[test]
fn mutated_key_files_parse_canonically_and_never_open_to_another_key() {
    use cairn_format::testutil::{check_mutations, MutationRun};
    use proptest::prelude::*;

    let master = MasterKey::from_bytes([0x42; KEY_LEN]);
    let password = pw("correct horse");
    let valid = (any::<[u8; 8]>(), any::<u64>(), "[a-z-]{0,12}", "[a-z]{0,8}").prop_map(
        |(id, created, host, user)| {
            let fixed = FixedForTests {
                id,
                created,
                salt: [7; SALT_LEN],
                nonce: [9; NONCE_LEN],
            };
            let label = KeyLabel { host, user };
            let kf = KeyFile::create_fixed_for_tests(
                &MasterKey::from_bytes([0x42; KEY_LEN]),
                &pw("correct horse"),
                KdfParams::for_tests(),
                label,
                "repo-1",
                fixed,
            )
            .unwrap();
            ((), kf.to_bytes())
        },
    );
    let run = MutationRun {
        name: "key file",
        cases: 256,
        min_decoded_pct: 15,
    };
    check_mutations(
        run,
        valid,
        |_| {},
        |(), bytes| {
            let Ok(kf) = KeyFile::from_bytes(bytes) else {
                return Ok(false);
            };
            prop_assert_eq!(KeyFile::from_bytes(&kf.to_bytes()).unwrap(), kf.clone());
            if kf.params() == KdfParams::for_tests() {
                if let Ok(opened) = kf.open(&password) {
                    prop_assert!(opened == master, "an edited key file opened to another key");
                }
            }
            Ok(true)
        },
    );
}
