//! placeholder, rewritten by the core work
pub mod raft;
