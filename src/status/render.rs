//! Renders reports as aligned text tables (like the cluster CLI's `list`) or as JSON.

use std::fmt::Write;

use super::report::{ClusterReport, LagCell, Level};
use crate::error_kind::ErrorKind;
use crate::snapshot::human_bytes;

/// ANSI colours, only when writing to a terminal (and `NO_COLOR` is unset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Colour(pub bool);

impl Colour {
    fn paint(self, level: Level, text: &str) -> String {
        if !self.0 {
            return text.to_owned();
        }
        let code = match level {
            Level::Ok => "32",
            Level::Warning => "33",
            Level::Critical => "31",
            Level::Unknown => "35",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }
}

/// The reports as text: per cluster a header, the member table, the Raft table, problems.
pub fn text(reports: &[ClusterReport], colour: Colour) -> String {
    let mut out = String::new();
    for (index, report) in reports.iter().enumerate() {
        if index > 0 {
            out.push('\n');
        }
        cluster_text(&mut out, report, colour);
    }
    out
}

fn cluster_text(out: &mut String, report: &ClusterReport, colour: Colour) {
    let leader = match report.leaders.as_slice() {
        [] => "none".to_owned(),
        leaders => leaders.join(", "),
    };
    let timeline = report
        .timeline
        .map(|t| t.to_string())
        .unwrap_or_else(|| "-".into());
    let (dcs, verdict, evidence, margin, who) = match &report.etcd_quorum {
        Some(verdict) => (
            "etcd",
            Some(verdict),
            &report.etcd_quorum_evidence,
            report.etcd_quorum_margin,
            "member",
        ),
        None => (
            "Raft",
            report.raft_quorum.as_ref(),
            &report.raft_quorum_evidence,
            report.raft_quorum_margin,
            "voter",
        ),
    };
    let quorum = match (verdict, evidence) {
        (None, _) => "not polled".to_owned(),
        (Some(verdict), Some(evidence)) => format!("{verdict}: {evidence}"),
        (Some(verdict), None) => verdict.clone(),
    };
    let quorum = match margin {
        None => quorum,
        Some(0) => format!("{quorum}; margin 0: the next {who} down loses it"),
        Some(1) => format!("{quorum}; margin 1: one more {who} can fail"),
        Some(n) if n < 0 => format!("{quorum}; margin {n}"),
        Some(n) => format!("{quorum}; margin {n}: {n} more {who}s can fail"),
    };
    let _ = writeln!(
        out,
        "Cluster: {}  {}\nLeader (DCS view): {leader}  Timeline: {timeline}  {dcs} quorum: {quorum}{}",
        report.scope,
        colour.paint(report.level, report.level.as_str()),
        if report.paused { "  (paused)" } else { "" }
    );

    standby_line(out, report);
    failover_lines(out, report);
    member_table(out, report);
    raft_table(out, report);
    etcd_table(out, report);
    problem_list(out, report, colour);
}

/// A standby cluster: its source, whether its standby leader streams, the lag.
fn standby_line(out: &mut String, report: &ClusterReport) {
    let Some(standby) = &report.standby else {
        return;
    };
    let source = standby
        .source_scope
        .as_deref()
        .unwrap_or("a source not configured");
    let streaming = match (standby.streaming, standby.archive_recovery) {
        (Some(true), _) => "streaming",
        (Some(false), Some(true)) => "NOT streaming (archive only)",
        (Some(false), _) => "NOT streaming",
        (None, _) => "-",
    };
    let lag = standby
        .lag_bytes
        .map_or_else(|| "-".to_owned(), crate::snapshot::human_bytes);
    let _ = writeln!(
        out,
        "Standby cluster of {source}: standby leader {} {streaming}, lag to the source {lag}",
        standby.standby_leader.as_deref().unwrap_or("none"),
    );
}

/// "If the leader dies now": the candidates, then each excluded member with its reasons.
fn failover_lines(out: &mut String, report: &ClusterReport) {
    let Some(failover) = &report.failover else {
        return;
    };
    let who = if failover.candidates.is_empty() {
        "nobody can take over".to_owned()
    } else {
        format!("{} can take over", failover.candidates.join(", "))
    };
    let loses = match failover.data_at_risk_bytes {
        Some(0) => "; a failover now loses nothing".to_owned(),
        Some(bytes) => format!("; a failover now loses {}", human_bytes(bytes)),
        None => String::new(),
    };
    let _ = writeln!(out, "If the leader dies now: {who}{loses}");
    for excluded in &failover.excluded {
        let _ = writeln!(
            out,
            "  {} excluded: {}",
            excluded.member,
            excluded.details.join("; ")
        );
    }
}

/// The members, as the DCS view shows them, with what their own API says.
fn member_table(out: &mut String, report: &ClusterReport) {
    if report.members.is_empty() {
        return;
    }
    let mismatch_column = report
        .members
        .iter()
        .any(|m| m.reported_role_mismatch.is_some());
    let mut header = vec!["Member", "Host", "Role", "State", "TL", "Lag in MB", "API"];
    if mismatch_column {
        header.push("Reports itself");
    }
    let rows: Vec<Vec<String>> = report
        .members
        .iter()
        .map(|m| {
            let mut row = vec![
                m.member.clone(),
                m.host.clone().unwrap_or_default(),
                role_title(&m.role),
                m.state.clone(),
                m.timeline.map(|t| t.to_string()).unwrap_or_default(),
                match &m.lag_mb {
                    None => String::new(),
                    Some(LagCell::MiB(mib)) => mib.to_string(),
                    Some(LagCell::Unknown(text)) => text.clone(),
                },
                match &m.api_error {
                    None => "up".to_owned(),
                    Some(ErrorKind::ApiUrlNotAllowed) => "not asked".to_owned(),
                    Some(kind) => format!("down ({kind})"),
                },
            ];
            if mismatch_column {
                row.push(m.reported_role_mismatch.clone().unwrap_or_default());
            }
            row
        })
        .collect();
    out.push('\n');
    table(out, &header, &rows);
}

/// The Raft nodes, one row each; an unreachable node says why.
fn raft_table(out: &mut String, report: &ClusterReport) {
    if report.raft_nodes.is_empty() {
        return;
    }
    let header = [
        "Raft node",
        "State",
        "Term",
        "Quorum",
        "Leader",
        "Commit",
        "Applied",
        "Partners",
    ];
    let rows: Vec<Vec<String>> = report
        .raft_nodes
        .iter()
        .map(|n| {
            let node = match n.kind.as_deref() {
                Some(kind @ "witness") => format!("{} ({kind})", n.node),
                _ => n.node.clone(),
            };
            if !n.reachable {
                let error = n.error.map(ErrorKind::as_label).unwrap_or_default();
                return vec![node, format!("unreachable ({error})")];
            }
            let number = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
            vec![
                node,
                n.state.clone().unwrap_or_default(),
                number(n.term),
                match n.has_quorum {
                    Some(true) => "yes".into(),
                    Some(false) => "no".into(),
                    None => String::new(),
                },
                n.leader.clone().unwrap_or_else(|| "none".into()),
                number(n.commit_index),
                number(n.applied_index),
                format!(
                    "{}/{} connected",
                    n.partners_connected.unwrap_or_default(),
                    n.partners.unwrap_or_default()
                ),
            ]
        })
        .collect();
    out.push('\n');
    table(out, &header, &rows);
}

/// The etcd members, one row per endpoint; an unreachable one says why.
fn etcd_table(out: &mut String, report: &ClusterReport) {
    if report.etcd_members.is_empty() {
        return;
    }
    let header = [
        "etcd endpoint",
        "Member",
        "Role",
        "Term",
        "Index",
        "Applied",
        "DB size",
        "Version",
    ];
    let rows: Vec<Vec<String>> = report
        .etcd_members
        .iter()
        .map(|e| {
            let member = e.member.clone().unwrap_or_default();
            if !e.reachable {
                let error = e.error.map(ErrorKind::as_label).unwrap_or_default();
                return vec![e.endpoint.clone(), member, format!("unreachable ({error})")];
            }
            let number = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
            let role = match (e.leader, e.learner, e.has_leader) {
                (Some(true), _, _) => "leader",
                (_, Some(true), _) => "learner",
                (_, _, Some(false)) => "no leader",
                (Some(false), _, _) => "follower",
                _ => "healthy (/health only)",
            };
            vec![
                e.endpoint.clone(),
                member,
                role.to_owned(),
                number(e.term),
                number(e.raft_index),
                number(e.applied_index),
                e.db_size_bytes.map(human_bytes).unwrap_or_default(),
                e.version.clone().unwrap_or_default(),
            ]
        })
        .collect();
    out.push('\n');
    table(out, &header, &rows);
}

/// The problems, worst first, or that there is none.
fn problem_list(out: &mut String, report: &ClusterReport, colour: Colour) {
    out.push('\n');
    if report.problems.is_empty() {
        let _ = writeln!(out, "No problems found.");
    } else {
        let _ = writeln!(out, "Problems:");
        for problem in &report.problems {
            let _ = writeln!(
                out,
                "  {} {}",
                colour.paint(problem.level, problem.level.as_str()),
                problem.message
            );
        }
    }
}

/// `sync_standby` → `Sync Standby`, as the cluster CLI prints roles.
fn role_title(role: &str) -> String {
    role.split('_')
        .map(|word| {
            let mut chars = word.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect(),
                None => String::new(),
            }
        })
        .collect::<Vec<String>>()
        .join(" ")
}

/// A bordered table with columns sized to their widest cell.
fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (index, cell) in row.iter().enumerate().take(columns) {
            widths[index] = widths[index].max(cell.chars().count());
        }
    }
    let rule = |out: &mut String| {
        out.push('+');
        for width in &widths {
            out.push_str(&"-".repeat(width + 2));
            out.push('+');
        }
        out.push('\n');
    };
    let line = |out: &mut String, cells: &[String]| {
        out.push('|');
        for (index, width) in widths.iter().enumerate() {
            let cell = cells.get(index).map(String::as_str).unwrap_or("");
            let padding = width - cell.chars().count();
            let _ = write!(out, " {cell}{} |", " ".repeat(padding));
        }
        out.push('\n');
    };
    rule(out);
    line(
        out,
        &header.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>(),
    );
    rule(out);
    for row in rows {
        line(out, row);
    }
    rule(out);
}

/// The reports as JSON: `{"status": LEVEL, "clusters": [...]}`.
pub fn json(reports: &[ClusterReport]) -> String {
    #[derive(serde::Serialize)]
    struct Output<'a> {
        status: Level,
        clusters: &'a [ClusterReport],
    }
    let output = Output {
        status: super::report::overall(reports),
        clusters: reports,
    };
    serde_json::to_string_pretty(&output).expect("reports always serialise") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_titles_match_the_cluster_cli() {
        assert_eq!(role_title("sync_standby"), "Sync Standby");
        assert_eq!(role_title("leader"), "Leader");
        assert_eq!(role_title("standby_leader"), "Standby Leader");
    }

    #[test]
    fn tables_align_on_the_widest_cell() {
        let mut out = String::new();
        table(
            &mut out,
            &["A", "Bee"],
            &[vec!["long cell".into(), "x".into()]],
        );
        assert_eq!(
            out,
            "+-----------+-----+\n| A         | Bee |\n+-----------+-----+\n| long cell | x   |\n+-----------+-----+\n"
        );
    }
}
