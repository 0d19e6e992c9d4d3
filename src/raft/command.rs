//! `--raft.command` mode: run an external `syncobj_admin`-compatible program and parse its
//! `-status` output, for setups where only a packaged admin tool is available (e.g.
//! `/snap/bin/charmed-postgresql.syncobj-admin`).
//!
//! Design, chosen so that the exporter never puts the password on a command line and no
//! shell ever sees untrusted text:
//! * `program_and_args` is executed directly (no shell). In every argument the
//!   placeholder `{addr}` is replaced by the node address. If no argument contains
//!   `{addr}`, the arguments `-conn <addr> -status` are appended, which is what plain
//!   `syncobj_admin` needs.
//! * The password, when configured, is passed **only** in the child's environment as
//!   `SYNCOBJ_PASSWORD` (and the variable is removed from the child's environment when no
//!   password is configured). `syncobj_admin` itself only takes `-pass PASSWORD`, so an
//!   encrypted cluster needs a wrapper that reads the variable, for example
//!   `["sh", "-c", "exec syncobj_admin -conn \"$1\" -pass \"$SYNCOBJ_PASSWORD\" -status", "sh", "{addr}"]`.
//!   The address is passed as a positional parameter, never spliced into the script.
//!   Note that `syncobj_admin`'s own argv then holds the password, visible to local users
//!   for the ~0.1 s it runs; the native client ([`super::query_status`]) avoids that.
//! * The child inherits the exporter's environment (a packaged admin tool may need
//!   `PATH`, `SNAP_*`, `PYTHONPATH`, …) and runs in its own process group with stdin
//!   closed. On timeout the whole
//!   group is killed with SIGKILL (so a `sh -c` wrapper's `syncobj_admin` dies too,
//!   rather than hanging for its 900 s internal deadline); `kill_on_drop` covers
//!   cancellation.
//! * stdout is capped at [`MAX_STDOUT`] and stderr at [`MAX_STDERR`]; any password
//!   occurrence in text quoted back in an error is replaced by `<redacted>`.
//! * `syncobj_admin` exits 0 even on failure (printing e.g. `connection lost`); such
//!   output becomes a `command` error via [`super::parse_admin_text`]. A deadline miss is a
//!   `timeout` error.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::{parse_admin_text, RaftError, RaftStatus};

/// Largest stdout accepted from the command (a real status output is about 1 KiB).
pub const MAX_STDOUT: usize = 1 << 20;
/// Largest stderr kept for error messages.
pub const MAX_STDERR: usize = 4096;
/// The environment variable carrying the password to the command.
pub const PASSWORD_ENV: &str = "SYNCOBJ_PASSWORD";
/// Placeholder replaced by the node address in the command's arguments.
pub const ADDR_PLACEHOLDER: &str = "{addr}";

/// Builds the argv (program first) for `addr`.
pub fn build_argv(program_and_args: &[String], addr: &str) -> Result<Vec<String>, RaftError> {
    if program_and_args.is_empty() || program_and_args[0].is_empty() {
        return Err(RaftError::Command("empty raft status command".into()));
    }
    let has_placeholder = program_and_args
        .iter()
        .any(|a| a.contains(ADDR_PLACEHOLDER));
    let mut argv: Vec<String> = program_and_args
        .iter()
        .map(|a| a.replace(ADDR_PLACEHOLDER, addr))
        .collect();
    if !has_placeholder {
        argv.extend(["-conn".to_string(), addr.to_string(), "-status".to_string()]);
    }
    Ok(argv)
}

fn redact(text: &str, password: Option<&[u8]>) -> String {
    let mut s = text.to_string();
    if let Some(p) = password.and_then(|p| std::str::from_utf8(p).ok()) {
        if !p.is_empty() {
            s = s.replace(p, "<redacted>");
        }
    }
    s
}

async fn read_capped<R: AsyncRead + Unpin>(
    r: Option<R>,
    cap: usize,
) -> std::io::Result<(Vec<u8>, bool)> {
    let mut buf = Vec::new();
    if let Some(r) = r {
        r.take(cap as u64 + 1).read_to_end(&mut buf).await?;
    }
    let over = buf.len() > cap;
    buf.truncate(cap);
    Ok((buf, over))
}

fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) has no memory-safety preconditions; a negative pid addresses
        // the process group we created for the child (process_group(0) below).
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

/// Runs the configured status command for `addr` and parses its output.
///
/// See the module documentation for how the command line is built and how the password
/// is passed (environment variable `SYNCOBJ_PASSWORD`, never argv).
pub async fn run_status_command(
    program_and_args: &[String],
    addr: &str,
    password: Option<&[u8]>,
    timeout: Duration,
) -> Result<RaftStatus, RaftError> {
    let argv = build_argv(program_and_args, addr)?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    match password {
        Some(p) => {
            use std::os::unix::ffi::OsStrExt;
            cmd.env(PASSWORD_ENV, std::ffi::OsStr::from_bytes(p));
        }
        None => {
            cmd.env_remove(PASSWORD_ENV);
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| RaftError::Command(format!("cannot run {:?}: {e}", argv[0])))?;
    let pid = child.id();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let run = async {
        let (out, err) = tokio::join!(
            read_capped(stdout, MAX_STDOUT),
            read_capped(stderr, MAX_STDERR)
        );
        let (out, out_over) =
            out.map_err(|e| RaftError::Command(format!("reading stdout: {e}")))?;
        let (err, _) = err.map_err(|e| RaftError::Command(format!("reading stderr: {e}")))?;
        if out_over {
            return Err(RaftError::Command(format!(
                "output larger than {MAX_STDOUT} bytes"
            )));
        }
        let status = child
            .wait()
            .await
            .map_err(|e| RaftError::Command(format!("waiting for the command: {e}")))?;
        Ok((out, err, status))
    };
    let (out, err, status) = match tokio::time::timeout(timeout, run).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            kill_group(pid);
            return Err(e);
        }
        Err(_) => {
            kill_group(pid);
            return Err(RaftError::Timeout {
                addr: addr.to_string(),
                timeout,
            });
        }
    };
    let stdout = String::from_utf8_lossy(&out);
    if !status.success() {
        let stderr = redact(String::from_utf8_lossy(&err).trim(), password);
        let stderr: String = stderr.chars().take(300).collect();
        return Err(RaftError::Command(format!(
            "command exited with {status}: {stderr}"
        )));
    }
    parse_admin_text(&stdout).map_err(|e| match e {
        RaftError::Command(m) => RaftError::Command(redact(&m, password)),
        RaftError::Decode(m) => RaftError::Decode(redact(&m, password)),
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_kind::ErrorKind;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn argv_building() {
        assert_eq!(
            build_argv(&s(&["syncobj_admin"]), "h:1").unwrap(),
            s(&["syncobj_admin", "-conn", "h:1", "-status"])
        );
        assert_eq!(
            build_argv(&s(&["sh", "-c", "x \"$1\"", "sh", "{addr}"]), "h:1").unwrap(),
            s(&["sh", "-c", "x \"$1\"", "sh", "h:1"])
        );
        assert_eq!(
            build_argv(&[], "h:1").unwrap_err().kind(),
            ErrorKind::Command
        );
    }

    #[test]
    fn redaction() {
        assert_eq!(
            redact("bad pw s3cret!", Some(b"s3cret")),
            "bad pw <redacted>!"
        );
        assert_eq!(redact("x", Some(b"")), "x");
        assert_eq!(redact("x", None), "x");
    }
}
