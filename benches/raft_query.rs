//! Latency of one Raft status query with a warm key, against a real pysyncobj node.
//!
//! ```sh
//! RAFT_NODE=127.0.0.11:2222 RAFT_PASSWORD_FILE=pw cargo bench --bench raft_query
//! ```
//! Compare with `hyperfine "syncobj_admin -conn 127.0.0.11:2222 -pass ... -status"`.
//! Without `RAFT_NODE` it measures against the in-process fake node (captured reply).
//! It also times decoding a captured leader reply alone (inflate, pickle, the status
//! mapping), the Raft client's own CPU per status that no network figure shows: read in
//! place, as the exporter reads it, and through a `Value` tree, as before.

use std::time::{Duration, Instant};

use patroni_raft_exporter::raft::client::decode_payload_with;
use patroni_raft_exporter::raft::fake::{unwrap_captured_reply, Behaviour, FakeRaftNode};
use patroni_raft_exporter::raft::pickle::Value;
use patroni_raft_exporter::raft::status::{status_from_node, status_from_value};
use patroni_raft_exporter::raft::{decode_payload, query_status, QueryLimits, RaftKey, RaftStatus};

/// Mean time of `decode` over a captured leader status reply as pysyncobj compressed it
/// (`tests/fixtures/pysyncobj/enc_leader_0.3.12/s2c_frame2.zlib`; Fernet is left out: its cost
/// does not depend on the reply's content).
fn decode_mean(iterations: usize, decode: fn(&[u8], &QueryLimits) -> RaftStatus) -> Duration {
    let root = env!("CARGO_MANIFEST_DIR");
    let compressed = std::fs::read(format!(
        "{root}/tests/fixtures/pysyncobj/enc_leader_0.3.12/s2c_frame2.zlib"
    ))
    .unwrap();
    let limits = QueryLimits::default();
    for _ in 0..1000 {
        std::hint::black_box(decode(&compressed, &limits));
    }
    let started = Instant::now();
    for _ in 0..iterations {
        std::hint::black_box(decode(&compressed, &limits));
    }
    started.elapsed() / iterations as u32
}

/// The exporter's path: the reply's `(key, status)` read in place.
fn in_place(compressed: &[u8], limits: &QueryLimits) -> RaftStatus {
    decode_payload_with(compressed, None, limits, |reply| {
        let status = reply.tuple_items().and_then(|mut pair| pair.nth(1));
        status_from_node(status.expect("(key, status)"))
    })
    .expect("status")
}

/// Through a [`Value`] tree, as the tests read captures.
fn through_tree(compressed: &[u8], limits: &QueryLimits) -> RaftStatus {
    let reply = decode_payload(compressed, None, limits).expect("decode");
    let Value::Tuple(pair) = reply else {
        panic!("not (key, status)")
    };
    status_from_value(&pair[1]).expect("status")
}

fn main() {
    let decodes: usize = std::env::var("DECODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    println!(
        "decoding a captured leader status (inflate, pickle, mapping): mean {:?} over {decodes} \
         read in place (the exporter's path), {:?} through a Value tree",
        decode_mean(decodes, in_place),
        decode_mean(decodes, through_tree)
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let iterations: usize = std::env::var("ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(500);
        let (node, key, _fake) = match std::env::var("RAFT_NODE") {
            Ok(node) => {
                let password = std::env::var("RAFT_PASSWORD_FILE")
                    .map(|path| std::fs::read_to_string(path).unwrap().trim_end().to_owned())
                    .ok();
                (node, password.map(|p| RaftKey::derive(p.as_bytes())), None)
            }
            Err(_) => {
                let root = env!("CARGO_MANIFEST_DIR");
                let wrapped = std::fs::read(format!("{root}/tests/fixtures/pysyncobj/enc_leader_0.3.12/s2c_frame2.pickle")).unwrap();
                let reply = unwrap_captured_reply(&wrapped).unwrap();
                let key = RaftKey::derive(b"s3cret");
                let (addr, fake) = FakeRaftNode::start(Behaviour::Serve(reply), Some(key.clone())).await.unwrap();
                (addr, Some(key), Some(fake))
            }
        };
        let started = Instant::now();
        let _ = RaftKey::derive(b"key derivation, measured once");
        let derive = started.elapsed();
        let limits = QueryLimits::default();
        let mut samples: Vec<Duration> = Vec::with_capacity(iterations);
        for _ in 0..iterations {
            let started = Instant::now();
            query_status(&node, key.as_ref(), &limits).await.expect("status query");
            samples.push(started.elapsed());
        }
        samples.sort();
        let mean = samples.iter().sum::<Duration>() / iterations as u32;
        let pct = |p: f64| samples[((iterations as f64 * p) as usize).min(iterations - 1)];
        println!(
            "raft status query against {node}: {iterations} queries, mean {mean:?}, p50 {:?}, p99 {:?}, max {:?}; key derivation (once per password) {derive:?}",
            pct(0.5),
            pct(0.99),
            samples[iterations - 1]
        );
    });
}
