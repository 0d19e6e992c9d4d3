//! Parser for `syncobj_admin -status` text output, for the `--raft.command` mode and for
//! checking the native client against captured `syncobj_admin` runs.
//!
//! On success `syncobj_admin` prints `'%s: %s' % (k, v)` for every status key, sorted,
//! values as Python `str()` (`True`, `None`, `host:port` for node objects). Keys may
//! themselves contain `:` (`partner_node_status_server_127.0.0.1:6002: 2`), so each line
//! is split at its *last* `": "`. Values never contain `": "`.
//!
//! On failure it prints a single message (`connection lost`, `invalid command`, …) and
//! still exits 0, so an output without any `key: value` line is a `command` error
//! carrying that message. Blank lines and `#` comment lines (annotations added by capture
//! harnesses) are ignored.

use super::status::{Field, Fields};
use super::{RaftError, RaftStatus};

/// Longest error message quoted back in an error.
const MAX_QUOTED: usize = 200;

/// Parses `syncobj_admin -status` output into a [`RaftStatus`].
pub fn parse_admin_text(text: &str) -> Result<RaftStatus, RaftError> {
    let mut fields = Fields::default();
    let mut other_lines: Vec<&str> = Vec::new();
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        match line.rsplit_once(": ") {
            Some((k, v)) if !k.is_empty() && !k.contains(' ') => {
                fields.0.insert(k, Field::Raw(v));
            }
            _ => other_lines.push(line),
        }
    }
    if fields.0.is_empty() {
        let msg = other_lines.join(" / ");
        let msg: String = msg.chars().take(MAX_QUOTED).collect();
        return Err(RaftError::Command(if msg.is_empty() {
            "syncobj_admin printed no status (empty output)".to_string()
        } else {
            format!("syncobj_admin reported: {msg}")
        }));
    }
    if let Some(bad) = other_lines.first() {
        let bad: String = bad.chars().take(MAX_QUOTED).collect();
        return Err(RaftError::decode(format!(
            "syncobj_admin output: unexpected line {bad:?}"
        )));
    }
    fields.build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_kind::ErrorKind;
    use crate::raft::RaftState;

    fn read(rel: &str) -> String {
        let p = format!("{}/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    #[test]
    fn leader_capture() {
        let s = parse_admin_text(&read("pysyncobj/enc_leader_0.3.12/expected_admin.txt")).unwrap();
        assert_eq!(s.state, RaftState::Leader);
        assert_eq!(s.self_node, "127.0.0.1:6003");
        assert_eq!(s.leader.as_deref(), Some("127.0.0.1:6003"));
        assert_eq!(s.partners.len(), 2);
        assert!(s.partners.iter().all(|p| p.connected()));
        assert_eq!(
            s.next_idx,
            vec![
                ("127.0.0.1:6001".to_string(), 8),
                ("127.0.0.1:6002".to_string(), 8)
            ]
        );
    }

    #[test]
    fn patroni_captures() {
        let dir = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
        let mut ok = 0;
        let mut failed = 0;
        for sub in ["patroni-3.3.8", "patroni-4.1.5"] {
            for entry in std::fs::read_dir(format!("{dir}/{sub}")).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                if !name.contains("syncobj_admin") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let r = parse_admin_text(&text);
                if text.contains("connection lost") || name.contains("non-raft-port") {
                    let e = r.unwrap_err();
                    assert_eq!(e.kind(), ErrorKind::Command, "{name}");
                    failed += 1;
                } else {
                    let s = r.unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert!(s.has_quorum_reported);
                    assert_eq!(s.partner_nodes_count, 2);
                    assert_eq!(s.partners.len(), 2);
                    assert!(s.version.starts_with("0.3."));
                    ok += 1;
                }
            }
        }
        assert_eq!((ok, failed), (14, 4));
    }

    #[test]
    fn specific_patroni_values() {
        let s = parse_admin_text(&read(
            "patroni-4.1.5/06-syncobj_admin-status-survivor-t+55s.txt",
        ))
        .unwrap();
        assert_eq!(s.state, RaftState::Candidate);
        assert_eq!(s.leader, None);
        assert!(!s.has_quorum);
        assert_eq!(s.raft_term, 27);
        assert_eq!(s.uptime_seconds, 71);
        assert!(s.partners.iter().all(|p| !p.connected()));
        let e = parse_admin_text(&read("patroni-4.1.5/01-syncobj_admin-wrong-password.txt"))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "raft status command: syncobj_admin reported: connection lost"
        );
    }

    #[test]
    fn errors() {
        assert_eq!(parse_admin_text("").unwrap_err().kind(), ErrorKind::Command);
        assert_eq!(
            parse_admin_text("invalid command\n").unwrap_err().kind(),
            ErrorKind::Command
        );
        let good = read("pysyncobj/plain_follower_0.3.12/expected_admin.txt");
        let bad = format!("{good}garbage line\n");
        assert_eq!(
            parse_admin_text(&bad).unwrap_err().kind(),
            ErrorKind::Decode
        );
        let bad = good.replace("log_len: 5", "log_len: five");
        assert_eq!(
            parse_admin_text(&bad).unwrap_err().kind(),
            ErrorKind::Decode
        );
        let crlf = good.replace('\n', "\r\n");
        assert_eq!(
            parse_admin_text(&crlf).unwrap(),
            parse_admin_text(&good).unwrap()
        );
    }
}
