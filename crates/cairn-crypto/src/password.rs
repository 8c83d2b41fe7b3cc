//! Where a repository password comes from, and the type that holds it.
//!
//! Precedence (first one given wins): `--password-file`, then the
//! `CAIRN_PASSWORD` environment variable, then `CAIRN_PASSWORD_COMMAND` (run
//! with `sh -c`, its first line of output is the password), then a prompt —
//! only when standard input is a terminal. An environment variable set to the
//! empty string counts as not set. An empty password is always refused.
//!
//! The environment is read through a caller-given function so tests (and
//! callers with their own configuration) never touch the process environment.

use std::ffi::OsString;
use std::fmt;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use zeroize::Zeroizing;

use cairn_core::error::IoContext;
use cairn_core::{Error, Result};

/// The environment variable holding the password itself.
pub const PASSWORD_ENV: &str = "CAIRN_PASSWORD";
/// The environment variable holding a shell command that prints the password.
pub const PASSWORD_COMMAND_ENV: &str = "CAIRN_PASSWORD_COMMAND";

/// A non-empty password, wiped from memory when dropped and never shown by
/// `Debug`.
#[derive(Clone)]
pub struct Password(Zeroizing<String>);

impl Password {
    /// Refuses the empty password; `source` names where it came from.
    pub fn new(password: Zeroizing<String>, source: &str) -> Result<Password> {
        if password.is_empty() {
            return Err(Error::invalid(format!(
                "empty password from {source} refused"
            )));
        }
        Ok(Password(password))
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<secret>)")
    }
}

/// Whether a prompt asks once (opening a key) or twice (creating one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptMode {
    Once,
    Confirm,
}

/// One place a password can come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordSource {
    /// A file whose first line is the password.
    File(PathBuf),
    /// An environment variable (its name) holding the password.
    Env(String),
    /// A shell command printing the password on its first line.
    Command(String),
    /// Ask on the terminal.
    Prompt,
}

/// The environment as the caller sees it: a variable's value, if set.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// The process environment, for callers that have no other.
pub fn process_env(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

fn env_set(env: EnvLookup<'_>, name: &str) -> Option<OsString> {
    env(name).filter(|v| !v.is_empty())
}

impl PasswordSource {
    /// The source the precedence rules pick. `terminal` says whether
    /// standard input is a terminal (the prompt is offered only then).
    pub fn choose(
        password_file: Option<&Path>,
        env: EnvLookup<'_>,
        terminal: bool,
    ) -> Result<PasswordSource> {
        if let Some(path) = password_file {
            return Ok(PasswordSource::File(path.to_path_buf()));
        }
        if env_set(env, PASSWORD_ENV).is_some() {
            return Ok(PasswordSource::Env(PASSWORD_ENV.to_string()));
        }
        if let Some(command) = env_set(env, PASSWORD_COMMAND_ENV) {
            let command = command.into_string().map_err(|_| {
                Error::invalid(format!("{PASSWORD_COMMAND_ENV} is not valid UTF-8"))
            })?;
            return Ok(PasswordSource::Command(command));
        }
        if terminal {
            return Ok(PasswordSource::Prompt);
        }
        Err(Error::invalid(format!(
            "no password given: use --password-file, {PASSWORD_ENV} or {PASSWORD_COMMAND_ENV}"
        )))
    }

    /// Reads the password from this source. `mode` matters for the prompt
    /// only: the other sources are not interactive.
    pub fn read(&self, env: EnvLookup<'_>, mode: PromptMode) -> Result<Password> {
        match self {
            PasswordSource::File(path) => read_file(path),
            PasswordSource::Env(name) => {
                let value = env_set(env, name)
                    .ok_or_else(|| Error::invalid(format!("{name} is not set")))?;
                let value = Zeroizing::new(
                    value
                        .into_string()
                        .map_err(|_| Error::invalid(format!("{name} is not valid UTF-8")))?,
                );
                Password::new(value, name)
            }
            PasswordSource::Command(command) => run_command(command),
            PasswordSource::Prompt => prompt(mode),
        }
    }
}

/// Chooses the source by the precedence rules (the prompt only if standard
/// input is a terminal) and reads the password from it.
pub fn resolve_password(
    password_file: Option<&Path>,
    env: EnvLookup<'_>,
    mode: PromptMode,
) -> Result<Password> {
    PasswordSource::choose(password_file, env, std::io::stdin().is_terminal())?.read(env, mode)
}

/// The password of a second repository in one command (`cairn copy
/// --to`'s destination, `init --copy-identity-from`'s source): from
/// `file` (given as `file_flag`), the variable `var`, the command in
/// `var` + `_COMMAND`, or the terminal, asked as `what` (only if standard
/// input is one). Errors name these sources, not `--repo`'s.
pub fn resolve_other_password(
    file: Option<&Path>,
    file_flag: &str,
    var: &str,
    env: EnvLookup<'_>,
    mode: PromptMode,
    what: &str,
) -> Result<Password> {
    if let Some(path) = file {
        return read_file(path);
    }
    if env_set(env, var).is_some() {
        return PasswordSource::Env(var.to_string()).read(env, mode);
    }
    let command_var = format!("{var}_COMMAND");
    if let Some(command) = env_set(env, &command_var) {
        let command = command
            .into_string()
            .map_err(|_| Error::invalid(format!("{command_var} is not valid UTF-8")))?;
        return run_named_command(&command_var, &command);
    }
    if std::io::stdin().is_terminal() {
        return prompt_as(what, mode);
    }
    Err(Error::invalid(format!(
        "no password given for the {what}: use {file_flag}, {var} or {command_var}"
    )))
}

/// The first line of `text` without its line ending.
fn first_line(text: &str) -> &str {
    let line = text.split('\n').next().unwrap_or("");
    line.strip_suffix('\r').unwrap_or(line)
}

fn read_file(path: &Path) -> Result<Password> {
    let mut bytes = Zeroizing::new(Vec::new());
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .ctx(|| format!("reading password file {}", path.display()))?;
    let source = format!("password file {}", path.display());
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| Error::invalid(format!("{source} is not valid UTF-8")))?;
    Password::new(Zeroizing::new(first_line(text).to_string()), &source)
}

fn run_command(command: &str) -> Result<Password> {
    run_named_command(PASSWORD_COMMAND_ENV, command)
}

fn run_named_command(var: &str, command: &str) -> Result<Password> {
    let source = format!("{var} `{command}`");
    let output = Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::inherit())
        .stderr(Stdio::inherit())
        .output()
        .ctx(|| format!("running {source}"))?;
    let stdout = Zeroizing::new(output.stdout);
    if !output.status.success() {
        return Err(Error::invalid(format!(
            "{source} failed ({})",
            output.status
        )));
    }
    let text = std::str::from_utf8(&stdout)
        .map_err(|_| Error::invalid(format!("{source} printed no valid UTF-8")))?;
    Password::new(Zeroizing::new(first_line(text).to_string()), &source)
}

fn prompt(mode: PromptMode) -> Result<Password> {
    prompt_as("repository", mode)
}

/// Asks on the terminal for the password of the `what` (a repository).
fn prompt_as(what: &str, mode: PromptMode) -> Result<Password> {
    let ask = |text: &str| {
        rpassword::prompt_password(text)
            .map(Zeroizing::new)
            .ctx(|| "reading the password from the terminal".to_string())
    };
    match mode {
        PromptMode::Once => Password::new(ask(&format!("{what} password: "))?, "the prompt"),
        PromptMode::Confirm => {
            let first = Password::new(ask("new password: ")?, "the prompt")?;
            let second = ask("repeat the new password: ")?;
            if first.as_bytes() != second.as_bytes() {
                return Err(Error::invalid("the two passwords differ"));
            }
            Ok(first)
        }
    }
}

#[cfg(test)]
#[path = "password_tests.rs"]
mod tests;
