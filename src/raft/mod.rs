//! Native client for the pysyncobj "utility" protocol: the `syncobj_admin -status`
//! exchange, spoken directly over TCP to a Patroni Raft (pysyncobj) node.
//!
//! Why a native client at all: `syncobj_admin` is a Python process that starts an
//! interpreter for every query, and it can hang for up to 15 minutes against a node that
//! accepts but never answers. The native client does the same exchange without a process
//! (plus one cached PBKDF2 derivation; docs/performance.md compares the two) and is bounded
//! by a caller-given timeout.
//!
//! Layout, one concern per file:
//! * [`frame`]: the 4-byte little-endian length framing (async read/write, size checks);
//! * [`zlib`]: bounded zlib (de)compression (zlib bombs fail fast with bounded memory);
//! * [`fernet`]: the key derivation ([`RaftKey`]) and a hand-written Fernet;
//! * [`pickle`]: a small, hostile-input-safe protocol-2 unpickler ([`pickle::Value`]);
//! * [`request`]: the only pickles this client ever sends (the `status` command);
//! * [`status`]: the pure mapping from the status dict to [`RaftStatus`];
//! * [`admin_text`]: the same mapping from `syncobj_admin -status` text output;
//! * [`client`]: [`query_status`], the network exchange and handshake;
//! * [`command`]: [`run_status_command`], the `--raft.command` mode (external program);
//! * [`timing`]: pysyncobj's timing settings and defaults ([`RaftSetting`]), which Patroni 4.2
//!   makes configurable;
//! * `fake` (feature `testkit` only): an in-process fake node for tests and benchmarks.
//!
//! Safety property: this module can only ever send the `['status']` utility command.
//! Other utility commands (`add`, `remove`, `set_version`, `transfer`) change the
//! cluster, and an *unknown* command ends a Patroni Raft node's event loop on every
//! pysyncobj version from 0.3.12 to 0.3.17: the transport raises on it, and Patroni ticks
//! the node in a thread of its own that does not catch exceptions (pysyncobj's own auto-tick
//! thread survives it since 0.3.14). The node stops answering while its partners still count
//! it connected (seen on Patroni 3.3.8 with 0.3.12 and 0.3.17, tests/e2e/README.md). The
//! only request constructors, in `request` (private to this module, like its pickle
//! writer), take no command argument at all.
//!
//! Nothing in this module depends on the rest of the crate (only `std` and external
//! crates), so it can be built and tested on its own.

pub mod admin_text;
pub mod client;
pub mod command;
pub mod error;
#[cfg(feature = "testkit")]
pub mod fake;
pub mod fernet;
pub mod frame;
pub mod pickle;
mod request;
pub mod status;
pub mod timing;
pub mod zlib;

#[cfg(test)]
mod tests;

use std::time::Duration;

pub use admin_text::parse_admin_text;
pub use client::{decode_payload, query_raw, query_status, query_status_timed};
pub use command::run_status_command;
pub use error::RaftError;
pub use fernet::RaftKey;
pub use status::{status_from_value, PartnerStatus, RaftState, RaftStatus};
pub use timing::{RaftSetting, RaftTimingConfig};

/// Resource limits for one status query. Every limit applies to hostile input too: a
/// peer that is not a pysyncobj node, or a compromised one, cannot make the client
/// allocate more than about `max_frame_bytes + max_decompressed_bytes` plus the pickle
/// item budget, nor run longer than `timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryLimits {
    /// Deadline for the whole query: connect, handshake, request and reply.
    pub timeout: Duration,
    /// Largest frame payload accepted (checked before allocating). Default 1 MiB; a real
    /// status reply of a 3-node cluster is under 1 KiB.
    pub max_frame_bytes: usize,
    /// Largest decompressed pickle accepted. Default 4 MiB.
    pub max_decompressed_bytes: usize,
    /// The limits of the reply's pickle: nesting depth and object count.
    pub pickle: pickle::PickleLimits,
}

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits {
            timeout: Duration::from_secs(5),
            max_frame_bytes: 1 << 20,
            max_decompressed_bytes: 4 << 20,
            pickle: pickle::PickleLimits::default(),
        }
    }
}
