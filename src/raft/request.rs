//! The pickles this client sends, and the tiny pickle writer behind them.
//!
//! Structural guarantee: the only request constructors here ([`status_command_plain`],
//! [`status_command_keyed`]) build the `['status']` utility command and take no command
//! argument. [`key_exchange`] sends the client's random key (handshake step 1), which is
//! not a command. No other command is ever built: an unknown command ends the event loop
//! of a Patroni Raft node on every pysyncobj version (see the module docs of `raft`), and
//! `add`/`remove`/`set_version`/`transfer` change the cluster (protocol notes §9).
//!
//! The output is byte-for-byte what Python's `pickle.dumps(obj, protocol=2)` writes for
//! these shapes (memo puts included, `bytes` as `_codecs.encode(str, 'latin1')`), which
//! the tests check against captured `syncobj_admin` frames.

/// The one utility command this client knows.
const STATUS: &str = "status";

/// A minimal protocol-2 pickle writer reproducing CPython's memo numbering for the
/// shapes used in this protocol (bytes, str, one-level lists, 2-tuples). Private to the Raft
/// module: outside it, only the request constructors below can make a pickle to send.
/// With the `testkit` feature it also writes the replies of the fake node.
#[derive(Debug)]
pub(super) struct PickleWriter {
    out: Vec<u8>,
    next_memo: u32,
    codecs_encode: Option<u32>,
    latin1: Option<u32>,
}

impl Default for PickleWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl PickleWriter {
    /// Starts a pickle (`PROTO 2`).
    pub fn new() -> Self {
        PickleWriter {
            out: vec![0x80, 0x02],
            next_memo: 0,
            codecs_encode: None,
            latin1: None,
        }
    }

    fn put(&mut self) -> u32 {
        let i = self.next_memo;
        if i < 256 {
            self.out.extend_from_slice(&[b'q', i as u8]);
        } else {
            self.out.push(b'r');
            self.out.extend_from_slice(&i.to_le_bytes());
        }
        self.next_memo += 1;
        i
    }

    fn get(&mut self, i: u32) {
        if i < 256 {
            self.out.extend_from_slice(&[b'h', i as u8]);
        } else {
            self.out.push(b'j');
            self.out.extend_from_slice(&i.to_le_bytes());
        }
    }

    fn unicode(&mut self, s: &str) {
        self.out.push(b'X');
        self.out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.out.extend_from_slice(s.as_bytes());
    }

    /// A `str` (BINUNICODE, memoized).
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.unicode(s);
        self.put();
        self
    }

    /// A `bytes` object the way protocol 2 writes it: `_codecs.encode(latin1_str, 'latin1')`.
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        match self.codecs_encode {
            Some(i) => self.get(i),
            None => {
                self.out.extend_from_slice(b"c_codecs\nencode\n");
                self.codecs_encode = Some(self.put());
            }
        }
        let latin1: String = b.iter().map(|&c| char::from(c)).collect();
        self.str(&latin1);
        match self.latin1 {
            Some(i) => self.get(i),
            None => {
                self.unicode("latin1");
                self.latin1 = Some(self.put());
            }
        }
        self.out.push(0x86); // TUPLE2
        self.put();
        self.out.push(b'R'); // REDUCE
        self.put();
        self
    }

    /// A list of strings (`EMPTY_LIST`, then `APPEND` or `MARK … APPENDS`).
    pub fn str_list(&mut self, items: &[&str]) -> &mut Self {
        self.out.push(b']');
        self.put();
        match items {
            [] => {}
            [one] => {
                self.str(one);
                self.out.push(b'a');
            }
            many => {
                self.out.push(b'(');
                for s in many {
                    self.str(s);
                }
                self.out.push(b'e');
            }
        }
        self
    }

    /// Packs the two values written before into a tuple (`TUPLE2`, memoized).
    pub fn tuple2(&mut self) -> &mut Self {
        self.out.push(0x86);
        self.put();
        self
    }

    /// Appends raw opcodes (used by the fake node to splice a captured dict body).
    #[cfg(feature = "testkit")]
    pub fn raw(&mut self, opcodes: &[u8]) -> &mut Self {
        self.out.extend_from_slice(opcodes);
        self
    }

    /// An `int` (BININT).
    #[cfg(any(test, feature = "testkit"))]
    pub fn int(&mut self, value: i32) -> &mut Self {
        self.out.push(b'J');
        self.out.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// `True` (NEWTRUE).
    #[cfg(feature = "testkit")]
    pub fn true_value(&mut self) -> &mut Self {
        self.out.push(0x88);
        self
    }

    /// Opens a dict for key/value pairs (`EMPTY_DICT`, memoized, `MARK`); [`Self::end_dict`]
    /// closes it.
    #[cfg(feature = "testkit")]
    pub fn begin_dict(&mut self) -> &mut Self {
        self.out.push(b'}');
        self.put();
        self.out.push(b'(');
        self
    }

    /// Closes a dict opened by [`Self::begin_dict`] (`SETITEMS`).
    #[cfg(feature = "testkit")]
    pub fn end_dict(&mut self) -> &mut Self {
        self.out.push(b'u');
        self
    }

    /// A `pysyncobj.node.TCPNode` instance for `host:port`, as pysyncobj 0.3.17 puts
    /// `self` and `leader` into its status.
    #[cfg(feature = "testkit")]
    pub fn tcp_node(&mut self, addr: &str) -> &mut Self {
        let (host, port) = addr.rsplit_once(':').expect("host:port");
        self.out.extend_from_slice(b"cpysyncobj.node\nTCPNode\n");
        self.put();
        self.out.extend_from_slice(b")\x81");
        self.put();
        self.begin_dict();
        self.str("_id").str(addr);
        self.str("_TCPNode__address").str(addr);
        self.str("_TCPNode__host").str(host);
        self.str("_TCPNode__port").int(port.parse().expect("port"));
        self.end_dict();
        self.out.push(b'b'); // BUILD
        self
    }

    /// Ends the pickle (`STOP`) and returns it.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.out);
        out.push(b'.');
        out
    }
}

/// Without a password: `pickle(['status'])`.
pub fn status_command_plain() -> Vec<u8> {
    PickleWriter::new().str_list(&[STATUS]).finish()
}

/// Handshake step 1 with a password: `pickle(client_key)`.
pub fn key_exchange(client_key: &[u8; 32]) -> Vec<u8> {
    PickleWriter::new().bytes(client_key).finish()
}

/// Handshake step 3 with a password: `pickle((node_key, ['status']))`.
pub fn status_command_keyed(node_key: &[u8]) -> Vec<u8> {
    PickleWriter::new()
        .bytes(node_key)
        .str_list(&[STATUS])
        .tuple2()
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::pickle::{decode, PickleLimits, Value};

    fn fixture(case: &str, file: &str) -> Vec<u8> {
        let p = format!(
            "{}/tests/fixtures/pysyncobj/{case}/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    const LIM: PickleLimits = PickleLimits {
        max_depth: 32,
        max_items: 10_000,
    };

    fn bytes_of(v: &Value) -> Vec<u8> {
        match v {
            Value::Bytes(b) => b.to_vec(),
            other => panic!("not bytes: {other:?}"),
        }
    }

    #[test]
    fn plain_matches_capture() {
        for case in ["plain_follower_0.3.12", "plain_noleader_0.3.12"] {
            assert_eq!(status_command_plain(), fixture(case, "c2s_frame1.pickle"));
        }
    }

    #[test]
    fn keyed_frames_match_captures_byte_for_byte() {
        for case in [
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
        ] {
            let c1 = fixture(case, "c2s_frame1.pickle");
            let ck: [u8; 32] = bytes_of(&decode(&c1, LIM).unwrap()).try_into().unwrap();
            assert_eq!(key_exchange(&ck), c1, "{case}");
            let c2 = fixture(case, "c2s_frame2.pickle");
            let Value::Tuple(t) = decode(&c2, LIM).unwrap() else {
                panic!("not a tuple")
            };
            let nk = bytes_of(&t[0]);
            assert_eq!(status_command_keyed(&nk), c2, "{case}");
            assert_eq!(t[1], Value::List(vec![Value::str("status")]));
        }
    }

    #[test]
    fn node_reply_shape_matches_capture() {
        // The node's handshake reply (ck, nk) reuses the memoized global and 'latin1'.
        let s1 = fixture("enc_leader_0.3.12", "s2c_frame1.pickle");
        let Value::Tuple(t) = decode(&s1, LIM).unwrap() else {
            panic!()
        };
        let (ck, nk) = (bytes_of(&t[0]), bytes_of(&t[1]));
        assert_eq!(
            PickleWriter::new().bytes(&ck).bytes(&nk).tuple2().finish(),
            s1
        );
    }
}
