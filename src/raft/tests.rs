//! Cross-file tests of the raft module: captured vectors, the fake node, fuzzing.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::fake::{unwrap_captured_reply, Behaviour, FakeRaftNode};
use super::pickle::{self, PickleLimits, Value};
use super::{
    decode_payload, fernet, frame, parse_admin_text, query_status, status::status_from_value, zlib,
    QueryLimits, RaftKey, RaftState, RaftStatus,
};
use crate::error_kind::ErrorKind;

const CASES: [&str; 12] = [
    "enc_follower_0.3.12",
    "enc_follower_0.3.15",
    "enc_leader_0.3.12",
    "enc_leader_0.3.15",
    "enc_leader_patroni_0.3.17",
    "enc_leader_readonly_0.3.17",
    "enc_noquorum_stale_leader_0.3.12",
    "enc_restarted_alone_0.3.12",
    "enc_restarted_alone_0.3.15",
    "enc_restarted_alone_0.3.17",
    "plain_follower_0.3.12",
    "plain_noleader_0.3.12",
];

fn fixture_dir(case: &str) -> String {
    format!(
        "{}/tests/fixtures/pysyncobj/{case}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn read(case: &str, file: &str) -> Vec<u8> {
    let p = format!("{}/{file}", fixture_dir(case));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

struct Case {
    password: Option<String>,
    reply_pickle: String,
}

fn case(name: &str) -> Case {
    let json: serde_json::Value = serde_json::from_slice(&read(name, "case.json")).unwrap();
    Case {
        password: json["password"].as_str().map(str::to_string),
        reply_pickle: json["reply_pickle"].as_str().unwrap().to_string(),
    }
}

/// PBKDF2 is slow in debug builds: derive each password once per test binary.
fn key_for(password: &str) -> RaftKey {
    static KEYS: OnceLock<Mutex<HashMap<String, RaftKey>>> = OnceLock::new();
    let map = KEYS.get_or_init(Default::default);
    let mut map = map.lock().unwrap();
    map.entry(password.to_string())
        .or_insert_with(|| RaftKey::derive(password.as_bytes()))
        .clone()
}

fn limits() -> QueryLimits {
    QueryLimits::default()
}

fn plim() -> PickleLimits {
    PickleLimits::default()
}

/// The status dict of a case's reply pickle (unwrapping `(ck, dict)` in keyed cases).
fn reply_dict(name: &str) -> Value {
    let c = case(name);
    let v = pickle::decode(&read(name, &c.reply_pickle), plim()).unwrap();
    if c.password.is_some() {
        let ck = pickle::decode(&read(name, "c2s_frame1.pickle"), plim()).unwrap();
        let Value::Tuple(t) = v else {
            panic!("{name}: keyed reply is not a tuple")
        };
        assert_eq!(t.len(), 2);
        assert_eq!(t[0], ck, "{name}: reply bound to the client key");
        t[1].clone()
    } else {
        v
    }
}

/// Renders a status the way `syncobj_admin -status` prints it (sorted `key: value`).
/// `readonly_node_status_server_*` lines are not modelled by `RaftStatus`.
fn render_admin(s: &RaftStatus) -> Vec<String> {
    let py_bool = |b: bool| if b { "True" } else { "False" }.to_string();
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "None".into());
    let mut lines = vec![
        format!("commit_idx: {}", s.commit_idx),
        format!("enabled_code_version: {}", s.enabled_code_version),
        format!("has_quorum: {}", py_bool(s.has_quorum)),
        format!("last_applied: {}", s.last_applied),
        format!("leader: {}", opt(&s.leader)),
        format!(
            "leader_commit_idx: {}",
            s.leader_commit_idx.map_or("None".into(), |v| v.to_string())
        ),
        format!("log_len: {}", s.log_len),
        format!("match_idx_count: {}", s.match_idx.len()),
        format!("next_node_idx_count: {}", s.next_idx.len()),
        format!("partner_nodes_count: {}", s.partner_nodes_count),
        format!("raft_term: {}", s.raft_term),
        format!("readonly_nodes_count: {}", s.readonly_nodes_count),
        format!("revision: {}", opt(&s.revision)),
        format!("self: {}", s.self_node),
        format!("self_code_version: {}", s.self_code_version),
        format!("state: {}", s.state.code()),
        format!("uptime: {}", s.uptime_seconds),
        format!("version: {}", s.version),
    ];
    lines.extend(
        s.match_idx
            .iter()
            .map(|(k, v)| format!("match_idx_server_{k}: {v}")),
    );
    lines.extend(
        s.next_idx
            .iter()
            .map(|(k, v)| format!("next_node_idx_server_{k}: {v}")),
    );
    lines.extend(s.partners.iter().map(|p| {
        format!(
            "partner_node_status_server_{}: {}",
            p.node, p.connection_status
        )
    }));
    lines.sort();
    lines
}

fn expected_lines(name: &str) -> Vec<String> {
    let text = String::from_utf8(read(name, "expected_admin.txt")).unwrap();
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with("readonly_node_status_server_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_captured_reply_matches_syncobj_admin_output() {
    for name in CASES {
        let status = status_from_value(&reply_dict(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(render_admin(&status), expected_lines(name), "{name}");
        assert!(status.has_quorum_reported, "{name}");
        // the text parser gives the very same value
        let text = String::from_utf8(read(name, "expected_admin.txt")).unwrap();
        assert_eq!(parse_admin_text(&text).unwrap(), status, "{name}");
    }
}

/// The status of a case's reply read in place (the exporter's path: no [`Value`] tree), the
/// keyed reply's `(client key, dict)` unwrapped there too.
fn status_in_place(name: &str) -> RaftStatus {
    let c = case(name);
    let ck = c
        .password
        .is_some()
        .then(|| pickle::decode(&read(name, "c2s_frame1.pickle"), plim()).unwrap());
    pickle::decode_with(&read(name, &c.reply_pickle), plim(), |reply| {
        let dict = match &ck {
            Some(Value::Bytes(sent)) => {
                let mut items = reply.tuple_items().expect("a (key, dict) tuple");
                assert_eq!(items.len(), 2, "{name}");
                let key = items.next().unwrap();
                assert_eq!(key.as_bytes(), Some(&sent[..]), "{name}");
                items.next().unwrap()
            }
            Some(other) => panic!(
                "{name}: the client's first frame is a {}",
                other.type_name()
            ),
            None => reply,
        };
        super::status::status_from_node(dict)
    })
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn a_reply_read_in_place_is_the_status_of_its_value_tree() {
    for name in CASES {
        let tree = status_from_value(&reply_dict(name)).unwrap();
        assert_eq!(status_in_place(name), tree, "{name}");
    }
    // what is not a dict is refused alike, by the same words
    let list = super::request::PickleWriter::new()
        .str_list(&["status"])
        .finish();
    let in_place = pickle::decode_with(&list, plim(), super::status::status_from_node);
    let tree = status_from_value(&pickle::decode(&list, plim()).unwrap());
    assert_eq!(
        in_place.unwrap_err().to_string(),
        tree.unwrap_err().to_string()
    );
    // a value nested 20 000 deep inside the dict is read as a list, never walked
    let mut deep = b"\x80\x02}(X\x04\x00\x00\x00self".to_vec();
    deep.extend(vec![b']'; 20_000]);
    deep.extend(vec![b'a'; 19_999]);
    deep.extend(b"u.");
    let error = pickle::decode_with(&deep, plim(), super::status::status_from_node).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Decode);
    assert!(error.to_string().contains("got list"), "{error}");
}

#[test]
fn specific_cases() {
    let leader = status_from_value(&reply_dict("enc_leader_0.3.12")).unwrap();
    // §6.2: the leader is a BINGET of self; it must decode to the node id, not `{}`.
    assert_eq!(leader.state, RaftState::Leader);
    assert_eq!(leader.leader.as_deref(), Some("127.0.0.1:6003"));
    assert_eq!(leader.self_node, "127.0.0.1:6003");
    assert_eq!(leader.revision.as_deref(), Some("deprecated"));

    let stale = status_from_value(&reply_dict("enc_noquorum_stale_leader_0.3.12")).unwrap();
    assert!(!stale.has_quorum);
    assert_eq!(stale.leader.as_deref(), Some("127.0.0.1:6003"));
    assert!(stale.partners.iter().all(|p| !p.connected()));

    let noleader = status_from_value(&reply_dict("plain_noleader_0.3.12")).unwrap();
    assert_eq!(noleader.leader, None);
    assert_eq!(noleader.state, RaftState::Follower);
    assert_eq!(noleader.match_idx.len(), 2);

    let ro = status_from_value(&reply_dict("enc_leader_readonly_0.3.17")).unwrap();
    assert_eq!(ro.readonly_nodes_count, 1);
    assert_eq!(ro.match_idx[0], ("0".to_string(), 133));
    assert_eq!(ro.version, "0.3.17");
    assert_eq!(ro.log_len, 134);
}

#[test]
fn pysyncobj_0_3_15_as_the_charm_shipped_it_from_june_to_september() {
    // tests/e2e/capture-frames.sh 0.3.15: 3 nodes with journal files, 5 writes.
    let leader = status_from_value(&reply_dict("enc_leader_0.3.15")).unwrap();
    assert_eq!(leader.version, "0.3.15");
    assert_eq!(leader.state, RaftState::Leader);
    assert_eq!(leader.leader.as_deref(), Some(leader.self_node.as_str()));
    assert!(leader.has_quorum);
    assert_eq!(leader.partners.len(), 2);
    assert!(leader.partners.iter().all(|p| p.connected()));
    assert_eq!(leader.match_idx.len(), 2);
    assert_eq!((leader.commit_idx, leader.last_applied), (7, 7));
    assert_eq!(leader.raft_term, 1);

    let follower = status_from_value(&reply_dict("enc_follower_0.3.15")).unwrap();
    assert_eq!(follower.version, "0.3.15");
    assert_eq!(follower.state, RaftState::Follower);
    assert_eq!(follower.leader, leader.leader);
    assert!(follower.match_idx.is_empty() && follower.next_idx.is_empty());
    assert_eq!(follower.leader_commit_idx, Some(7));
    assert_eq!(follower.raft_term, leader.raft_term);
}

#[test]
fn a_restart_keeps_the_term_from_pysyncobj_0_3_16_on() {
    // Each node ran at term 1 with commit_idx 7, was stopped with its partners and started
    // alone, then captured before its first election (tests/e2e/capture-frames.sh V
    // restarted_alone). 0.3.16 persists currentTerm (.journal.meta); before, a restarted node
    // reports term 0 until it hears a leader. The log comes back from the journal on all.
    for (name, term) in [
        ("enc_restarted_alone_0.3.12", 0),
        ("enc_restarted_alone_0.3.15", 0),
        ("enc_restarted_alone_0.3.17", 1),
    ] {
        let s = status_from_value(&reply_dict(name)).unwrap();
        assert_eq!(s.raft_term, term, "{name}");
        assert_eq!(s.state, RaftState::Follower, "{name}");
        assert_eq!(s.leader, None, "{name}");
        assert_eq!(s.leader_commit_idx, None, "{name}");
        assert!(!s.has_quorum, "{name}");
        assert!(s.partners.iter().all(|p| !p.connected()), "{name}");
        assert_eq!(
            (s.commit_idx, s.last_applied, s.log_len),
            (7, 7, 7),
            "{name}"
        );
    }
}

#[test]
fn has_quorum_derivation_agrees_with_reported_values() {
    // Remove has_quorum from each capture: the derived value must equal the reported one.
    for name in CASES {
        let Value::Dict(pairs) = reply_dict(name) else {
            panic!()
        };
        let reported = status_from_value(&Value::Dict(pairs.clone())).unwrap();
        let stripped: Vec<_> = pairs
            .into_iter()
            .filter(|(k, _)| k.as_str() != Some("has_quorum"))
            .collect();
        let derived = status_from_value(&Value::Dict(stripped)).unwrap();
        assert!(!derived.has_quorum_reported);
        assert_eq!(derived.has_quorum, reported.has_quorum, "{name}");
    }
}

#[test]
fn raw_frames_decode_like_the_captured_intermediates() {
    for name in CASES {
        let c = case(name);
        let key = c.password.as_deref().map(key_for);
        let dir = fixture_dir(name);
        let mut frames = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let file = path.file_name().unwrap().to_string_lossy().to_string();
            let Some(stem) = file.strip_suffix(".bin") else {
                continue;
            };
            frames += 1;
            let bin = std::fs::read(&path).unwrap();
            let (payload, rest) = frame::split_frame(&bin, 1 << 20).unwrap();
            assert!(rest.is_empty(), "{name}/{file}");
            let compressed = match &key {
                Some(k) => fernet::decrypt(k, payload).unwrap(),
                None => payload.to_vec(),
            };
            assert_eq!(
                compressed,
                read(name, &format!("{stem}.zlib")),
                "{name}/{file}"
            );
            let pickled = zlib::decompress(&compressed, 4 << 20).unwrap();
            assert_eq!(
                pickled,
                read(name, &format!("{stem}.pickle")),
                "{name}/{file}"
            );
            let v = decode_payload(payload, key.as_ref(), &limits()).unwrap();
            assert_eq!(v, pickle::decode(&pickled, plim()).unwrap());
            if key.is_some() {
                // a wrong key fails on the HMAC, before any decryption
                let other = RaftKey::from_raw([9u8; 32]);
                let e = fernet::decrypt(&other, payload).unwrap_err();
                assert!(e.to_string().contains("HMAC"), "{e}");
            }
        }
        assert_eq!(frames, if c.password.is_some() { 4 } else { 2 }, "{name}");
    }
}

#[test]
fn key_derivation_matches_captures_with_non_ascii_password() {
    // 'p@ss wörd' is UTF-8 encoded by pysyncobj; the frames must verify with our key.
    let name = "enc_leader_readonly_0.3.17";
    let c = case(name);
    assert_eq!(c.password.as_deref(), Some("p@ss w\u{f6}rd"));
    let key = key_for(c.password.as_deref().unwrap());
    let bin = read(name, "s2c_frame2.bin");
    let (payload, _) = frame::split_frame(&bin, 1 << 20).unwrap();
    assert!(fernet::decrypt(&key, payload).is_ok());
    // the node stamped its tokens with seconds since boot, not Unix time
    assert!(fernet::token_timestamp(payload).unwrap() < 1_000_000_000);
}

// ---------------------------------------------------------------------------------
// Against the fake node

fn serve_dict(name: &str) -> Vec<u8> {
    let c = case(name);
    let p = read(name, &c.reply_pickle);
    if c.password.is_some() {
        unwrap_captured_reply(&p).expect("captured keyed reply layout")
    } else {
        p
    }
}

fn short_limits() -> QueryLimits {
    QueryLimits {
        timeout: Duration::from_millis(400),
        ..QueryLimits::default()
    }
}

#[tokio::test]
async fn plain_roundtrip_and_only_status_is_sent() {
    let name = "plain_follower_0.3.12";
    let (addr, node) = FakeRaftNode::start(Behaviour::Serve(serve_dict(name)), None)
        .await
        .unwrap();
    let s = query_status(&addr, None, &limits()).await.unwrap();
    assert_eq!(render_admin(&s), expected_lines(name));
    assert_eq!(
        node.received(),
        vec![Value::List(vec![Value::str("status")])]
    );
}

#[tokio::test]
async fn encrypted_roundtrip_and_only_status_is_sent() {
    for name in ["enc_leader_0.3.12", "enc_leader_readonly_0.3.17"] {
        let key = key_for(case(name).password.as_deref().unwrap());
        let (addr, node) =
            FakeRaftNode::start(Behaviour::Serve(serve_dict(name)), Some(key.clone()))
                .await
                .unwrap();
        let s = query_status(&addr, Some(&key), &limits()).await.unwrap();
        // the fake re-serves the captured dict opcodes, so the self/leader alias survives
        assert_eq!(render_admin(&s), expected_lines(name), "{name}");
        assert_eq!(s, status_from_value(&reply_dict(name)).unwrap());
        let got = node.received();
        assert_eq!(got.len(), 2);
        assert!(matches!(&got[0], Value::Bytes(b) if b.len() == 32));
        let Value::Tuple(t) = &got[1] else {
            panic!("{got:?}")
        };
        assert!(matches!(&t[0], Value::Bytes(b) if b.len() == 32));
        assert_eq!(t[1], Value::List(vec![Value::str("status")]));
    }
}

async fn expect_kind(
    behaviour: Behaviour,
    node_key: Option<RaftKey>,
    client_key: Option<RaftKey>,
    kind: ErrorKind,
) -> String {
    let (addr, _node) = FakeRaftNode::start(behaviour.clone(), node_key)
        .await
        .unwrap();
    let lim = short_limits();
    let t = Instant::now();
    let e = query_status(&addr, client_key.as_ref(), &lim)
        .await
        .expect_err("must fail");
    let label = format!("{:?}", std::mem::discriminant(&behaviour));
    assert_eq!(e.kind(), kind, "{behaviour:?}: {e}");
    assert!(
        t.elapsed() < lim.timeout + Duration::from_secs(1),
        "{label} took {:?}",
        t.elapsed()
    );
    e.to_string()
}

fn good() -> Vec<u8> {
    serve_dict("plain_follower_0.3.12")
}

#[tokio::test]
async fn wrong_or_missing_password_is_auth() {
    let k = key_for("s3cret");
    let other = key_for("wrong");
    let serve = Behaviour::Serve(good());
    // wrong password: the fake fails the HMAC of the first frame and closes
    let msg = expect_kind(serve.clone(), Some(k.clone()), Some(other), ErrorKind::Auth).await;
    assert!(msg.contains("wrong or missing password"), "{msg}");
    // no password against an encrypted node
    expect_kind(serve.clone(), Some(k.clone()), None, ErrorKind::Auth).await;
    // password against a node without one
    expect_kind(serve.clone(), None, Some(k.clone()), ErrorKind::Auth).await;
    // explicit close after the first frame, with and without encryption
    for key in [None, Some(k)] {
        expect_kind(
            Behaviour::CloseAfterFirstFrame,
            key.clone(),
            key,
            ErrorKind::Auth,
        )
        .await;
    }
}

/// Accepts one connection, reads the start of its first frame and closes it, the listener
/// still bound.
async fn close_one_connection(listener: &tokio::net::TcpListener) {
    use tokio::io::AsyncReadExt;
    let (mut conn, _) = listener.accept().await.unwrap();
    let mut buf = [0u8; 4];
    let _ = conn.read_exact(&mut buf).await;
    drop(conn);
}

#[tokio::test]
async fn a_node_shutting_down_is_refused_not_auth() {
    // pysyncobj's shutdown: unbind the server socket, then close the accepted connections.
    // The close alone looks like a refused password; the second connection is refused.
    for key in [None, Some(key_for("s3cret"))] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let node = tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4];
            let _ = conn.read_exact(&mut buf).await;
            drop(listener);
            drop(conn);
        });
        let e = query_status(&addr, key.as_ref(), &short_limits())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Refused, "{e}");
        node.await.unwrap();
    }
}

#[tokio::test]
async fn one_close_then_an_answer_is_the_answer() {
    // A close on one connection and an answer on the next (a node restarting its transport):
    // the status, not `auth`. A wrong password closes both (wrong_or_missing_password_is_auth).
    for key in [None, Some(key_for("s3cret"))] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (serve_key, client_key) = (key.clone(), key);
        let node = tokio::spawn(async move {
            close_one_connection(&listener).await;
            FakeRaftNode::serve(listener, Behaviour::Serve(good()), serve_key).unwrap()
        });
        let status = query_status(&addr, client_key.as_ref(), &short_limits()).await;
        let (_, fake) = node.await.unwrap();
        assert!(status.is_ok(), "{status:?}");
        assert_eq!(
            fake.received().len(),
            if client_key.is_some() { 2 } else { 1 }
        );
    }
}

#[tokio::test]
async fn stalls_time_out() {
    let k = key_for("s3cret");
    for stall in [Behaviour::NeverAnswer, Behaviour::HandshakeThenStall] {
        for key in [None, Some(k.clone())] {
            expect_kind(stall.clone(), key.clone(), key, ErrorKind::Timeout).await;
        }
    }
}

#[tokio::test]
async fn hostile_replies_are_rejected() {
    let k = key_for("s3cret");
    for key in [None, Some(k)] {
        let both = || (key.clone(), key.clone());
        let (nk, ck) = both();
        expect_kind(Behaviour::Garbage, nk, ck, ErrorKind::Decode).await;
        let (nk, ck) = both();
        expect_kind(Behaviour::NonRaft, nk, ck, ErrorKind::Protocol).await;
        let (nk, ck) = both();
        let m = expect_kind(Behaviour::HugeLength, nk, ck, ErrorKind::Protocol).await;
        assert!(m.contains("2147483647"), "{m}");
        let (nk, ck) = both();
        expect_kind(Behaviour::ResetMidFrame, nk, ck, ErrorKind::Protocol).await;
        let (nk, ck) = both();
        let m = expect_kind(Behaviour::ZlibBomb, nk, ck, ErrorKind::Decode).await;
        assert!(m.contains("exceeds the limit"), "{m}");
        let (nk, ck) = both();
        let m = expect_kind(Behaviour::BadHmac, nk, ck, ErrorKind::Decode).await;
        if key.is_some() {
            assert!(m.contains("HMAC"), "{m}");
        }
        let (nk, ck) = both();
        let os_system = b"\x80\x02cos\nsystem\nX\x05\x00\x00\x00touch\x85R.".to_vec();
        let m = expect_kind(Behaviour::RawReply(os_system), nk, ck, ErrorKind::Decode).await;
        assert!(m.contains("forbidden global"), "{m}");
        let (nk, ck) = both();
        let mut deep = b"\x80\x02".to_vec();
        deep.extend(vec![b']'; 20_000]);
        deep.extend(vec![b'a'; 19_999]);
        deep.push(b'.');
        // Read in place, the nesting is never expanded (pickle::decode refuses it as
        // "deeper", its own tests say): refused as what it is, a list.
        let kind = if key.is_some() {
            ErrorKind::Protocol
        } else {
            ErrorKind::Decode
        };
        let m = expect_kind(Behaviour::RawReply(deep), nk, ck, kind).await;
        assert!(m.contains("is a list"), "{m}");
        let (nk, ck) = both();
        // a list where a dict (or the keyed tuple) is expected
        let kind = if key.is_some() {
            ErrorKind::Protocol
        } else {
            ErrorKind::Decode
        };
        expect_kind(
            Behaviour::RawReply(b"\x80\x02]q\x00.".to_vec()),
            nk,
            ck,
            kind,
        )
        .await;
    }
}

#[tokio::test]
async fn keyed_reply_must_be_bound_to_our_key() {
    let k = key_for("s3cret");
    // an unwrapped dict where (ck, dict) is expected
    expect_kind(
        Behaviour::RawReply(good()),
        Some(k.clone()),
        Some(k),
        ErrorKind::Protocol,
    )
    .await;
}

#[tokio::test]
async fn connect_refused_and_bad_address() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    let e = query_status(&addr, None, &short_limits())
        .await
        .unwrap_err();
    // Refused is its own kind: the quorum verdict counts it as a voter that is down.
    assert_eq!(e.kind(), ErrorKind::Refused);
    let e = query_status("not an address", None, &short_limits())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connect);
}

#[tokio::test]
async fn errors_never_contain_the_password() {
    let pw = "hunter2-secret";
    let k = key_for(pw);
    for b in [
        Behaviour::CloseAfterFirstFrame,
        Behaviour::BadHmac,
        Behaviour::Garbage,
    ] {
        let (addr, _n) = FakeRaftNode::start(b, Some(k.clone())).await.unwrap();
        let e = query_status(&addr, Some(&k), &short_limits())
            .await
            .unwrap_err();
        assert!(!format!("{e} {e:?}").contains(pw));
    }
    assert!(!format!("{k:?}").contains(pw));
}

// ---------------------------------------------------------------------------------
// --raft.command mode with fake scripts

#[cfg(unix)]
mod command_mode {
    use super::*;
    use crate::raft::run_status_command;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &tempfile::TempDir, name: &str, body: &str) -> String {
        let p = dir.path().join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p.to_string_lossy().to_string()
    }

    fn expected_path(name: &str) -> String {
        format!("{}/expected_admin.txt", fixture_dir(name))
    }

    #[tokio::test]
    async fn parses_output_and_passes_password_in_env_only() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("seen");
        // The fake admin records its argv and env, then prints a captured status.
        let body = format!(
            "echo \"$@\" > '{o}.args'\nprintf '%s' \"$SYNCOBJ_PASSWORD\" > '{o}.env'\ncat '{e}'",
            o = out.display(),
            e = expected_path("enc_leader_0.3.12")
        );
        let prog = script(&dir, "admin", &body);
        let s = run_status_command(
            std::slice::from_ref(&prog),
            "10.0.0.1:2222",
            Some(b"pw s3cret"),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        assert_eq!(
            s,
            status_from_value(&reply_dict("enc_leader_0.3.12")).unwrap()
        );
        let args = std::fs::read_to_string(format!("{}.args", out.display())).unwrap();
        assert_eq!(args.trim(), "-conn 10.0.0.1:2222 -status");
        let env = std::fs::read_to_string(format!("{}.env", out.display())).unwrap();
        assert_eq!(env, "pw s3cret");

        // {addr} placeholder through a sh -c wrapper; no password -> variable unset
        let argv: Vec<String> = [
            "sh",
            "-c",
            "printf '%s|%s' \"$1\" \"${SYNCOBJ_PASSWORD-unset}\" > \"$2\"; cat \"$3\"",
            "sh",
            "{addr}",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([
            format!("{}.wrap", out.display()),
            expected_path("plain_noleader_0.3.12"),
        ])
        .collect();
        let s = run_status_command(&argv, "h:1", None, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(s.leader, None);
        let seen = std::fs::read_to_string(format!("{}.wrap", out.display())).unwrap();
        assert_eq!(seen, "h:1|unset");
    }

    #[tokio::test]
    async fn failures() {
        let dir = tempfile::tempdir().unwrap();
        let t = Duration::from_secs(5);
        let lost = script(&dir, "lost", "echo 'connection lost'");
        let e = run_status_command(&[lost], "h:1", None, t)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Command);
        assert!(e.to_string().contains("connection lost"));

        let fail = script(
            &dir,
            "fail",
            "echo \"bad password $SYNCOBJ_PASSWORD\" >&2; exit 3",
        );
        let e = run_status_command(&[fail], "h:1", Some(b"topsecret"), t)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Command);
        let msg = e.to_string();
        assert!(
            msg.contains("<redacted>") && !msg.contains("topsecret"),
            "{msg}"
        );

        let big = script(&dir, "big", "yes 'commit_idx: 1'");
        let e = run_status_command(&[big], "h:1", None, t)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Command);
        assert!(e.to_string().contains("larger"), "{e}");

        let e = run_status_command(&["/nonexistent/admin".into()], "h:1", None, t)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Command);
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("grandchild.pid");
        // sh -c wrapper whose grandchild would hang for a long time
        let body = format!("sleep 300 &\necho $! > '{}'\nwait", pidfile.display());
        let prog = script(&dir, "hang", &body);
        let t = Instant::now();
        let e = run_status_command(&[prog], "h:1", None, Duration::from_millis(500))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Timeout);
        assert!(t.elapsed() < Duration::from_secs(3));
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // give the kernel a moment to reap/kill
        let mut alive = true;
        for _ in 0..50 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // gone, or a zombie waiting for init
            if stat.is_empty() || stat.split_whitespace().nth(2) == Some("Z") {
                alive = false;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!alive, "grandchild {pid} survived the timeout");
    }
}

// ---------------------------------------------------------------------------------
// Fuzzing: no input makes a decoder panic.

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    fn captured_frames() -> Vec<(Vec<u8>, Option<RaftKey>)> {
        let mut out = Vec::new();
        for name in CASES {
            let key = case(name).password.as_deref().map(key_for);
            for f in [
                "s2c_frame1.bin",
                "s2c_frame2.bin",
                "c2s_frame1.bin",
                "c2s_frame2.bin",
            ] {
                let p = format!("{}/{f}", fixture_dir(name));
                if let Ok(b) = std::fs::read(p) {
                    out.push((b, key.clone()));
                }
            }
        }
        out
    }

    fn captured_pickles() -> Vec<Vec<u8>> {
        CASES
            .iter()
            .flat_map(|name| {
                ["s2c_frame1.pickle", "s2c_frame2.pickle"]
                    .iter()
                    .filter_map(move |f| std::fs::read(format!("{}/{f}", fixture_dir(name))).ok())
            })
            .collect()
    }

    #[derive(Debug, Clone)]
    enum Mutation {
        Flip(usize, u8),
        Truncate(usize),
        Insert(usize, u8),
        Remove(usize),
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            (any::<usize>(), 1u8..).prop_map(|(i, b)| Mutation::Flip(i, b)),
            any::<usize>().prop_map(Mutation::Truncate),
            (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
            any::<usize>().prop_map(Mutation::Remove),
        ]
    }

    fn apply(mut data: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
        for m in muts {
            let n = data.len().max(1);
            match *m {
                Mutation::Flip(i, b) if !data.is_empty() => data[i % n] ^= b,
                Mutation::Truncate(i) => data.truncate(i % n),
                Mutation::Insert(i, b) => data.insert(i % (data.len() + 1), b),
                Mutation::Remove(i) if !data.is_empty() => {
                    data.remove(i % n);
                }
                _ => {}
            }
        }
        data
    }

    fn fuzz_limits() -> QueryLimits {
        QueryLimits {
            pickle: PickleLimits {
                max_items: 5_000,
                ..PickleLimits::default()
            },
            ..QueryLimits::default()
        }
    }

    fn full_pipeline(bytes: &[u8], key: Option<&RaftKey>) {
        let lim = fuzz_limits();
        if let Ok((payload, _)) = frame::split_frame(bytes, lim.max_frame_bytes) {
            if let Ok(v) = decode_payload(payload, key, &lim) {
                let _ = status_from_value(&v);
                if let Value::Tuple(t) = &v {
                    if let Some(d) = t.get(1) {
                        let _ = status_from_value(d);
                    }
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let lim = fuzz_limits();
            let key = RaftKey::from_raw([5u8; 32]);
            let _ = frame::split_frame(&data, lim.max_frame_bytes);
            let _ = fernet::decrypt(&key, &data);
            let _ = zlib::decompress(&data, lim.max_decompressed_bytes);
            let _ = pickle::decode(&data, plim());
            let _ = decode_payload(&data, None, &lim);
            let _ = decode_payload(&data, Some(&key), &lim);
            let _ = parse_admin_text(&String::from_utf8_lossy(&data));
            full_pipeline(&data, None);
        }

        #[test]
        fn mutated_frames_never_panic(idx in any::<usize>(), muts in proptest::collection::vec(mutation(), 1..6)) {
            let frames = captured_frames();
            let (bytes, key) = &frames[idx % frames.len()];
            let m = apply(bytes.clone(), &muts);
            full_pipeline(&m, key.as_ref());
            // mutate the decrypted/decompressed layers too
            if let Ok((payload, _)) = frame::split_frame(bytes, 1 << 20) {
                let z = match key { Some(k) => fernet::decrypt(k, payload).unwrap(), None => payload.to_vec() };
                let zm = apply(z, &muts);
                if let Ok(p) = zlib::decompress(&zm, 1 << 20) {
                    let _ = pickle::decode(&p, plim()).map(|v| status_from_value(&v));
                }
            }
        }

        #[test]
        fn mutated_pickles_never_panic(idx in any::<usize>(), muts in proptest::collection::vec(mutation(), 1..8)) {
            let pickles = captured_pickles();
            let m = apply(pickles[idx % pickles.len()].clone(), &muts);
            if let Ok(v) = pickle::decode(&m, plim()) {
                let _ = status_from_value(&v);
                if let Value::Tuple(t) = &v {
                    if let Some(d) = t.get(1) {
                        let _ = status_from_value(d);
                    }
                }
            }
        }

        #[test]
        fn mutated_admin_text_never_panics(idx in 0usize..7, muts in proptest::collection::vec(mutation(), 1..8)) {
            let text = read(CASES[idx], "expected_admin.txt");
            let m = apply(text, &muts);
            let _ = parse_admin_text(&String::from_utf8_lossy(&m));
        }
    }
}

#[test]
fn public_futures_and_types_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    fn assert_send_sync<T: Send + Sync>() {}
    let limits = QueryLimits::default();
    let key = RaftKey::from_raw([0u8; 32]);
    let q = query_status("127.0.0.1:1", Some(&key), &limits);
    assert_send(&q);
    let argv = vec!["true".to_string()];
    let c = super::run_status_command(&argv, "h:1", Some(b"x"), Duration::from_secs(1));
    assert_send(&c);
    assert_send_sync::<RaftKey>();
    assert_send_sync::<RaftStatus>();
    assert_send_sync::<super::RaftError>();
}
