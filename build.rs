//! Records the git revision for `patroni_exporter_build_info`.
//!
//! Where it comes from, first found wins: `$PATRONI_RAFT_EXPORTER_REVISION`; `git` when the
//! source is a checkout (`.git` exists); the `.cargo_vcs_info.json` that `cargo package` puts
//! in a packaged crate (`cargo install` from crates.io, where there is no `.git`); else
//! "unknown". A build never fails for want of git.
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".to_owned());
    let manifest_dir = Path::new(&manifest_dir);
    let revision = std::env::var("PATRONI_RAFT_EXPORTER_REVISION")
        .ok()
        .or_else(|| git_revision(manifest_dir))
        .or_else(|| packaged_revision(manifest_dir))
        .filter(|revision| !revision.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=PATRONI_RAFT_EXPORTER_REVISION={revision}");
    println!("cargo:rerun-if-env-changed=PATRONI_RAFT_EXPORTER_REVISION");
    // Only files that exist: cargo reruns a build script on every build while a watched file
    // is missing, and every rerun recompiles the crate.
    println!("cargo:rerun-if-changed=build.rs");
    for watched in files_naming_the_revision(manifest_dir) {
        println!("cargo:rerun-if-changed={}", watched.display());
    }
}

/// What changes when the revision does: in a checkout, HEAD, the branch it points to and
/// packed-refs (in a worktree they live in the repository's git dir, not in `.git`, a file);
/// in a packaged crate, `.cargo_vcs_info.json`.
fn files_naming_the_revision(manifest_dir: &Path) -> Vec<PathBuf> {
    let mut files = vec![manifest_dir.join(".cargo_vcs_info.json")];
    if manifest_dir.join(".git").exists() {
        let git = |args: &[&str]| {
            Command::new("git")
                .args(args)
                .current_dir(manifest_dir)
                .output()
                .ok()
                .filter(|output| output.status.success())
                .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        };
        let mut git_paths = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
        git_paths.extend(git(&["symbolic-ref", "-q", "HEAD"]));
        for git_path in git_paths {
            if let Some(path) = git(&[
                "rev-parse",
                "--path-format=absolute",
                "--git-path",
                &git_path,
            ]) {
                files.push(PathBuf::from(path));
            }
        }
    }
    files.retain(|file| file.exists());
    files
}

/// `git rev-parse` of a checkout; `None` outside one (or without git).
fn git_revision(manifest_dir: &Path) -> Option<String> {
    if !manifest_dir.join(".git").exists() {
        return None;
    }
    let output = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(manifest_dir)
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The commit `cargo package` recorded: `{"git": {"sha1": "<40 hex>", ...}, ...}`. Read
/// without a JSON parser (a build dependency for one field is not worth it).
fn packaged_revision(manifest_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(manifest_dir.join(".cargo_vcs_info.json")).ok()?;
    let after_key = &text[text.find("\"sha1\"")? + "\"sha1\"".len()..];
    let value = after_key.split('"').nth(1)?;
    (value.len() >= 12 && value.bytes().all(|byte| byte.is_ascii_hexdigit()))
        .then(|| value[..12].to_owned())
}
