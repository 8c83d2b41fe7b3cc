//! Typed option values (issue 31): every policy, name, size and duration
//! option is parsed by clap into the engine's type, so a bad value is a
//! usage error (exit 2, one line, the valid values listed where there is a
//! list) before any repository is opened or password asked; and the
//! defaults `--help` shows are the engine's.

mod common;

use std::process::Stdio;

use common::*;

/// Options that were plain text until the command body parsed them (after
/// opening the repository and asking for its password, or after starting
/// the run): each bad value is now clap's usage error naming the option and
/// its valid values, and the password command (which would leave a marker
/// file) never runs.
#[test]
fn bad_names_and_durations_are_usage_errors_before_any_password() {
    set_encryption("aes-256-gcm");
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    cairn(&repo, &["init"]).ok();
    let marker = tmp.path().join("password-asked");
    let ask = format!("touch {} && echo {TEST_PASSWORD}", s(&marker));
    let exp_out = tmp.path().join("out");
    // (command line, the option named, the valid values listed if any)
    let tree = tmp.path().join("tree");
    write_file(&tree.join("a"), b"a", 0o644);
    let cases: [(&[&str], &str, Option<&str>); 8] = [
        (&["forget", "--keep-within", "3x"], "--keep-within", None),
        (
            &["backup", s(&tree), "--rewrite", "lbw:window=1"],
            "--rewrite",
            None,
        ),
        (
            &["forget", "--keep-last", "1", "--group-by", "hostname"],
            "--group-by",
            None,
        ),
        (
            &["sim", "--workload", "nope"],
            "--workload",
            Some("[possible values: ddfs, lineage]"),
        ),
        (
            &["sim", "--format", "nope", "trace.bin"],
            "--format",
            Some("[possible values: destor, fsl, cairn]"),
        ),
        (
            &["experiment", "nope", "--out", s(&exp_out)],
            "<NAME>",
            Some(
                "[possible values: index-io, index-ram, eager-vs-lazy, ring-size, \
                 partition, restore, gc, relayout]",
            ),
        ),
        (
            &[
                "experiment",
                "gc",
                "--quick",
                "--plot-format",
                "nope",
                "--out",
                s(&exp_out),
            ],
            "--plot-format",
            Some("[possible values: svg, png, pdf]"),
        ),
        (
            &["init", "--encryption", "rot13"],
            "--encryption",
            Some("[possible values: aes-256-gcm, chacha20poly1305, none]"),
        ),
    ];
    for (args, option, values) in cases {
        let mut c = command(&repo, args);
        c.env_remove("CAIRN_PASSWORD")
            .env("CAIRN_PASSWORD_COMMAND", &ask)
            .stdin(Stdio::null());
        let out = c.output().expect("running cairn");
        let run = Run {
            args: args.iter().map(|a| a.to_string()).collect(),
            code: out.status.code(),
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        let err = run.code(2).one_line_error();
        assert!(err.contains(option), "{args:?}: {err}");
        if let Some(values) = values {
            assert!(err.contains(values), "{args:?}: {err}");
        }
        assert!(!marker.exists(), "{args:?}: the password was asked for");
        assert!(!exp_out.exists(), "{args:?}: the experiment ran");
    }
}

/// The defaults `--help` shows are the engine's own, written as a person
/// would type them (sizes in binary units), and the possible values are the
/// engine's names.
#[test]
fn help_shows_the_engine_defaults_and_names() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let help = |args: &[&str]| cairn(&repo, args).ok().stdout_str();
    let cases: [(&[&str], &[&str]); 6] = [
        (
            &["restore", "--help"],
            &[
                "[default: alacc]",
                "[default: 64MiB]",
                "[default: always]",
                "possible values: always, if-changed, if-newer, never",
            ],
        ),
        (
            &["gc", "--help"],
            &["[default: pgc+]", "[default: 1GiB]", "[default: 100]"],
        ),
        (
            &["init", "--help"],
            &[
                "[default: fastcdc]",
                "[default: 8KiB]",
                "[default: 4MiB]",
                "[default: blake3]",
                "[default: zstd]",
                "[default: paged]",
                "[default: eager]",
                "[default: aes-256-gcm]",
                "[default: 256]",
            ],
        ),
        (&["backup", "--help"], &["[default: inline]"]),
        (&["forget", "--help"], &["[default: host,paths]"]),
        (
            &["experiment", "--help"],
            &["[default: svg]", "possible values: svg, png, pdf"],
        ),
    ];
    for (args, wanted) in cases {
        let text = help(args);
        for w in wanted {
            assert!(text.contains(w), "{args:?} lacks {w:?}:\n{text}");
        }
    }
    // The restore cache options are Advanced; --overwrite and --delete are not.
    let text = help(&["restore", "--help"]);
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle}:\n{text}"))
    };
    let advanced = at("Advanced:");
    assert!(
        at("--overwrite <") < advanced && at("\n      --delete\n") < advanced,
        "{text}"
    );
    assert!(at("--restore-policy <") > advanced, "{text}");
}
