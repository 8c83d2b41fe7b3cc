use std::sync::Arc;

use cairn_backend::MemBackend;
use cairn_core::Backend;
use cairn_crypto::{Algorithm, KdfParams, KeyLabel, Password};
use zeroize::Zeroizing;

use super::*;
use crate::key_admin::*;
use crate::repo::Repository;

fn password(s: &str) -> Password {
    Password::new(Zeroizing::new(s.to_string()), "test").unwrap()
}

/// The error of an open or init that must fail.
fn err<T>(r: cairn_core::Result<T>) -> cairn_core::Error {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

fn label() -> KeyLabel {
    KeyLabel {
        host: "h".into(),
        user: "u".into(),
    }
}

fn encrypted(algorithm: Algorithm) -> (Arc<dyn Backend>, Repository) {
    let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    let repo = Repository::init_encrypted(
        backend.clone(),
        Repository::default_config(),
        algorithm,
        &password("secret"),
        KdfParams::for_tests(),
        label(),
    )
    .unwrap();
    (backend, repo)
}

#[test]
fn an_encrypted_repository_opens_with_its_password_only() {
    for algorithm in Algorithm::ALL {
        let (backend, repo) = encrypted(algorithm);
        assert_eq!(repo.keys().unwrap().algorithm(), algorithm);
        let again = Repository::open_with_password(backend.clone(), &mut || Ok(password("secret")))
            .unwrap();
        assert_eq!(again.config, repo.config);
        assert_eq!(
            again.config.encryption.as_ref().unwrap().algorithm,
            algorithm.name()
        );

        let e = err(Repository::open_with_password(backend.clone(), &mut || {
            Ok(password("wrong"))
        }));
        assert!(e.to_string().contains("wrong password"), "{e}");
        let e = err(Repository::open(backend.clone()));
        assert!(e.to_string().contains("encrypted"), "{e}");
        // The writer lock re-reads the sealed config.
        again.lock_writer(false).unwrap();
    }
}

#[test]
fn a_clear_repository_never_asks_for_a_password() {
    let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    Repository::init(backend.clone(), Repository::default_config()).unwrap();
    let repo =
        Repository::open_with_password(backend.clone(), &mut || panic!("no password is needed"))
            .unwrap();
    assert!(repo.keys().is_none());
    let (version, _) = cairn_format::envelope::open(
        crate::config::CONFIG_MAGIC,
        SEALED_CONFIG_VERSION,
        "config",
        &backend.read(crate::object_names::CONFIG).unwrap(),
    )
    .unwrap();
    assert_eq!(version, crate::config::CONFIG_VERSION);
}

#[test]
fn the_sealed_config_shows_only_the_id_and_algorithm() {
    let (backend, repo) = encrypted(Algorithm::Aes256Gcm);
    let bytes = backend.read(crate::object_names::CONFIG).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains(&repo.config.id));
    for hidden in ["fastcdc", "chunker", "zstd", "page_size", "container_size"] {
        assert!(!text.contains(hidden), "{hidden} is visible in {text}");
    }
    assert!(StoredConfig::decode(&bytes).unwrap().is_encrypted());
}

#[test]
fn a_tampered_config_or_key_file_is_refused() {
    let (backend, _) = encrypted(Algorithm::ChaCha20Poly1305);
    let config = backend.read(crate::object_names::CONFIG).unwrap();
    // Flip one hex digit of the sealed part, under a valid envelope (whose
    // checksum would otherwise catch it first): authentication fails.
    let (_, payload) = cairn_format::envelope::open(
        crate::config::CONFIG_MAGIC,
        SEALED_CONFIG_VERSION,
        "config",
        &config,
    )
    .unwrap();
    let mut payload = payload.to_vec();
    let pos = String::from_utf8_lossy(&payload)
        .find("\"sealed\":\"")
        .unwrap()
        + 20;
    payload[pos] = if payload[pos] == b'0' { b'1' } else { b'0' };
    let resealed =
        cairn_format::envelope::seal(crate::config::CONFIG_MAGIC, SEALED_CONFIG_VERSION, &payload);
    backend
        .write_atomic(crate::object_names::CONFIG, &resealed)
        .unwrap();
    let e = err(Repository::open_with_password(backend.clone(), &mut || {
        Ok(password("secret"))
    }));
    assert!(e.is_authentication(), "{e}");

    // A key file of another repository is never used and never blocks the
    // others: the repository opens, and a failed open names it.
    backend
        .write_atomic(crate::object_names::CONFIG, &config)
        .unwrap();
    let master = cairn_crypto::MasterKey::generate().unwrap();
    add_key_file(
        &*backend,
        "another",
        &master,
        &password("x"),
        KdfParams::for_tests(),
        label(),
    )
    .unwrap();
    Repository::open_with_password(backend.clone(), &mut || Ok(password("secret"))).unwrap();
    let e = err(Repository::open_with_password(backend.clone(), &mut || {
        Ok(password("x"))
    }));
    assert!(
        e.to_string().contains("wrong password")
            && e.to_string().contains("key file of repository another"),
        "{e}"
    );
}

#[test]
fn every_key_file_opens_the_repository() {
    let (backend, repo) = encrypted(Algorithm::Aes256Gcm);
    let (_, first) = key_files(&*backend, &repo.config.id)
        .unwrap()
        .good
        .remove(0);
    let master = first.open(&password("secret")).unwrap();
    add_key_file(
        &*backend,
        &repo.config.id,
        &master,
        &password("second"),
        KdfParams::for_tests(),
        label(),
    )
    .unwrap();
    assert_eq!(key_files(&*backend, &repo.config.id).unwrap().good.len(), 2);
    for pw in ["secret", "second"] {
        Repository::open_with_password(backend.clone(), &mut || Ok(password(pw))).unwrap();
    }
}

#[test]
fn init_refuses_a_directory_that_is_not_empty() {
    let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    backend.write_atomic("stray", b"x").unwrap();
    let e = err(Repository::init_encrypted(
        backend,
        Repository::default_config(),
        Algorithm::Aes256Gcm,
        &password("secret"),
        KdfParams::for_tests(),
        label(),
    ));
    assert!(e.to_string().contains("not empty"), "{e}");
}

#[test]
fn opened_key_names_the_key_file_the_password_opens() {
    let (backend, repo) = encrypted(Algorithm::ChaCha20Poly1305);
    let first = opened_key(&repo, &password("secret")).unwrap();
    let master = first.master;
    let second = add_key_file(
        &*backend,
        &repo.config.id,
        &master,
        &password("second"),
        KdfParams::for_tests(),
        label(),
    )
    .unwrap();
    assert_eq!(
        opened_key(&repo, &password("secret")).unwrap().name,
        first.name
    );
    assert_eq!(opened_key(&repo, &password("second")).unwrap().name, second);
    let e = err(opened_key(&repo, &password("wrong")));
    assert!(e.to_string().contains("wrong password"), "{e}");

    // A key file of this repository wrapping some other master key opens
    // with its password but is not this repository's key.
    add_key_file(
        &*backend,
        &repo.config.id,
        &cairn_crypto::MasterKey::generate().unwrap(),
        &password("planted"),
        KdfParams::for_tests(),
        label(),
    )
    .unwrap();
    let e = err(opened_key(&repo, &password("planted")));
    assert!(e.to_string().contains("another master key"), "{e}");
}

#[test]
fn key_management_refuses_a_clear_repository() {
    let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    let repo = Repository::init(backend, Repository::default_config()).unwrap();
    let e = err(opened_key(&repo, &password("secret")));
    assert!(e.to_string().contains("not encrypted"), "{e}");
    let e = err(find_key_file(&repo, "00"));
    assert!(e.to_string().contains("not encrypted"), "{e}");
}

#[test]
fn the_last_key_file_is_never_removed() {
    let (backend, repo) = encrypted(Algorithm::Aes256Gcm);
    let lock = repo.lock_writer(false).unwrap();
    let first = opened_key(&repo, &password("secret")).unwrap();
    let id = first.key_file.id().to_string();
    let e = err(remove_key(&repo, &lock, &id, None));
    assert!(e.to_string().contains("last one"), "{e}");
    assert_eq!(key_files(&*backend, &repo.config.id).unwrap().good.len(), 1);

    add_key_file(
        &*backend,
        &repo.config.id,
        &first.master,
        &password("second"),
        KdfParams::for_tests(),
        label(),
    )
    .unwrap();
    let e = err(remove_key(&repo, &lock, "zz", None));
    assert!(e.to_string().contains("no key file zz"), "{e}");
    // The key file the caller's password opened stays unless forced.
    let e = err(remove_key(&repo, &lock, &id, Some(&id)));
    assert!(e.to_string().contains("the password in use opened"), "{e}");
    assert_eq!(key_files(&*backend, &repo.config.id).unwrap().good.len(), 2);
    // A unique prefix names the key.
    assert_eq!(remove_key(&repo, &lock, &id[..6], None).unwrap(), id);
    let left = key_files(&*backend, &repo.config.id).unwrap().good;
    assert_eq!(left.len(), 1);
    assert_ne!(left[0].1.id(), id);
    drop(lock);
    let e = err(Repository::open_with_password(backend.clone(), &mut || {
        Ok(password("secret"))
    }));
    assert!(e.to_string().contains("wrong password"), "{e}");
    Repository::open_with_password(backend, &mut || Ok(password("second"))).unwrap();
}

#[test]
fn change_password_rewraps_the_key_file_in_place() {
    let (backend, repo) = encrypted(Algorithm::Aes256Gcm);
    let lock = repo.lock_writer(false).unwrap();
    let opened = opened_key(&repo, &password("secret")).unwrap();
    let target = (opened.name.clone(), opened.key_file.clone());
    let params = KdfParams {
        m_cost_kib: 16,
        t_cost: 2,
        p_cost: 1,
    };
    let new = change_password(
        &repo,
        &lock,
        &opened.master,
        &target,
        &password("fresh"),
        params,
    )
    .unwrap();
    assert_eq!(new.id(), opened.key_file.id());
    assert_eq!(new.params(), params);
    let files = key_files(&*backend, &repo.config.id).unwrap().good;
    assert_eq!(files.len(), 1);
    assert_eq!(files[0], (opened.name.clone(), new));
    for (pw, opens) in [("secret", false), ("fresh", true)] {
        let r = Repository::open_with_password(backend.clone(), &mut || Ok(password(pw)));
        assert_eq!(r.is_ok(), opens, "{pw}");
    }
    // The stale copy (the file before the change) is refused.
    let e = err(change_password(
        &repo,
        &lock,
        &opened.master,
        &target,
        &password("again"),
        KdfParams::for_tests(),
    ));
    assert!(e.to_string().contains("changed since"), "{e}");
}

#[test]
fn the_local_label_names_host_and_user() {
    let label = local_key_label();
    assert!(!label.host.is_empty());
    assert!(!label.user.is_empty());
}
