//! Records the git revision for `patroni_exporter_build_info`.
use std::process::Command;

fn main() {
    let revision = std::env::var("PATRONI_RAFT_EXPORTER_REVISION")
        .ok()
        .or_else(|| {
            let output = Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()?;
            output
                .status
                .success()
                .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        })
        .filter(|revision| !revision.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=PATRONI_RAFT_EXPORTER_REVISION={revision}");
    println!("cargo:rerun-if-env-changed=PATRONI_RAFT_EXPORTER_REVISION");
    println!("cargo:rerun-if-changed=.git/HEAD");
}
