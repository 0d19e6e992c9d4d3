//! A received Raft frame end to end: framing, Fernet (with a fixed key, and without),
//! bounded zlib, pickle, and the status mapping. The first byte picks keyed or plain.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use patroni_raft_exporter::raft::{decode_payload, frame, status_from_value, QueryLimits, RaftKey};

fn key() -> &'static RaftKey {
    static KEY: OnceLock<RaftKey> = OnceLock::new();
    KEY.get_or_init(|| RaftKey::derive(b"fuzz-password"))
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let limits = QueryLimits::default();
    let key = (mode & 1 == 1).then(key);
    if let Ok((payload, _)) = frame::split_frame(rest, limits.max_frame_bytes) {
        if let Ok(value) = decode_payload(payload, key, &limits) {
            let _ = status_from_value(&value);
        }
    }
    // The payload without framing too, so the fuzzer need not learn the length prefix.
    if let Ok(value) = decode_payload(rest, key, &limits) {
        let _ = status_from_value(&value);
    }
});
