//! The Patroni REST parsers (`/cluster`, `/patroni`, `/history`, `/config`) on arbitrary bytes: a value
//! or a `Decode` error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use patroni_raft_exporter::error_kind::ErrorKind;
use patroni_raft_exporter::patroni::{
    parse_cluster, parse_dynamic_config, parse_history, parse_member_status, parse_timestamp,
};

fuzz_target!(|data: &[u8]| {
    for result in [
        parse_cluster(data).map(|_| ()),
        parse_member_status(data).map(|_| ()),
        parse_history(data).map(|_| ()),
        parse_dynamic_config(data).map(|_| ()),
    ] {
        if let Err(error) = result {
            assert_eq!(error.kind(), ErrorKind::Decode);
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_timestamp(text);
    }
});
