//! Where the repository options (`--repo`, the passwords, S3 and metadata
//! cache) are offered: in the help of every command that opens a
//! repository, under their own headings, and nowhere else; accepted before
//! the command name, after it, or from `CAIRN_REPO`; refused by the
//! commands that open no repository.

mod common;

use std::process::Stdio;

use common::*;

/// The commands that open a repository, as typed before `--help`.
const REPOSITORY_COMMANDS: &[&[&str]] = &[
    &["init"],
    &["copy"],
    &["backup"],
    &["snapshots"],
    &["ls"],
    &["restore"],
    &["cat"],
    &["mount"],
    &["dump"],
    &["stats"],
    &["check"],
    &["repair", "index"],
    &["repair", "snapshots"],
    &["forget"],
    &["fastcopy"],
    &["gc"],
    &["diff"],
    &["find"],
    &["tag"],
    &["key", "list"],
    &["key", "add"],
    &["key", "remove"],
    &["key", "passwd"],
    &["unlock"],
    &["lock"],
];

/// The commands that open no repository.
const OTHER_COMMANDS: &[&str] = &[
    "trace",
    "sim",
    "analyze",
    "experiment",
    "completions",
    "man",
];

/// The options each heading of a repository command's help must list.
const HEADINGS: &[(&str, &[&str])] = &[
    (
        "Repository",
        &["--repo", "--password-file", "--password-command"],
    ),
    (
        "S3 repositories",
        &[
            "--s3-endpoint",
            "--s3-path-style",
            "--s3-uploads",
            "--s3-downloads",
            "--s3-lease-secs",
            "--s3-timeout",
        ],
    ),
    ("Metadata cache", &["--cache-dir", "--no-cache"]),
];

/// `cairn ARGS --help`, which must succeed.
fn help(args: &[&str]) -> String {
    let out = base_command()
        .args(args)
        .arg("--help")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?} --help: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The lines under `heading:` in a help text, up to the next heading.
fn section(help: &str, heading: &str) -> Option<String> {
    let title = format!("{heading}:");
    let mut lines = help.lines().skip_while(|l| *l != title);
    lines.next()?;
    Some(
        lines
            .take_while(|l| l.is_empty() || l.starts_with(' '))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

#[test]
fn repository_options_are_listed_only_by_the_commands_that_open_a_repository() {
    for command in REPOSITORY_COMMANDS {
        let text = help(command);
        for (heading, options) in HEADINGS {
            let Some(lines) = section(&text, heading) else {
                panic!("{command:?} --help has no {heading} heading:\n{text}");
            };
            for option in *options {
                assert!(
                    lines.contains(option),
                    "{command:?} --help lists no {option} under {heading}:\n{text}"
                );
            }
        }
    }
    for command in OTHER_COMMANDS {
        let text = help(&[command]);
        for (heading, options) in HEADINGS {
            assert!(
                section(&text, heading).is_none(),
                "`{command} --help` has a {heading} heading:\n{text}"
            );
            for option in *options {
                assert!(
                    !text.contains(option),
                    "`{command} --help` lists {option}:\n{text}"
                );
            }
        }
    }
    // The top level lists the commands, and says where the options are.
    let text = help(&[]);
    assert!(section(&text, "Repository").is_none(), "{text}");
    assert!(!text.contains("--s3-"), "{text}");
    assert!(text.contains("cairn --repo R COMMAND"), "{text}");
}

#[test]
fn the_repository_is_named_before_or_after_the_command_or_in_the_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let elsewhere = tmp.path().join("elsewhere");
    let tree = tmp.path().join("tree");
    write_file(&tree.join("a"), b"a", 0o644);
    cairn_env(&["init", "--repo", s(&repo)], &[]).ok();
    cairn_env(&["backup", "--repo", s(&repo), s(&tree)], &[]).ok();
    cairn(&repo, &["backup", s(&tree)]).ok();
    cairn_env(&["backup", s(&tree)], &[("CAIRN_REPO", &repo)]).ok();
    // Given on both sides (or before it and in the environment), the one
    // written after the command name is the one in force.
    let out = base_command()
        .arg("--repo")
        .arg(&elsewhere)
        .args(["backup", "--repo", s(&repo), s(&tree)])
        .env("CAIRN_REPO", &elsewhere)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!elsewhere.exists());
    cairn_env(
        &["--repo", s(&repo), "backup", s(&tree)],
        &[("CAIRN_REPO", &elsewhere)],
    )
    .ok();
    assert!(!elsewhere.exists());
    assert_eq!(snapshot_ids(&repo).len(), 5);
    // The nested commands take them after their own name too.
    let keys = cairn_env(&["key", "list", "--repo", s(&repo)], &[]).ok();
    assert_eq!(
        keys.stdout_str().matches('*').count(),
        1,
        "{}",
        keys.stdout_str()
    );
}

#[test]
fn commands_without_a_repository_refuse_repository_options_after_their_name() {
    for args in [
        &["sim", "--repo", "/nonexistent", "--workload", "ddfs"][..],
        &["sim", "-r", "/nonexistent", "--workload", "ddfs"],
        &[
            "trace",
            "--s3-uploads",
            "4",
            "-o",
            "/nonexistent/t",
            "/nonexistent",
        ],
        &["experiment", "--cache-dir=/nonexistent", "index-io"],
        &["man", "--password-command", "true", "/nonexistent"],
    ] {
        let run = cairn_env(args, &[]);
        assert_eq!(run.code, Some(2), "{args:?}: {}", run.stderr);
        let line = run.one_line_error();
        assert!(
            line.contains(&format!("does not apply to `cairn {}`", args[0])),
            "{args:?}: {line}"
        );
    }
    // Between `key` and its subcommand, the error says where it goes.
    let run = cairn_env(&["key", "--repo", "/nonexistent", "list"], &[]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    let line = run.one_line_error();
    assert!(
        line.contains("goes after the subcommand of `cairn key`"),
        "{line}"
    );
}
