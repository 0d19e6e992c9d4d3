//! The hostile-input-safe unpickler on arbitrary bytes, with the production limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use patroni_raft_exporter::raft::pickle::{decode, PickleLimits};
use patroni_raft_exporter::raft::status_from_value;

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = decode(data, PickleLimits::default()) {
        let _ = status_from_value(&value);
    }
});
