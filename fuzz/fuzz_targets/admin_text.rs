//! The `syncobj_admin -status` text parser (`--raft.command` mode) on arbitrary text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use patroni_raft_exporter::raft::parse_admin_text;

fuzz_target!(|data: &[u8]| {
    let _ = parse_admin_text(&String::from_utf8_lossy(data));
});
