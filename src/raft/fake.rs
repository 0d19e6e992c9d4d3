//! An in-process fake pysyncobj node (server side of the utility protocol), for tests and
//! benchmarks of this crate. Not part of the exporter's runtime behaviour.
//!
//! Like pysyncobj, it closes the connection silently when it cannot decode the client's
//! first frame (wrong or missing password), never closes a connection itself after
//! replying, and binds its reply to the client's random key. Its Fernet timestamps go
//! *backwards* (1000, then 5) to prove the client applies no timestamp checks.
//! [`Behaviour`] selects the status reply or a misbehaviour.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use super::client::decode_payload;
use super::pickle::Value;
use super::request::PickleWriter;
use super::{fernet, frame, zlib, QueryLimits, RaftKey};

/// What the fake node does.
#[derive(Debug, Clone)]
pub enum Behaviour {
    /// Answer the status request with this status-dict pickle (a plain `PROTO 2 … STOP`
    /// pickle of the dict, e.g. a captured `s2c_frame1.pickle` of a no-password case, or
    /// [`unwrap_captured_reply`] of a keyed capture). With a key it is wrapped as
    /// `(client_key, dict)` like pysyncobj does.
    Serve(Vec<u8>),
    /// [`Behaviour::Serve`], but the status reply only after this delay (a node whose event
    /// loop is slow to get to the request, or a slow link).
    ServeAfter(std::time::Duration, Vec<u8>),
    /// Read the first frame and close without replying (what a wrong password causes).
    CloseAfterFirstFrame,
    /// Accept and read, but never answer.
    NeverAnswer,
    /// With a key: answer the key exchange, then stall. Without: stall after the request.
    HandshakeThenStall,
    /// Answer the status request with a frame of non-decodable bytes.
    Garbage,
    /// Answer like an HTTP server would (not a Raft port).
    NonRaft,
    /// Answer with a frame header announcing 2^31-1 bytes.
    HugeLength,
    /// Announce a 1000-byte frame, send 10 bytes, then reset the connection.
    ResetMidFrame,
    /// Answer with a zlib stream that inflates to 256 MiB.
    ZlibBomb,
    /// Answer with a valid reply whose Fernet HMAC is corrupted (keyed only; without a
    /// key this is [`Behaviour::Garbage`]).
    BadHmac,
    /// Answer with these raw pickle bytes (not wrapped in the key tuple), e.g. a pickle
    /// naming `os system` or a deeply nested one.
    RawReply(Vec<u8>),
}

/// A running fake node; dropping it stops the server and all its connections.
#[derive(Debug)]
pub struct FakeRaftNode {
    addr: String,
    received: Arc<Mutex<Vec<Value>>>,
    task: JoinHandle<()>,
}

impl Drop for FakeRaftNode {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeRaftNode {
    /// Starts a fake node on 127.0.0.1 (random port). `key` is the cluster key, `None`
    /// for a cluster without password. Returns the `host:port` address and the handle.
    pub async fn start(
        behaviour: Behaviour,
        key: Option<RaftKey>,
    ) -> std::io::Result<(String, FakeRaftNode)> {
        Self::start_on("127.0.0.1:0", behaviour, key).await
    }

    /// Like [`FakeRaftNode::start`], listening on `bind` (e.g. `127.0.0.12:0`, so that
    /// several fakes sort in a known order by address).
    pub async fn start_on(
        bind: &str,
        behaviour: Behaviour,
        key: Option<RaftKey>,
    ) -> std::io::Result<(String, FakeRaftNode)> {
        let listener = TcpListener::bind(bind).await?;
        FakeRaftNode::serve(listener, behaviour, key)
    }

    /// Like [`FakeRaftNode::start`], on a listener the caller bound (e.g. a fleet simulator
    /// that must know every address before it builds the replies naming them).
    pub fn serve(
        listener: TcpListener,
        behaviour: Behaviour,
        key: Option<RaftKey>,
    ) -> std::io::Result<(String, FakeRaftNode)> {
        if matches!(behaviour, Behaviour::ZlibBomb) {
            // Build it now, not while the client's deadline runs.
            cached_bomb();
        }
        let addr = listener.local_addr()?.to_string();
        let received = Arc::new(Mutex::new(Vec::new()));
        let behaviour = Arc::new(behaviour);
        let key = key.map(Arc::new);
        let rec = received.clone();
        let task = tokio::spawn(async move {
            let mut conns = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                conns.spawn(serve_connection(
                    stream,
                    behaviour.clone(),
                    key.clone(),
                    rec.clone(),
                ));
                while conns.try_join_next().is_some() {}
            }
        });
        Ok((
            addr.clone(),
            FakeRaftNode {
                addr,
                received,
                task,
            },
        ))
    }

    /// The `host:port` the node listens on.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Every message the node decoded from clients, in order (keyed messages unwrapped
    /// from nothing: the handshake key, then the `(node_key, command)` tuple).
    pub fn received(&self) -> Vec<Value> {
        self.received.lock().expect("not poisoned").clone()
    }
}

/// Turns a captured keyed reply pickle `(client_key, status_dict)` into a plain
/// status-dict pickle usable with [`Behaviour::Serve`]. Relies on the fixed layout
/// Python's pickler gives the key part (`_codecs.encode` + memo puts).
pub fn unwrap_captured_reply(wrapped: &[u8]) -> Option<Vec<u8>> {
    let p = wrapped;
    let mut i = 2;
    if p.get(..2)? != [0x80, 0x02] {
        return None;
    }
    let skip_put = |i: &mut usize| match p.get(*i) {
        Some(b'q') => *i += 2,
        Some(b'r') => *i += 5,
        _ => {}
    };
    let expect = |i: &mut usize, what: &[u8]| -> Option<()> {
        (p.get(*i..*i + what.len())? == what).then(|| *i += what.len())
    };
    expect(&mut i, b"c_codecs\nencode\n")?;
    skip_put(&mut i);
    expect(&mut i, b"X")?;
    let n = u32::from_le_bytes(p.get(i..i + 4)?.try_into().ok()?) as usize;
    i += 4 + n;
    skip_put(&mut i);
    expect(&mut i, b"X\x06\x00\x00\x00latin1")?;
    skip_put(&mut i);
    expect(&mut i, b"\x86")?;
    skip_put(&mut i);
    expect(&mut i, b"R")?;
    skip_put(&mut i);
    let n = p.len();
    if n < i + 4 || p[n - 1] != b'.' || p[n - 3] != b'q' || p[n - 4] != 0x86 {
        return None;
    }
    let mut out = vec![0x80, 0x02];
    out.extend_from_slice(&p[i..n - 4]);
    out.push(b'.');
    Some(out)
}

/// A protocol-2 pickle of pysyncobj 0.3.17's status dict for node `index` of `nodes`, all
/// connected, with a quorum (node 0 leads), shaped like the captured
/// `enc_leader_patroni_0.3.17` reply: `self` and `leader` are `pysyncobj.node.TCPNode`
/// instances. For simulated fleets, whose addresses are known only at run time.
pub fn healthy_status_pickle(index: usize, nodes: &[impl AsRef<str>]) -> Vec<u8> {
    let mut pickle = PickleWriter::new();
    pickle.begin_dict();
    pickle.str("version").str("0.3.17");
    pickle.str("revision").str("deprecated");
    let nodes: Vec<&str> = nodes.iter().map(AsRef::as_ref).collect();
    pickle.str("self").tcp_node(nodes[index]);
    pickle.str("state").int(if index == 0 { 2 } else { 0 });
    pickle.str("leader").tcp_node(nodes[0]);
    pickle.str("has_quorum").true_value();
    pickle
        .str("partner_nodes_count")
        .int(nodes.len() as i32 - 1);
    for (other, addr) in nodes.iter().enumerate() {
        if other != index {
            pickle
                .str(&format!("partner_node_status_server_{addr}"))
                .int(2);
        }
    }
    let leader_counts = if index == 0 {
        nodes.len() as i32 - 1
    } else {
        0
    };
    for (name, value) in [
        ("readonly_nodes_count", 0),
        ("log_len", 3),
        ("last_applied", 1234),
        ("commit_idx", 1234),
        ("raft_term", 2),
        ("next_node_idx_count", leader_counts),
        ("match_idx_count", leader_counts),
        ("leader_commit_idx", 1234),
        ("uptime", 3600),
        ("self_code_version", 0),
        ("enabled_code_version", 0),
    ] {
        pickle.str(name).int(value);
    }
    pickle.end_dict().finish()
}

/// A zlib stream that inflates to `mib` MiB of zeros, built cheaply by repeating one
/// flushed deflate block (each block only references the all-zero window).
pub fn zlib_bomb(mib: usize) -> Vec<u8> {
    use flate2::{Compress, Compression, FlushCompress};
    let zeros = vec![0u8; 1 << 20];
    let mut c = Compress::new(Compression::best(), true);
    let block = |c: &mut Compress| {
        let mut out = Vec::with_capacity(8192);
        c.compress_vec(&zeros, &mut out, FlushCompress::Sync)
            .expect("in-memory deflate");
        out
    };
    let mut out = block(&mut c);
    let repeat = block(&mut c);
    for _ in 1..mib {
        out.extend_from_slice(&repeat);
    }
    out
}

fn cached_bomb() -> &'static [u8] {
    static BOMB: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BOMB.get_or_init(|| zlib_bomb(256))
}

/// Encodes one reply as pysyncobj does: deflated at level 3, then Fernet when keyed (the
/// client sends stored blocks; a node's replies cost the client an inflate, as a real one's).
fn encode_reply(
    pickled: &[u8],
    key: Option<&RaftKey>,
    timestamp: u64,
) -> Result<Vec<u8>, super::RaftError> {
    let compressed = zlib::compress(pickled);
    match key {
        Some(k) => fernet::encrypt(k, &compressed, timestamp),
        None => Ok(compressed),
    }
}

async fn send_payload(s: &mut TcpStream, payload: &[u8]) -> std::io::Result<()> {
    frame::write_frame(s, payload).await
}

async fn hold_open(mut s: TcpStream) {
    // pysyncobj never closes a utility connection itself: wait for the client.
    let mut sink = [0u8; 1024];
    while let Ok(n) = s.read(&mut sink).await {
        if n == 0 {
            break;
        }
    }
}

async fn serve_connection(
    mut s: TcpStream,
    behaviour: Arc<Behaviour>,
    key: Option<Arc<RaftKey>>,
    received: Arc<Mutex<Vec<Value>>>,
) {
    let limits = QueryLimits::default();
    let key = key.as_deref();
    let Ok(first) = frame::read_frame(&mut s, limits.max_frame_bytes).await else {
        return;
    };
    let Ok(msg) = decode_payload(&first, key, &limits) else {
        return; // like pysyncobj: silently close on any decode error
    };
    received.lock().expect("not poisoned").push(msg.clone());
    match &*behaviour {
        Behaviour::CloseAfterFirstFrame => return,
        Behaviour::NeverAnswer => return hold_open(s).await,
        _ => {}
    }
    let mut client_key: Option<Vec<u8>> = None;
    if let Some(k) = key {
        let Value::Bytes(ck) = msg else { return };
        let mut nk = [0u8; 32];
        if getrandom::fill(&mut nk).is_err() {
            return;
        }
        let reply = PickleWriter::new().bytes(&ck).bytes(&nk).tuple2().finish();
        let Ok(payload) = encode_reply(&reply, Some(k), 1000) else {
            return;
        };
        if send_payload(&mut s, &payload).await.is_err() {
            return;
        }
        if matches!(&*behaviour, Behaviour::HandshakeThenStall) {
            return hold_open(s).await;
        }
        let Ok(second) = frame::read_frame(&mut s, limits.max_frame_bytes).await else {
            return;
        };
        let Ok(msg2) = decode_payload(&second, Some(k), &limits) else {
            return;
        };
        received.lock().expect("not poisoned").push(msg2.clone());
        let Value::Tuple(t) = msg2 else { return };
        if t.len() != 2 || t[0] != Value::bytes(&nk) || !is_status_command(&t[1]) {
            return;
        }
        client_key = Some(ck.to_vec());
    } else {
        if !is_status_command(&msg) {
            return;
        }
        if matches!(&*behaviour, Behaviour::HandshakeThenStall) {
            return hold_open(s).await;
        }
    }
    let wrap = |dict_pickle: &[u8]| -> Vec<u8> {
        match &client_key {
            Some(ck) if dict_pickle.len() >= 3 => PickleWriter::new()
                .bytes(ck)
                .raw(&dict_pickle[2..dict_pickle.len() - 1])
                .tuple2()
                .finish(),
            _ => dict_pickle.to_vec(),
        }
    };
    let result = match &*behaviour {
        Behaviour::Serve(dict) => match encode_reply(&wrap(dict), key, 5) {
            Ok(p) => send_payload(&mut s, &p).await,
            Err(_) => return,
        },
        Behaviour::ServeAfter(delay, dict) => match encode_reply(&wrap(dict), key, 5) {
            Ok(p) => {
                tokio::time::sleep(*delay).await;
                send_payload(&mut s, &p).await
            }
            Err(_) => return,
        },
        Behaviour::RawReply(p) => match encode_reply(p, key, 5) {
            Ok(p) => send_payload(&mut s, &p).await,
            Err(_) => return,
        },
        Behaviour::Garbage => {
            send_payload(&mut s, b"\x00\x01garbage, not zlib nor fernet\xff").await
        }
        Behaviour::BadHmac if key.is_none() => send_payload(&mut s, b"garbage").await,
        Behaviour::BadHmac => {
            let k = key.expect("checked");
            let inner = zlib::compress(&wrap(b"\x80\x02}."));
            let Ok(token) = fernet::encrypt(k, &inner, 5) else {
                return;
            };
            // Flip one bit of the HMAC (last 32 raw bytes) in the base64 text: change a
            // character near the end that is not padding.
            let mut token = token;
            let pos = token
                .iter()
                .rposition(|&c| c != b'=')
                .unwrap_or(0)
                .saturating_sub(2);
            token[pos] = if token[pos] == b'A' { b'B' } else { b'A' };
            send_payload(&mut s, &token).await
        }
        Behaviour::NonRaft => {
            s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                .await
        }
        Behaviour::HugeLength => {
            let _ = s.write_all(&0x7fff_ffffi32.to_le_bytes()).await;
            let _ = s.write_all(b"some bytes").await;
            return hold_open(s).await;
        }
        Behaviour::ResetMidFrame => {
            let _ = s.write_all(&1000i32.to_le_bytes()).await;
            let _ = s.write_all(b"0123456789").await;
            let _ = s.flush().await;
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let _ = s.set_zero_linger();
            drop(s); // RST
            return;
        }
        Behaviour::ZlibBomb => {
            let bomb = cached_bomb();
            let payload = match key {
                Some(k) => match fernet::encrypt(k, bomb, 5) {
                    Ok(t) => t,
                    Err(_) => return,
                },
                None => bomb.to_vec(),
            };
            send_payload(&mut s, &payload).await
        }
        Behaviour::CloseAfterFirstFrame
        | Behaviour::NeverAnswer
        | Behaviour::HandshakeThenStall => Ok(()),
    };
    if result.is_ok() {
        hold_open(s).await;
    }
}

fn is_status_command(v: &Value) -> bool {
    matches!(v, Value::List(items) if items.first() == Some(&Value::str("status")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::pickle::{decode, PickleLimits};
    use crate::raft::{status_from_value, RaftState};

    #[test]
    fn healthy_status_pickle_decodes_like_a_real_reply() {
        let nodes = ["127.0.0.1:4001", "127.0.0.1:4002", "127.0.0.1:4003"];
        let limits = PickleLimits::default();
        let leader =
            status_from_value(&decode(&healthy_status_pickle(0, &nodes), limits).unwrap()).unwrap();
        assert_eq!(leader.state, RaftState::Leader);
        assert_eq!(leader.self_node, "127.0.0.1:4001");
        assert!(leader.has_quorum);
        let follower =
            status_from_value(&decode(&healthy_status_pickle(2, &nodes), limits).unwrap()).unwrap();
        assert_eq!(follower.state, RaftState::Follower);
        let partners: Vec<&str> = follower.partners.iter().map(|p| p.node.as_str()).collect();
        assert_eq!(partners, ["127.0.0.1:4001", "127.0.0.1:4002"]);
    }
}
