//! The requests of a poll: how a Raft node is asked for its status (natively or through
//! `--raft.command`), and what a member is asked at its `api_url`.
//!
//! Why apart from the poll loop: every request goes out under a permit of the poll
//! (`max_concurrency`) and only to hosts the policy allows; keeping the requests in one
//! place keeps both rules in one place.

use std::sync::Arc;
use std::time::Duration;

use url::Url;

use super::ClusterPoller;
use crate::config::RaftSettings;
use crate::patroni::{self, ClusterView, PatroniError};
use crate::raft::{self, QueryLimits, RaftKey, RaftStatus};
use crate::snapshot::Failure;

/// How one cluster's Raft nodes are asked for their status.
#[derive(Clone)]
pub(super) enum RaftQuery {
    /// The native client, with the key derived once from the password.
    Native {
        key: Option<Arc<RaftKey>>,
        limits: QueryLimits,
    },
    /// An external program (`--raft.command`), for sites that allow only the packaged tool.
    Command {
        argv: Vec<String>,
        password: Option<crate::secret::Secret>,
        timeout: Duration,
    },
}
impl RaftQuery {
    async fn status(&self, node: &str) -> Result<RaftStatus, raft::RaftError> {
        match self {
            RaftQuery::Native { key, limits } => {
                raft::query_status(node, key.as_deref(), limits).await
            }
            RaftQuery::Command {
                argv,
                password,
                timeout,
            } => {
                raft::run_status_command(
                    argv,
                    node,
                    password.as_ref().map(|p| p.expose().as_bytes()),
                    *timeout,
                )
                .await
            }
        }
    }
}
pub(super) async fn raft_query(
    settings: &RaftSettings,
    timeout: Duration,
) -> anyhow::Result<RaftQuery> {
    if let Some(argv) = &settings.command {
        return Ok(RaftQuery::Command {
            argv: argv.clone(),
            password: settings.password.clone(),
            timeout,
        });
    }
    let key = match &settings.password {
        Some(password) => Some(RaftKey::shared(password.expose().as_bytes()).await?),
        None => None,
    };
    Ok(RaftQuery::Native {
        key,
        limits: QueryLimits {
            timeout,
            ..QueryLimits::default()
        },
    })
}
/// What one member answered: its own `/patroni`, and its `/cluster` and `/config` when
/// asked (`None` when not).
pub(super) struct MemberAnswers {
    pub(super) own: Result<(patroni::MemberStatus, Option<patroni::ClockOffset>), Failure>,
    pub(super) cluster: Option<Result<ClusterView, Failure>>,
    pub(super) config: Option<Result<patroni::DynamicConfig, PatroniError>>,
    /// `/liveness` and `/readiness`.
    pub(super) probes: Option<(Result<bool, PatroniError>, Result<bool, PatroniError>)>,
}

/// What to ask a member besides its own `/patroni`.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Wants {
    /// Its own `/cluster` (not the reader's: its view is the one already read).
    pub(super) cluster: bool,
    /// Its own `/config` (the rotation's member, unless it is the reader).
    pub(super) config: bool,
    /// `/liveness` and `/readiness` (the rotation's member).
    pub(super) probes: bool,
}
/// The name of the member of `members` whose REST base is `base`.
pub(super) fn member_at(members: &[patroni::Member], base: &Url) -> Option<String> {
    let base = patroni::base_of(base);
    members
        .iter()
        .find(|m| {
            m.api_url
                .as_deref()
                .and_then(|url| Url::parse(url).ok())
                .is_some_and(|url| patroni::base_of(&url) == base)
        })
        .map(|m| m.name.clone())
}

impl ClusterPoller {
    /// One request to `base` under a permit of the poll; `None` without a base.
    pub(super) async fn ask_preferred<'a, T, F>(
        &'a self,
        base: Option<&'a Url>,
        request: impl FnOnce(&'a Url) -> F,
    ) -> Option<T>
    where
        F: std::future::Future<Output = T>,
    {
        let base = base?;
        let _permit = self.permits.acquire().await;
        Some(request(base).await)
    }

    /// Asks a member (listed or remembered) at its `api_url`: its own `/patroni`, and what
    /// `wants` names of `/cluster`, `/config`, `/liveness` and `/readiness`, concurrently.
    pub(super) async fn fetch_member(
        &self,
        member: &patroni::Member,
        wants: Wants,
    ) -> MemberAnswers {
        let api_url = match self.member_api_url(member) {
            Ok(url) => url,
            Err(failure) => {
                return MemberAnswers {
                    own: Err(failure.clone()),
                    cluster: wants.cluster.then(|| Err(failure.clone())),
                    config: None,
                    probes: None,
                }
            }
        };
        let base = patroni::base_of(&api_url);
        let own = async {
            let _permit = self.permits.acquire().await;
            self.client
                .member_status(&api_url)
                .await
                .map_err(|e| Failure::from(&e))
        };
        let cluster = async {
            if !wants.cluster {
                return None;
            }
            let _permit = self.permits.acquire().await;
            let answer = self.checked_cluster(&base).await;
            Some(answer.map_err(|e| Failure::from(&e)))
        };
        let config = async {
            if !wants.config {
                return None;
            }
            let _permit = self.permits.acquire().await;
            Some(self.client.dynamic_config(&base).await)
        };
        let probe = |name: &'static str| {
            let base = &base;
            async move {
                let _permit = self.permits.acquire().await;
                self.client.probe(base, name).await
            }
        };
        let probes = async {
            if !wants.probes {
                return None;
            }
            let (liveness, readiness) = tokio::join!(probe("liveness"), probe("readiness"));
            Some((liveness, readiness))
        };
        let (own, cluster, config, probes) = tokio::join!(own, cluster, config, probes);
        MemberAnswers {
            own,
            cluster,
            config,
            probes,
        }
    }

    /// A member's `api_url`, if valid and allowed by the policy.
    fn member_api_url(&self, member: &patroni::Member) -> Result<Url, Failure> {
        let Some(api_url) = member
            .api_url
            .as_deref()
            .and_then(|url| Url::parse(url).ok())
        else {
            return Err(Failure {
                kind: "decode",
                message: format!("member {} has no valid api_url", member.name),
            });
        };
        if !self.policy.allows_url(&api_url) {
            return Err(Failure::from(&PatroniError::ApiUrlNotAllowed(format!(
                "{api_url} of member {} (allow its host with --patroni.allow-api-url-hosts)",
                member.name
            ))));
        }
        Ok(api_url)
    }

    /// One status query per target. Targets exist only when Raft is polled (the target
    /// lists are empty without Raft settings), so none is dropped.
    pub(super) fn raft_queries<'a>(
        &'a self,
        targets: &'a [String],
    ) -> impl Iterator<Item = impl std::future::Future<Output = Result<RaftStatus, Failure>> + 'a>
    {
        let query = self.raft.as_ref();
        targets
            .iter()
            .filter_map(move |node| Some(self.query_raft(query?, node)))
    }

    pub(super) async fn query_raft(
        &self,
        query: &RaftQuery,
        node: &str,
    ) -> Result<RaftStatus, Failure> {
        let _permit = self.permits.acquire().await;
        query
            .status(node)
            .await
            .map_err(|error| Failure::from(&error))
    }
}
