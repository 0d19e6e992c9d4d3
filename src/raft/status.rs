//! [`RaftStatus`]: the typed view of pysyncobj's `getStatus()` dict, and the pure mapping
//! into it.
//!
//! Both sources, the binary reply ([`status_from_value`]) and `syncobj_admin -status`
//! text ([`super::parse_admin_text`]), are first flattened into the same key → field map
//! and then go through the one `Fields::build`, so the two can only disagree where the
//! sources do.

use std::collections::BTreeMap;

use super::pickle::{Node, Scalar, Value};
use super::RaftError;

/// Raft role of the queried node (`_RAFT_STATE` in pysyncobj).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaftState {
    Follower,
    Candidate,
    Leader,
    /// A value pysyncobj does not define.
    Unknown(i64),
}

impl RaftState {
    /// Maps pysyncobj's integer state.
    pub fn from_code(code: i64) -> RaftState {
        match code {
            0 => RaftState::Follower,
            1 => RaftState::Candidate,
            2 => RaftState::Leader,
            other => RaftState::Unknown(other),
        }
    }

    /// The integer pysyncobj uses.
    #[cfg(test)]
    pub fn code(&self) -> i64 {
        match self {
            RaftState::Follower => 0,
            RaftState::Candidate => 1,
            RaftState::Leader => 2,
            RaftState::Unknown(c) => *c,
        }
    }

    /// `follower`, `candidate`, `leader` or `unknown`.
    pub fn as_str(&self) -> &'static str {
        match self {
            RaftState::Follower => "follower",
            RaftState::Candidate => "candidate",
            RaftState::Leader => "leader",
            RaftState::Unknown(_) => "unknown",
        }
    }
}

/// One voting partner as seen by the queried node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartnerStatus {
    /// `host:port`.
    pub node: String,
    /// pysyncobj `CONNECTION_STATE`: 2 connected, 0 disconnected. This is TCP connection
    /// state, not liveness.
    pub connection_status: i64,
}

impl PartnerStatus {
    /// Whether the node has a TCP connection to this partner (status 2).
    pub fn connected(&self) -> bool {
        self.connection_status == 2
    }
}

/// The status of one pysyncobj node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftStatus {
    pub version: String,
    /// Always `deprecated` in practice.
    pub revision: Option<String>,
    /// `host:port` of the queried node.
    pub self_node: String,
    pub state: RaftState,
    /// The node this one believes is leader; may be stale on an isolated follower.
    pub leader: Option<String>,
    /// Reported `has_quorum`, or derived when the key is absent (pysyncobj < 0.3.11).
    pub has_quorum: bool,
    /// Whether `has_quorum` came from the node.
    pub has_quorum_reported: bool,
    pub partner_nodes_count: i64,
    pub readonly_nodes_count: i64,
    pub log_len: i64,
    pub last_applied: i64,
    pub commit_idx: i64,
    pub raft_term: i64,
    /// `None` until the node has heard from a leader.
    pub leader_commit_idx: Option<i64>,
    pub uptime_seconds: i64,
    pub self_code_version: i64,
    pub enabled_code_version: i64,
    /// From `partner_node_status_server_<id>`, sorted by node.
    pub partners: Vec<PartnerStatus>,
    /// From `match_idx_server_<id>`, sorted by id (ids may be read-only counters).
    pub match_idx: Vec<(String, i64)>,
    /// From `next_node_idx_server_<id>`, sorted by id.
    pub next_idx: Vec<(String, i64)>,
}

/// One status value, flattened from either source. Borrowed from the source: of a status,
/// only the few strings [`RaftStatus`] keeps are copied, not its two dozen keys.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Field<'a> {
    None,
    Bool(bool),
    Int(i64),
    /// A `str`, or a node object reduced to its id.
    Text(&'a str),
    /// Untyped `str(value)` text from `syncobj_admin`; interpreted per key.
    Raw(&'a str),
    /// A value of a type no status key uses.
    Other(&'static str),
}

/// Flattened status dict. Later duplicates of a key win, like in a Python dict.
#[derive(Debug, Default)]
pub(crate) struct Fields<'a>(pub(crate) BTreeMap<&'a str, Field<'a>>);

const PARTNER_PREFIX: &str = "partner_node_status_server_";
const MATCH_PREFIX: &str = "match_idx_server_";
const NEXT_PREFIX: &str = "next_node_idx_server_";

fn shape(msg: String) -> RaftError {
    RaftError::decode(format!("status: {msg}"))
}

impl Fields<'_> {
    fn get(&self, key: &str) -> Result<&Field<'_>, RaftError> {
        self.0
            .get(key)
            .ok_or_else(|| shape(format!("missing key {key:?}")))
    }

    fn int_of(key: &str, f: &Field) -> Result<i64, RaftError> {
        match f {
            Field::Int(i) => Ok(*i),
            Field::Raw(s) => s
                .parse::<i64>()
                .map_err(|_| shape(format!("{key}: {s:?} is not an integer"))),
            other => Err(shape(format!(
                "{key}: expected int, got {}",
                type_of(other)
            ))),
        }
    }

    fn int(&self, key: &str) -> Result<i64, RaftError> {
        Self::int_of(key, self.get(key)?)
    }

    /// Absent keys default to 0 (keys added in later pysyncobj versions).
    fn int_or_zero(&self, key: &str) -> Result<i64, RaftError> {
        self.0.get(key).map_or(Ok(0), |f| Self::int_of(key, f))
    }

    fn opt_int(&self, key: &str) -> Result<Option<i64>, RaftError> {
        match self.0.get(key) {
            None | Some(Field::None) => Ok(None),
            Some(Field::Raw("None")) => Ok(None),
            Some(f) => Self::int_of(key, f).map(Some),
        }
    }

    fn text(&self, key: &str) -> Result<String, RaftError> {
        match self.get(key)? {
            Field::Text(s) | Field::Raw(s) => Ok((*s).to_owned()),
            other => Err(shape(format!(
                "{key}: expected str, got {}",
                type_of(other)
            ))),
        }
    }

    fn opt_text(&self, key: &str) -> Result<Option<String>, RaftError> {
        match self.0.get(key) {
            None | Some(Field::None) => Ok(None),
            Some(Field::Raw("None")) => Ok(None),
            Some(Field::Text(s) | Field::Raw(s)) => Ok(Some((*s).to_owned())),
            Some(other) => Err(shape(format!(
                "{key}: expected str, got {}",
                type_of(other)
            ))),
        }
    }

    fn opt_bool(&self, key: &str) -> Result<Option<bool>, RaftError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(Field::Bool(b)) => Ok(Some(*b)),
            Some(Field::Raw("True")) => Ok(Some(true)),
            Some(Field::Raw("False")) => Ok(Some(false)),
            Some(other) => Err(shape(format!("{key}: expected bool, got {other:?}"))),
        }
    }

    fn suffixed_ints(&self, prefix: &str) -> Result<Vec<(String, i64)>, RaftError> {
        // BTreeMap iteration is ordered by full key, hence by suffix within one prefix.
        self.0
            .range(prefix..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, f)| Ok((k[prefix.len()..].to_string(), Self::int_of(k, f)?)))
            .collect()
    }

    /// Builds the typed status.
    pub(crate) fn build(&self) -> Result<RaftStatus, RaftError> {
        let self_node = self
            .opt_text("self")?
            .ok_or_else(|| shape("self is None (read-only node?)".into()))?;
        let partners: Vec<PartnerStatus> = self
            .suffixed_ints(PARTNER_PREFIX)?
            .into_iter()
            .map(|(node, connection_status)| PartnerStatus {
                node,
                connection_status,
            })
            .collect();
        let partner_nodes_count = self.int("partner_nodes_count")?;
        let reported = self.opt_bool("has_quorum")?;
        let has_quorum = reported.unwrap_or_else(|| {
            // pysyncobj >= 0.3.11: (connected partners + 1) > (partners + 1) / 2, with
            // Python 3 true division; doubled to stay in integers.
            let connected = partners.iter().filter(|p| p.connected()).count() as i64;
            2 * (connected + 1) > partner_nodes_count + 1
        });
        Ok(RaftStatus {
            version: self.text("version")?,
            revision: self.opt_text("revision")?,
            self_node,
            state: RaftState::from_code(self.int("state")?),
            leader: self.opt_text("leader")?,
            has_quorum,
            has_quorum_reported: reported.is_some(),
            partner_nodes_count,
            readonly_nodes_count: self.int_or_zero("readonly_nodes_count")?,
            log_len: self.int("log_len")?,
            last_applied: self.int("last_applied")?,
            commit_idx: self.int("commit_idx")?,
            raft_term: self.int("raft_term")?,
            leader_commit_idx: self.opt_int("leader_commit_idx")?,
            uptime_seconds: self.int("uptime")?,
            self_code_version: self.int_or_zero("self_code_version")?,
            enabled_code_version: self.int_or_zero("enabled_code_version")?,
            partners,
            match_idx: self.suffixed_ints(MATCH_PREFIX)?,
            next_idx: self.suffixed_ints(NEXT_PREFIX)?,
        })
    }
}

fn type_of(f: &Field) -> &'static str {
    match f {
        Field::None => "None",
        Field::Bool(_) => "bool",
        Field::Int(_) => "int",
        Field::Text(_) | Field::Raw(_) => "str",
        Field::Other(t) => t,
    }
}

/// The keys of a pysyncobj node object's id, in the order tried: `_id`, else
/// `_TCPNode__address`.
const NODE_ID_KEYS: [&str; 2] = ["_id", "_TCPNode__address"];

/// One status value as a [`Field`]: a node object (`id` reads its id) reduced to its id.
fn field_of<'a>(
    scalar: Scalar<'a>,
    id: impl FnOnce() -> Option<&'a str>,
) -> Result<Field<'a>, RaftError> {
    Ok(match scalar {
        Scalar::None => Field::None,
        Scalar::Bool(flag) => Field::Bool(flag),
        Scalar::Int(int) => Field::Int(int),
        Scalar::Str(text) => Field::Text(text),
        Scalar::Object => Field::Text(id().ok_or_else(|| shape("node object without _id".into()))?),
        Scalar::Other(kind) => Field::Other(kind),
    })
}

fn not_a_dict(kind: &str) -> RaftError {
    shape(format!("reply is a {kind}, not a dict"))
}

/// Maps the decoded reply dict to a [`RaftStatus`]. Pure; unknown keys are ignored.
pub fn status_from_value(v: &Value) -> Result<RaftStatus, RaftError> {
    let Value::Dict(pairs) = v else {
        return Err(not_a_dict(v.type_name()));
    };
    status_of(pairs.iter().map(|(k, v)| {
        let id = || {
            NODE_ID_KEYS
                .iter()
                .find_map(|key| v.get(key).and_then(Value::as_str))
        };
        (k.as_str(), move || field_of(v.scalar(), id))
    }))
}

/// [`status_from_value`] of a reply read in place ([`super::pickle::decode_with`]): the
/// same mapping, without the [`Value`] tree.
pub fn status_from_node(v: Node<'_>) -> Result<RaftStatus, RaftError> {
    let entries = match v.entries() {
        Some(entries) if v.type_name() == "dict" => entries,
        _ => return Err(not_a_dict(v.type_name())),
    };
    status_of(entries.map(|(k, v)| {
        let id = move || {
            NODE_ID_KEYS
                .iter()
                .find_map(|key| v.get(key).and_then(Node::as_str))
        };
        (k.as_str(), move || field_of(v.scalar(), id))
    }))
}

/// The status of a reply dict's entries, each a key (`None`: not a `str`, passed over, as
/// pysyncobj uses none) and how to read its value.
fn status_of<'a, F>(
    entries: impl Iterator<Item = (Option<&'a str>, F)>,
) -> Result<RaftStatus, RaftError>
where
    F: FnOnce() -> Result<Field<'a>, RaftError>,
{
    let mut fields = Fields::default();
    for (key, field) in entries {
        if let Some(key) = key {
            fields.0.insert(key, field()?);
        }
    }
    fields.build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_kind::ErrorKind;

    fn fields<'a>(pairs: &[(&'a str, Field<'a>)]) -> Fields<'a> {
        Fields(pairs.iter().map(|(k, v)| (*k, v.clone())).collect())
    }

    fn base() -> Vec<(&'static str, Field<'static>)> {
        vec![
            ("version", Field::Text("0.3.10")),
            ("self", Field::Text("a:1")),
            ("state", Field::Int(0)),
            ("leader", Field::None),
            ("partner_nodes_count", Field::Int(2)),
            ("log_len", Field::Int(1)),
            ("last_applied", Field::Int(1)),
            ("commit_idx", Field::Int(1)),
            ("raft_term", Field::Int(1)),
            ("uptime", Field::Int(1)),
        ]
    }

    #[test]
    fn derived_quorum() {
        // 3-node cluster: one connected partner is enough (2 > 1.5), none is not.
        for (statuses, expect) in [((2, 0), true), ((0, 0), false), ((2, 2), true)] {
            let mut p = base();
            p.push(("partner_node_status_server_b:1", Field::Int(statuses.0)));
            p.push(("partner_node_status_server_c:1", Field::Int(statuses.1)));
            let s = fields(&p).build().unwrap();
            assert_eq!(s.has_quorum, expect, "{statuses:?}");
            assert!(!s.has_quorum_reported);
            assert_eq!(s.revision, None);
            assert_eq!(s.readonly_nodes_count, 0);
            assert_eq!(s.leader_commit_idx, None);
        }
        // 4-node cluster (3 partners): 1 connected -> 2 > 2 false; 2 connected -> true.
        for (n, expect) in [(1, false), (2, true)] {
            let mut p = base();
            p[4] = ("partner_nodes_count", Field::Int(3));
            let keys = [
                "partner_node_status_server_b",
                "partner_node_status_server_c",
                "partner_node_status_server_d",
            ];
            for (i, k) in keys.iter().enumerate() {
                p.push((k, Field::Int(if i < n { 2 } else { 0 })));
            }
            assert_eq!(fields(&p).build().unwrap().has_quorum, expect, "{n}");
        }
    }

    #[test]
    fn shape_errors() {
        let mut p = base();
        p[2] = ("state", Field::Text("x"));
        assert_eq!(fields(&p).build().unwrap_err().kind(), ErrorKind::Decode);
        let mut p = base();
        p.remove(0);
        assert!(fields(&p)
            .build()
            .unwrap_err()
            .to_string()
            .contains("version"));
        let mut p = base();
        p[1] = ("self", Field::None);
        assert!(fields(&p).build().is_err());
        let mut p = base();
        p.push(("match_idx_server_x", Field::Other("list")));
        assert!(fields(&p).build().is_err());
        assert!(status_from_value(&Value::List(vec![])).is_err());
    }

    #[test]
    fn states() {
        for c in [0, 1, 2, 7, -1] {
            assert_eq!(RaftState::from_code(c).code(), c);
        }
        assert_eq!(RaftState::from_code(1).as_str(), "candidate");
        assert_eq!(RaftState::from_code(9).as_str(), "unknown");
    }
}
