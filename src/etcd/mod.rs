//! The etcd v3 source: what the etcd cluster under a Patroni cluster says of itself, and
//! the keys Patroni keeps in it.
//!
//! Why the JSON gateway and not gRPC: Patroni itself talks to etcd through the gateway
//! (`/v3/...` over HTTP/1.1, urllib3), so reading it the same way sees what Patroni sees,
//! through the same listener, TLS and auth; and it needs nothing beyond the HTTP client the
//! exporter already has (the gRPC crates bring tonic, prost and a `protoc` build step).
//! Every 3.4+ member serves it on its client URLs.
//!
//! Read-only: the only requests ever sent are `POST /v3/maintenance/status`,
//! `/v3/cluster/member/list`, `/v3/maintenance/alarm` with `{"action":"GET"}` (never
//! another action, and only when `Status` was refused: etcd serves an alarm GET as a Raft
//! proposal, so the alarms are read from the status's `errors[]`), `/v3/kv/range`,
//! `/v3/lease/timetolive`, `/v3/auth/authenticate` (for a token, when a user is configured),
//! and `GET /health` (only when `Status` was refused: on 3.4 it is a Raft proposal too) and
//! `GET /version`.
//!
//! This module knows HTTP and etcd's JSON, nothing of Prometheus, of the poller or of the
//! other sources. [`read_cluster`] makes one reading of a cluster for the poller; the
//! judgements (quorum, which member is behind) are the snapshot's.

mod client;
mod error;
#[cfg(any(test, feature = "testkit"))]
pub mod fake;
mod model;
mod reading;

pub use client::{ClientSettings, EtcdClient, Timed};
pub use error::EtcdError;
pub use model::{
    grpc_code, parse_alarms, parse_gateway_error, parse_health, parse_lease_time_to_live,
    parse_member_list, parse_patroni_keys, parse_range, parse_status, parse_token, parse_versions,
    patroni_prefix, prefix_range_end, Alarm, AlarmType, ConfigKey, DowngradeInfo, EndpointStatus,
    GatewayError, Health, KeyValue, LeaderKey, LeaseTimeToLive, Member, MemberKey, MemberList,
    PatroniKeys, RangeAnswer, ResponseHeader, StatusKey, SyncKey, Versions,
};
pub use reading::{
    listed_client_urls, read_cluster, same_endpoint, ClusterFacts, EndpointReading, EtcdReading,
};
