//! `GET /cluster`: the DCS view of one member's Raft replica.

use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use url::Url;

use super::role::{MemberRole, MemberState};
use super::tags::{tags_from_json, MemberTags};
use crate::patroni::PatroniError;

/// `GET /cluster`: the cluster as the DCS (here: the local Raft replica) describes it.
///
/// Without Raft quorum this is a *frozen* copy of the last replicated state, served with
/// status 200: it must never be read as proof of health on its own.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ClusterView {
    /// The cluster name; Patroni adds it to the document (absent only in very old versions).
    #[serde(default)]
    pub scope: Option<String>,
    /// Members whose DCS key exists, sorted by name by Patroni.
    pub members: Vec<Member>,
    /// Present (and true) only in maintenance mode.
    #[serde(default)]
    pub pause: bool,
    /// A scheduled switchover, if any; only its presence is used.
    #[serde(default)]
    pub scheduled_switchover: Option<serde_json::Value>,
}

/// One entry of `/cluster`'s `members`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct Member {
    pub name: String,
    /// `leader`, `standby_leader`, `sync_standby`, `quorum_standby` (4.0+), `replica`, or any
    /// value a future Patroni invents.
    pub role: MemberRole,
    /// The Postgres state, or for replicas the replication state (`streaming`,
    /// `in archive recovery`).
    pub state: MemberState,
    /// URL of the member's own `GET /patroni`.
    #[serde(default)]
    pub api_url: Option<ApiUrl>,
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub port: Option<u32>,
    /// Missing (or null) while the member is stopped or shutting down.
    #[serde(default)]
    pub timeline: Option<u64>,
    /// Bytes behind the leader (up to 4.0: `last_lsn - xlog_location`; 4.1: the write lag).
    #[serde(default)]
    pub lag: Option<Lag>,
    /// Patroni 4.1+ only.
    #[serde(default)]
    pub receive_lag: Option<Lag>,
    /// Patroni 4.1+ only.
    #[serde(default)]
    pub replay_lag: Option<Lag>,
    #[serde(default)]
    pub pending_restart: bool,
    /// The member's tags as the DCS holds them (`/cluster` lists them from Patroni 2.0).
    #[serde(default, deserialize_with = "tags_from_json")]
    pub tags: MemberTags,
}

/// A member's `api_url`, parsed when it is first used.
///
/// The text is kept as the member sent it: the `api_url` label says what Patroni says, not
/// the URL library's rewrite of it (a default port dropped, a host lower-cased). A text that
/// is no URL is kept too, with no [`url`](Self::url): the member is listed, but not asked.
///
/// Shared, not copied, when cloned: a member is cloned into the poller's memory and into
/// its snapshot in every poll, and its text and URL were two strings each time.
///
/// Parsed when first used, and once: every `/cluster` names each member's `api_url` again,
/// and the poller takes the last poll's, parsed, where the text is the same
/// ([`ApiUrl::adopt`]). So a URL is parsed when it changes, not once per member and poll
/// (`url`'s host parser and its IDNA pass: ~1 % of the exporter's CPU at N = 1000,
/// docs/bench/profile-n1000.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(from = "String")]
pub struct ApiUrl(Arc<ParsedApiUrl>);

#[derive(Debug, Default)]
struct ParsedApiUrl {
    text: String,
    url: OnceLock<Option<Url>>,
}

impl ApiUrl {
    /// The `api_url` as the member sent it.
    pub fn as_str(&self) -> &str {
        &self.0.text
    }

    /// The URL it names; `None` when the text is no URL.
    pub fn url(&self) -> Option<&Url> {
        self.0
            .url
            .get_or_init(|| Url::parse(&self.0.text).ok())
            .as_ref()
    }

    /// Takes `earlier`'s parse (shares it) when it is of the same text.
    pub fn adopt(&mut self, earlier: &ApiUrl) {
        if !Arc::ptr_eq(&self.0, &earlier.0) && self.0.text == earlier.0.text {
            *self = earlier.clone();
        }
    }
}

/// Equal when the texts are: the URL is a function of the text, parsed or not yet.
impl PartialEq for ApiUrl {
    fn eq(&self, other: &ApiUrl) -> bool {
        self.0.text == other.0.text
    }
}

impl Eq for ApiUrl {}

impl From<String> for ApiUrl {
    fn from(text: String) -> Self {
        ApiUrl(Arc::new(ParsedApiUrl {
            text,
            url: OnceLock::new(),
        }))
    }
}

impl From<&str> for ApiUrl {
    fn from(text: &str) -> Self {
        ApiUrl::from(text.to_owned())
    }
}

/// An `api_url` the exporter built itself (a voter's REST API, guessed from its host).
impl From<Url> for ApiUrl {
    fn from(url: Url) -> Self {
        ApiUrl(Arc::new(ParsedApiUrl {
            text: url.to_string(),
            url: OnceLock::from(Some(url)),
        }))
    }
}

/// A lag as Patroni reports it: bytes, or the string `unknown`.
#[derive(Debug, Clone, PartialEq)]
pub enum Lag {
    Bytes(u64),
    Text(String),
}

/// By the JSON value's own type, not `#[serde(untagged)]`, which buffers each value and tries
/// the variants in turn (three lags per replica in every `/cluster`).
impl<'de> Deserialize<'de> for Lag {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Lag, D::Error> {
        struct BytesOrText;
        impl serde::de::Visitor<'_> for BytesOrText {
            type Value = Lag;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a lag in bytes or a string")
            }
            fn visit_u64<E: serde::de::Error>(self, bytes: u64) -> Result<Lag, E> {
                Ok(Lag::Bytes(bytes))
            }
            fn visit_i64<E: serde::de::Error>(self, bytes: i64) -> Result<Lag, E> {
                u64::try_from(bytes)
                    .map(Lag::Bytes)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(bytes), &self))
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Lag, E> {
                Ok(Lag::Text(text.to_owned()))
            }
        }
        deserializer.deserialize_any(BytesOrText)
    }
}

impl Lag {
    /// The lag in bytes, or `None` when Patroni does not know it.
    pub fn bytes(&self) -> Option<u64> {
        match self {
            Lag::Bytes(bytes) => Some(*bytes),
            Lag::Text(_) => None,
        }
    }
}

impl Member {
    /// Whether `/cluster` names this member as the holder of the leader key.
    pub fn is_leader(&self) -> bool {
        self.role.is_leader()
    }
}

impl ClusterView {
    /// The members that hold the leader key according to the DCS view.
    pub fn leaders(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|member| member.is_leader())
    }

    /// The leader's timeline, when exactly one leader reports one.
    pub fn leader_timeline(&self) -> Option<u64> {
        let mut leaders = self.leaders();
        let leader = leaders.next()?;
        if leaders.next().is_some() {
            return None;
        }
        leader.timeline
    }
}

/// Parses `GET /cluster`.
///
/// # Errors
/// [`PatroniError::Json`] when the body is not JSON of the documented shape.
pub fn parse_cluster(body: &[u8]) -> Result<ClusterView, PatroniError> {
    Ok(serde_json::from_slice(body)?)
}

/// A member's own `GET /cluster` as far as it is compared with the other members' views:
/// who has a key, its role, its timeline.
///
/// Why not a [`ClusterView`]: every poll reads every member's own view, and only the
/// reader's is used whole. The others' `api_url`s (a [`Url`] parsed each), hosts, lags and
/// tags were parsed and dropped in every poll of every cluster. The fields kept are read and
/// required as [`ClusterView`] reads them, so what one refuses of them the other refuses too;
/// the fields left out are skipped unread.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ComparedView {
    /// The cluster name, as in [`ClusterView::scope`].
    #[serde(default)]
    pub scope: Option<String>,
    pub members: Vec<ComparedMember>,
}

/// One entry of `/cluster`'s `members`, as far as [`ComparedView`] reads it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ComparedMember {
    pub name: String,
    pub role: MemberRole,
    /// Read (and required) as in [`Member`], though not compared.
    pub state: MemberState,
    #[serde(default)]
    pub timeline: Option<u64>,
}

/// Parses a `GET /cluster` body as far as [`ComparedView`] reads it.
///
/// # Errors
/// [`PatroniError::Decode`] when the kept fields are missing or of the wrong type.
pub fn parse_compared_view(body: &[u8]) -> Result<ComparedView, PatroniError> {
    Ok(serde_json::from_slice(body)?)
}
