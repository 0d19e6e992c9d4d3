//! [`query_status`]: one `status` query over one TCP connection, the way `syncobj_admin`
//! does it, bounded by [`QueryLimits`].
//!
//! ```text
//! with a key:    -> pickle(ck)                 <- (ck, nk)
//!                -> pickle((nk, ['status']))   <- (ck, status_dict)
//! without a key: -> pickle(['status'])         <- status_dict
//! each frame:    i32_le(len) ++ [fernet](zlib(pickle))
//! ```
//!
//! The node closes the connection without a word when it cannot decode our first frame
//! (wrong password, no password against an encrypted node, password against a plain one),
//! so EOF or a reset before the first reply frame is reported as `auth`. A node that is
//! shutting down does the same to the connections it had accepted: pysyncobj's transport
//! unbinds its server socket, then closes its connections. So such a close is confirmed by a
//! second connection before it is reported: a node with another password closes that one
//! too, a node going away refuses it (and the error is that refusal, not `auth`).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::net::TcpStream;

use super::frame::{self, ReadError};
use super::pickle::{self, Node, Value};
use super::status::status_from_node;
use super::{fernet, request, zlib, QueryLimits, RaftError, RaftKey, RaftStatus};

/// Queries the status of the pysyncobj node at `addr` (`host:port`).
///
/// `key` must be given when the cluster has a password (derive it once with
/// [`RaftKey::derive`] and reuse it). The whole exchange, including name resolution and
/// connect, is bounded by `limits.timeout`. Only the `status` command is ever sent.
pub async fn query_status(
    addr: &str,
    key: Option<&RaftKey>,
    limits: &QueryLimits,
) -> Result<RaftStatus, RaftError> {
    query_status_timed(addr, key, limits)
        .await
        .map(|(status, _)| status)
}

/// [`query_status`], with how long the exchange took: from the connect to the last byte of
/// the status reply (the key exchange included when keyed; the reply's decoding not). The
/// node answers from its own event loop, so this is the network's round trips plus how long
/// the node took to get to the request: what its partners' connections also wait for.
pub async fn query_status_timed(
    addr: &str,
    key: Option<&RaftKey>,
    limits: &QueryLimits,
) -> Result<(RaftStatus, Duration), RaftError> {
    let result = match tokio::time::timeout(limits.timeout, exchange(addr, key, limits)).await {
        Ok(r) => r,
        Err(_) => Err(RaftError::Timeout {
            addr: addr.to_string(),
            timeout: limits.timeout,
        }),
    };
    if let Err(e) = &result {
        tracing::debug!(addr, kind = e.kind().as_label(), error = %e, "raft status query failed");
    }
    result
}

/// Decodes one received frame payload: Fernet (when keyed), bounded zlib, pickle.
/// Pure and synchronous; the network path and the tests share it.
pub fn decode_payload(
    payload: &[u8],
    key: Option<&RaftKey>,
    limits: &QueryLimits,
) -> Result<Value, RaftError> {
    decode_payload_with(payload, key, limits, |root| root.to_value(limits.pickle))
}

/// [`decode_payload`], the pickle read in place by `read` ([`pickle::decode_with`]).
pub fn decode_payload_with<R>(
    payload: &[u8],
    key: Option<&RaftKey>,
    limits: &QueryLimits,
    read: impl FnOnce(Node<'_>) -> Result<R, RaftError>,
) -> Result<R, RaftError> {
    let decrypted;
    let compressed = match key {
        Some(k) => {
            decrypted = fernet::decrypt(k, payload)?;
            &decrypted[..]
        }
        None => payload,
    };
    zlib::decompress_into(compressed, limits.max_decompressed_bytes, |pickled| {
        pickle::decode_with(pickled, limits.pickle, read)
    })
}

/// Encodes one payload to send: a zlib stream of stored blocks (not compressed: the
/// [`zlib`] module docs say why), then Fernet when keyed.
pub fn encode_payload(
    pickled: &[u8],
    key: Option<&RaftKey>,
    timestamp: u64,
) -> Result<Vec<u8>, RaftError> {
    let compressed = zlib::store(pickled);
    match key {
        Some(k) => fernet::encrypt(k, &compressed, timestamp),
        None => Ok(compressed),
    }
}

/// Checks that a keyed reply is `(our_key, message)` and returns the message.
fn unwrap_keyed<'p>(reply: Node<'p>, client_key: &[u8]) -> Result<Node<'p>, RaftError> {
    let not_a_pair = || {
        RaftError::protocol(format!(
            "keyed reply is a {}, not a (key, message) tuple",
            reply.type_name()
        ))
    };
    let mut items = reply
        .tuple_items()
        .filter(|items| items.len() == 2)
        .ok_or_else(not_a_pair)?;
    let (key, msg) = items.next().zip(items.next()).ok_or_else(not_a_pair)?;
    match key.as_bytes() {
        Some(k) if k == client_key => Ok(msg),
        Some(_) => Err(RaftError::protocol(
            "reply carries another connection key than ours",
        )),
        None => Err(RaftError::protocol(format!(
            "reply key is a {}, not bytes",
            key.type_name()
        ))),
    }
}

fn connection_lost(addr: &str, e: std::io::Error) -> RaftError {
    RaftError::Connect {
        addr: addr.to_string(),
        source: e,
    }
}

async fn send(
    stream: &mut TcpStream,
    addr: &str,
    pickled: &[u8],
    key: Option<&RaftKey>,
    timestamp: u64,
) -> Result<(), RaftError> {
    let payload = encode_payload(pickled, key, timestamp)?;
    frame::write_frame(stream, &payload)
        .await
        .map_err(|e| connection_lost(addr, e))
}

/// Reads the reply to our first frame: a close here means the node rejected the frame.
async fn recv_first(
    stream: &mut TcpStream,
    addr: &str,
    limits: &QueryLimits,
) -> Result<Vec<u8>, RaftError> {
    match frame::read_frame(stream, limits.max_frame_bytes).await {
        Ok(p) => Ok(p),
        Err(ReadError::ClosedBeforeFrame(_)) => Err(RaftError::Auth {
            addr: addr.to_string(),
        }),
        Err(ReadError::Other(e)) => Err(e),
    }
}

async fn recv_next(stream: &mut TcpStream, limits: &QueryLimits) -> Result<Vec<u8>, RaftError> {
    match frame::read_frame(stream, limits.max_frame_bytes).await {
        Ok(p) => Ok(p),
        Err(ReadError::ClosedBeforeFrame(e)) => Err(RaftError::protocol(format!(
            "node closed the connection after the status request: {e}"
        ))),
        Err(ReadError::Other(e)) => Err(e),
    }
}

async fn exchange(
    addr: &str,
    key: Option<&RaftKey>,
    limits: &QueryLimits,
) -> Result<(RaftStatus, Duration), RaftError> {
    let mut started = Instant::now();
    let (reply, client_key) = match exchange_raw(addr, key, limits).await {
        // Closed before the first reply: a refused password, or a node shutting down (the
        // module docs). A second connection tells them apart, inside the same deadline.
        Err(RaftError::Auth { .. }) => {
            started = Instant::now();
            exchange_raw(addr, key, limits).await?
        }
        first => first?,
    };
    let round_trip = started.elapsed();
    let status = match (key, client_key) {
        (Some(key), Some(client_key)) => decode_payload_with(&reply, Some(key), limits, |reply| {
            status_from_node(unwrap_keyed(reply, &client_key)?)
        })?,
        _ => decode_payload_with(&reply, None, limits, status_from_node)?,
    };
    Ok((status, round_trip))
}

/// The same exchange as [`query_status`], but the status reply is returned as received (its
/// frame payload: encrypted when keyed), not decrypted, decompressed or parsed. The keyed
/// handshake's reply is decoded, as the protocol needs the node's key from it. For the
/// benchmark's floor (`benches/floor.rs`): what the requests cost without the parsing.
///
/// # Errors
/// As [`query_status`], except decoding errors of the status reply.
pub async fn query_raw(
    addr: &str,
    key: Option<&RaftKey>,
    limits: &QueryLimits,
) -> Result<Vec<u8>, RaftError> {
    match tokio::time::timeout(limits.timeout, exchange_raw(addr, key, limits)).await {
        Ok(result) => result.map(|(reply, _)| reply),
        Err(_) => Err(RaftError::Timeout {
            addr: addr.to_string(),
            timeout: limits.timeout,
        }),
    }
}

/// Connects, sends the status command (after the key exchange when keyed) and returns the
/// payload of the reply frame, with the client key the reply must carry when keyed.
async fn exchange_raw(
    addr: &str,
    key: Option<&RaftKey>,
    limits: &QueryLimits,
) -> Result<(Vec<u8>, Option<[u8; 32]>), RaftError> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| connection_lost(addr, e))?;
    let _ = stream.set_nodelay(true);
    match key {
        None => {
            send(&mut stream, addr, &request::status_command_plain(), None, 0).await?;
            Ok((recv_first(&mut stream, addr, limits).await?, None))
        }
        Some(key) => {
            // pysyncobj requires non-decreasing timestamps per connection and checks
            // nothing else: one wall-clock stamp for both frames.
            let ts = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let mut client_key = [0u8; 32];
            getrandom::fill(&mut client_key)
                .map_err(|e| RaftError::protocol(format!("no randomness for the key: {e}")))?;
            send(
                &mut stream,
                addr,
                &request::key_exchange(&client_key),
                Some(key),
                ts,
            )
            .await?;
            let reply = recv_first(&mut stream, addr, limits).await?;
            let node_key: Vec<u8> = decode_payload_with(&reply, Some(key), limits, |reply| {
                let node_key = unwrap_keyed(reply, &client_key)?;
                match node_key.as_bytes() {
                    Some(nk) if (1..=1024).contains(&nk.len()) => Ok(nk.to_vec()),
                    _ => Err(RaftError::protocol(format!(
                        "handshake: node key is a {} (expected bytes)",
                        node_key.type_name()
                    ))),
                }
            })?;
            let command = request::status_command_keyed(&node_key);
            send(&mut stream, addr, &command, Some(key), ts).await?;
            Ok((recv_next(&mut stream, limits).await?, Some(client_key)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_kind::ErrorKind;

    #[test]
    fn plain_request_is_the_constant_frame() {
        // §0: without a password the whole request is always these 32 bytes.
        let expected: [u8; 32] = [
            0x1c, 0x00, 0x00, 0x00, 0x78, 0x5e, 0x6b, 0x60, 0x8a, 0x2d, 0x64, 0x88, 0x60, 0x63,
            0x60, 0x60, 0x28, 0x2e, 0x49, 0x2c, 0x29, 0x2d, 0x2e, 0x64, 0x4c, 0xd4, 0x03, 0x00,
            0x34, 0x3b, 0x05, 0x54,
        ];
        let payload = encode_payload(&request::status_command_plain(), None, 0).unwrap();
        let f = frame::encode(&payload).unwrap();
        // syncobj_admin's frame is deflated by zlib, ours is stored blocks (zlib's module
        // docs say why): the decoded content is what must match.
        let limits = QueryLimits::default();
        let (p, _) = frame::split_frame(&expected, 100).unwrap();
        assert_eq!(
            decode_payload(p, None, &limits).unwrap(),
            decode_payload(&f[4..], None, &limits).unwrap()
        );
    }

    #[test]
    fn unwrap_keyed_checks() {
        use super::request::PickleWriter;
        let ck = [1u8; 32];
        let keyed = |key: &[u8]| PickleWriter::new().bytes(key).int(5).tuple2().finish();
        let unwrapped = |pickled: &[u8]| {
            pickle::decode_with(pickled, QueryLimits::default().pickle, |reply| {
                unwrap_keyed(reply, &ck)?.to_value(QueryLimits::default().pickle)
            })
        };
        assert_eq!(unwrapped(&keyed(&ck)).unwrap(), Value::Int(5));
        assert_eq!(
            unwrapped(&keyed(&[2u8; 32])).unwrap_err().kind(),
            ErrorKind::Protocol
        );
        let not_a_pair = PickleWriter::new().int(1).finish();
        assert_eq!(
            unwrapped(&not_a_pair).unwrap_err().kind(),
            ErrorKind::Protocol
        );
        let key_not_bytes = PickleWriter::new().int(1).int(5).tuple2().finish();
        assert_eq!(
            unwrapped(&key_not_bytes).unwrap_err().kind(),
            ErrorKind::Protocol
        );
    }
}
