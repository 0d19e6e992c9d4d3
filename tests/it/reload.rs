//! The binary with `--config.file`: duplicate clusters refused at start, and SIGHUP (a file
//! that cannot work keeps every running cluster; a good one applies).

use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::{Captured, FakeCluster};

/// A `--config.file` entry with `scope` (when given) and `cluster`'s member URLs.
fn entry(scope: Option<&str>, cluster: &FakeCluster) -> String {
    let urls: Vec<String> = cluster.urls().iter().map(|url| url.to_string()).collect();
    let scope = scope.map_or(String::new(), |scope| format!("scope: {scope}\n    "));
    format!(
        "  - {scope}patroni_urls: [{}]\n    raft_enabled: false\n",
        urls.join(", ")
    )
}

fn write_config(path: &Path, entries: &[String]) {
    std::fs::write(path, format!("clusters:\n{}", entries.concat())).unwrap();
}

#[tokio::test]
async fn duplicate_scopes_or_urls_are_refused_at_start_naming_them() {
    let alpha = FakeCluster::start("alpha", Captured::healthy_415(0)).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exporter.yml");
    for (entries, named) in [
        (
            vec![entry(Some("alpha"), &alpha), entry(Some("alpha"), &alpha)],
            "clusters[0] and clusters[1] both have scope alpha".to_owned(),
        ),
        (
            vec![entry(None, &alpha), entry(None, &alpha)],
            format!(
                "clusters[0] and clusters[1] both have no scope and the first REST URL {}",
                alpha.urls()[0]
            ),
        ),
    ] {
        write_config(&path, &entries);
        let out = Command::new(env!("CARGO_BIN_EXE_patroni-raft-exporter"))
            .arg("--config.file")
            .arg(&path)
            .args(["--web.listen-address", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{out:?}");
        assert!(stderr.contains(&named), "{stderr}");
        assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    }
}
