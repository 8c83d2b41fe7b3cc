//! Tests of the password sources and their precedence, with a fake
//! environment (the process environment is never changed).

use super::*;
use std::collections::HashMap;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
    let map: HashMap<String, OsString> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), OsString::from(v)))
        .collect();
    move |k| map.get(k).cloned()
}

fn read(source: &PasswordSource, env: EnvLookup<'_>) -> Result<String> {
    source
        .read(env, PromptMode::Once)
        .map(|p| String::from_utf8(p.as_bytes().to_vec()).unwrap())
}

#[test]
fn precedence_file_then_env_then_command_then_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pw");
    let all = env_of(&[
        (PASSWORD_ENV, "from env"),
        (PASSWORD_COMMAND_ENV, "echo cmd"),
    ]);
    assert_eq!(
        PasswordSource::choose(Some(&file), &all, true).unwrap(),
        PasswordSource::File(file.clone())
    );
    assert_eq!(
        PasswordSource::choose(None, &all, true).unwrap(),
        PasswordSource::Env(PASSWORD_ENV.into())
    );
    let cmd = env_of(&[(PASSWORD_ENV, ""), (PASSWORD_COMMAND_ENV, "echo cmd")]);
    assert_eq!(
        PasswordSource::choose(None, &cmd, false).unwrap(),
        PasswordSource::Command("echo cmd".into())
    );
    let none = env_of(&[]);
    assert_eq!(
        PasswordSource::choose(None, &none, true).unwrap(),
        PasswordSource::Prompt
    );
}

#[test]
fn no_source_and_no_terminal_is_one_clear_error() {
    let e = PasswordSource::choose(None, &env_of(&[(PASSWORD_ENV, "")]), false).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no password given: use --password-file, CAIRN_PASSWORD or CAIRN_PASSWORD_COMMAND"
    );
}

#[test]
fn file_password_is_its_first_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Option<&str>); 6] = [
        ("secret\n", Some("secret")),
        ("secret", Some("secret")),
        ("secret\r\nsecond line\n", Some("secret")),
        ("  spaced pass  \n", Some("  spaced pass  ")),
        ("\nsecret\n", None),
        ("", None),
    ];
    for (i, (content, expected)) in cases.into_iter().enumerate() {
        let path = dir.path().join(format!("pw{i}"));
        std::fs::write(&path, content).unwrap();
        let got = read(&PasswordSource::File(path.clone()), &env_of(&[]));
        match expected {
            Some(want) => assert_eq!(got.unwrap(), want, "{content:?}"),
            None => {
                let e = got.unwrap_err().to_string();
                assert!(e.starts_with("empty password from password file"), "{e}");
            }
        }
    }
    let e = read(
        &PasswordSource::File(dir.path().join("absent")),
        &env_of(&[]),
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("reading password file"), "{e}");
}

#[test]
fn env_password_is_taken_whole() {
    let env = env_of(&[(PASSWORD_ENV, "pass with\nnewline")]);
    let got = read(&PasswordSource::Env(PASSWORD_ENV.into()), &env).unwrap();
    assert_eq!(got, "pass with\nnewline");
    let e = read(&PasswordSource::Env(PASSWORD_ENV.into()), &env_of(&[])).unwrap_err();
    assert_eq!(e.to_string(), "CAIRN_PASSWORD is not set");
}

#[test]
fn command_password_is_its_first_output_line() {
    let env = env_of(&[]);
    let run = |cmd: &str| read(&PasswordSource::Command(cmd.into()), &env);
    assert_eq!(
        run("printf 'from command\\nignored\\n'").unwrap(),
        "from command"
    );
    assert_eq!(run("printf nolf").unwrap(), "nolf");
    let e = run("echo partial; exit 3").unwrap_err().to_string();
    assert!(
        e.starts_with("CAIRN_PASSWORD_COMMAND `echo partial; exit 3` failed"),
        "{e}"
    );
    assert!(e.contains('3'), "{e}");
    let e = run("true").unwrap_err().to_string();
    assert_eq!(
        e,
        "empty password from CAIRN_PASSWORD_COMMAND `true` refused"
    );
}

#[test]
fn empty_password_is_refused_and_debug_hides_it() {
    assert!(Password::new(Zeroizing::new(String::new()), "x").is_err());
    let p = Password::new(Zeroizing::new("hunter2".into()), "x").unwrap();
    assert_eq!(format!("{p:?}"), "Password(<secret>)");
}
