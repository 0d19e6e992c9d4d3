//! zlib layer. pysyncobj compresses every pickle with `zlib.compress(data, 3)` (a zlib
//! stream with header and Adler-32, never raw deflate or gzip).
//!
//! Decompression is streamed into an output buffer that is never allowed to grow past
//! [`super::QueryLimits::max_decompressed_bytes`]: a 1 KB frame that inflates to 1 GB is
//! rejected after the limit is reached, in bounded time and memory.
//!
//! What the client sends is not compressed at all: [`store`] wraps it in deflate's "stored"
//! blocks, a valid zlib stream written by hand. Why: the client's messages are a few dozen
//! bytes of random keys (the key exchange, the status command carrying the node's key), which
//! deflate cannot shrink, and a deflate state costs a 300 KB reset (a memset) per message:
//! with two messages per Raft query that, and deflate's Huffman tables, were 4 % of the
//! exporter's CPU polling 1000 clusters (docs/bench/profile-n1000.md). pysyncobj reads every
//! message with `zlib.decompress`, which accepts any valid zlib stream, stored blocks
//! included (the real-cluster e2e tests talk to it).
//!
//! flate2 runs on its zlib-rs backend (Cargo.toml): the same streams, and a status reply
//! decoded (inflate, pickle, mapping) in 8.2 µs against 9.0 on miniz_oxide, medians of five
//! runs of `cargo bench --bench raft_query` on one CPU (`taskset -c 1`).
//!
//! Why one decompressor per thread, reset for each message: a new inflate state is about 40
//! KB allocated and zeroed, for replies of a few KB, and freeing blocks that large made malloc
//! consolidate its free lists. `compress` (level 3, like pysyncobj) is for the fake node of
//! the tests and benchmarks, whose replies must cost the client what a real node's do.

use std::cell::RefCell;

#[cfg(any(test, feature = "testkit"))]
use flate2::{Compress, Compression, FlushCompress};
use flate2::{Decompress, FlushDecompress, Status};

use super::RaftError;

/// The size of the window decompressed into at a time.
const CHUNK: usize = 16 * 1024;

/// A decompressor and the window it writes into.
struct Inflater {
    state: Decompress,
    chunk: Box<[u8]>,
}

#[cfg(any(test, feature = "testkit"))]
thread_local! {
    static DEFLATE: RefCell<Compress> = RefCell::new(Compress::new(Compression::new(3), true));
}

thread_local! {
    static INFLATE: RefCell<Inflater> = RefCell::new(Inflater {
        state: Decompress::new(true),
        chunk: vec![0u8; CHUNK].into_boxed_slice(),
    });
}

/// The largest payload of one stored block (its length is a 16-bit field).
const STORED_BLOCK_MAX: usize = 0xffff;

/// `data` as a zlib stream of stored (uncompressed) deflate blocks: the header `78 01`
/// (deflate, 32 KB window, "fastest"), blocks of at most 65 535 bytes each (`BFINAL` on the
/// last, then `LEN` and its complement `NLEN`, little-endian), and the Adler-32 of `data`
/// (big-endian), as RFC 1950 and RFC 1951 §3.2.4 define them. The module docs say why.
pub fn store(data: &[u8]) -> Vec<u8> {
    let blocks = data.len().div_ceil(STORED_BLOCK_MAX).max(1);
    let mut out = Vec::with_capacity(2 + blocks * 5 + data.len() + 4);
    out.extend_from_slice(&[0x78, 0x01]);
    let mut chunks = data.chunks(STORED_BLOCK_MAX).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[0x01, 0x00, 0x00, 0xff, 0xff]); // one empty final block
    }
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        let len = chunk.len() as u16; // at most STORED_BLOCK_MAX
        out.push(u8::from(last));
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.extend_from_slice(&adler32(data).to_be_bytes());
    out
}

/// Adler-32 (RFC 1950 §8.2): two sums modulo 65 521, reduced every 5 552 bytes (the most
/// that cannot overflow 32 bits).
fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65_521;
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// Compresses with level 3, like pysyncobj (header `78 5e`): the fake node's replies.
#[cfg(any(test, feature = "testkit"))]
pub fn compress(data: &[u8]) -> Vec<u8> {
    DEFLATE.with(|c| {
        let mut c = c.borrow_mut();
        c.reset();
        compress_with(&mut c, data)
    })
}

#[cfg(any(test, feature = "testkit"))]
fn compress_with(c: &mut Compress, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() / 2 + 64);
    loop {
        let before_in = c.total_in() as usize;
        if out.capacity() - out.len() < 64 {
            out.reserve(out.capacity().max(64));
        }
        let status = c
            .compress_vec(&data[before_in..], &mut out, FlushCompress::Finish)
            .expect("deflate of an in-memory buffer cannot fail");
        if status == Status::StreamEnd {
            return out;
        }
    }
}

/// Decompresses one zlib stream, failing once the output would exceed `max_out` bytes.
/// Trailing bytes after the end of the stream are ignored (like Python's
/// `zlib.decompress`, which keeps them as `unused_data`).
pub fn decompress(data: &[u8], max_out: usize) -> Result<Vec<u8>, RaftError> {
    decompress_into(data, max_out, |out| Ok(out.to_vec()))
}

/// `read` of the decompressed `data` (as [`decompress`], with its limit and errors). A
/// stream that ends within the first window is read there, where it was inflated: no buffer
/// is allocated for it and nothing copied. That is every status of a cluster of a few
/// members (0.9–1.0 KiB pickled for three nodes: tests/fixtures/pysyncobj), three per poll
/// of each cluster; a buffer for each, sized four times the compressed length (a size glibc
/// serves from its large bins), was the Raft decoder's largest allocation.
pub fn decompress_into<T>(
    data: &[u8],
    max_out: usize,
    read: impl FnOnce(&[u8]) -> Result<T, RaftError>,
) -> Result<T, RaftError> {
    INFLATE.with(|inflater| {
        let mut inflater = inflater.borrow_mut();
        let Inflater { state, chunk } = &mut *inflater;
        state.reset(true);
        let status = inflate_step(state, data, chunk)?;
        let produced = state.total_out() as usize;
        if produced > max_out {
            return Err(exceeds(max_out));
        }
        if status == Status::StreamEnd {
            return read(&chunk[..produced]);
        }
        let out = decompress_with(state, chunk, data, max_out, produced)?;
        read(&out)
    })
}

/// One call of the inflater on what is left of `data`, into `chunk`.
fn inflate_step(d: &mut Decompress, data: &[u8], chunk: &mut [u8]) -> Result<Status, RaftError> {
    let consumed = d.total_in() as usize;
    d.decompress(&data[consumed..], chunk, FlushDecompress::None)
        .map_err(|e| RaftError::decode(format!("zlib: {e}")))
}

fn exceeds(max_out: usize) -> RaftError {
    RaftError::decode(format!(
        "zlib: decompressed size exceeds the limit of {max_out} bytes"
    ))
}

/// The rest of a stream whose first `first` bytes are in `chunk` (the stream did not end
/// there), gathered into one buffer.
fn decompress_with(
    d: &mut Decompress,
    chunk: &mut [u8],
    data: &[u8],
    max_out: usize,
    first: usize,
) -> Result<Vec<u8>, RaftError> {
    // A status deflates to about a third: room for that at once, within the limit.
    let mut out: Vec<u8> = Vec::with_capacity(data.len().saturating_mul(4).min(max_out).max(first));
    out.extend_from_slice(&chunk[..first]);
    if first == 0 && d.total_in() == 0 {
        // No progress at all on the first step.
        return Err(RaftError::decode("zlib: truncated stream"));
    }
    loop {
        let in_before = d.total_in() as usize;
        let out_before = d.total_out();
        let status = inflate_step(d, data, chunk)?;
        let produced = (d.total_out() - out_before) as usize;
        if out.len() + produced > max_out {
            return Err(exceeds(max_out));
        }
        out.extend_from_slice(&chunk[..produced]);
        match status {
            Status::StreamEnd => return Ok(out),
            Status::Ok | Status::BufError => {
                if produced == 0 && d.total_in() as usize == in_before {
                    // No progress with input exhausted and output room left.
                    return Err(RaftError::decode("zlib: truncated stream"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_kind::ErrorKind;

    #[test]
    fn roundtrip_and_header() {
        let data = b"\x80\x02]q\x00X\x06\x00\x00\x00statusq\x01a.";
        let z = compress(data);
        assert_eq!(&z[..2], &[0x78, 0x5e]);
        assert_eq!(decompress(&z, 1000).unwrap(), data);
        // exact limit is fine, one less is not
        assert_eq!(decompress(&z, data.len()).unwrap(), data);
        assert_eq!(
            decompress(&z, data.len() - 1).unwrap_err().kind(),
            ErrorKind::Decode
        );
    }

    #[test]
    fn truncated_and_garbage() {
        let z = compress(&[7u8; 5000]);
        for cut in [0, 1, 2, z.len() / 2, z.len() - 1] {
            assert_eq!(
                decompress(&z[..cut], 1 << 20).unwrap_err().kind(),
                ErrorKind::Decode,
                "cut {cut}"
            );
        }
        assert_eq!(
            decompress(b"not zlib at all", 1 << 20).unwrap_err().kind(),
            ErrorKind::Decode
        );
    }

    #[test]
    fn a_reset_state_gives_the_bytes_of_a_new_one_even_after_a_failure() {
        let data = b"\x80\x02]q\x00X\x06\x00\x00\x00statusq\x01a.";
        let fresh = compress_with(&mut Compress::new(Compression::new(3), true), data);
        let long = compress(&[7u8; 5000]);
        assert!(decompress(&long[..long.len() / 2], 1 << 20).is_err());
        assert!(decompress(&long, 10).is_err());
        for _ in 0..3 {
            assert_eq!(compress(data), fresh);
            assert_eq!(decompress(&fresh, 1000).unwrap(), data);
        }
        assert_eq!(decompress(&long, 5000).unwrap(), vec![7u8; 5000]);
    }

    #[test]
    fn stored_streams_decompress_to_their_data() {
        // Lengths around the block size: none, one byte, one full block, a block and a byte.
        for len in [
            0usize,
            1,
            31,
            STORED_BLOCK_MAX,
            STORED_BLOCK_MAX + 1,
            3 * STORED_BLOCK_MAX,
        ] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
            let z = store(&data);
            assert_eq!(&z[..2], &[0x78, 0x01], "len {len}");
            assert_eq!(u16::from_be_bytes([z[0], z[1]]) % 31, 0, "header check");
            assert_eq!(
                z.len(),
                2 + data.len().div_ceil(STORED_BLOCK_MAX).max(1) * 5 + len + 4
            );
            assert_eq!(decompress(&z, len).unwrap(), data, "len {len}");
            // flate2's own zlib decoder (the checksum included) agrees.
            let mut d = Decompress::new(true);
            let mut out = Vec::with_capacity(len + 16);
            let status = d
                .decompress_vec(&z, &mut out, FlushDecompress::Finish)
                .unwrap();
            assert_eq!((status, out), (Status::StreamEnd, data), "len {len}");
        }
    }

    #[test]
    fn adler32_matches_known_values() {
        // RFC 1950's sums: "Wikipedia" is 0x11E60398; of nothing, 1; a long run reduces.
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(adler32(b""), 1);
        let long = vec![0xffu8; 100_000];
        let z = compress(&long);
        let n = z.len();
        assert_eq!(adler32(&long).to_be_bytes(), z[n - 4..]);
    }

    #[test]
    fn a_corrupt_stored_stream_is_refused() {
        let mut z = store(b"status");
        let n = z.len();
        z[n - 1] ^= 1; // the checksum
        assert_eq!(decompress(&z, 100).unwrap_err().kind(), ErrorKind::Decode);
        let mut z = store(b"status");
        z[4] ^= 1; // NLEN no longer the complement of LEN
        assert_eq!(decompress(&z, 100).unwrap_err().kind(), ErrorKind::Decode);
    }

    #[test]
    fn empty_payload_ok() {
        let z = compress(b"");
        assert_eq!(decompress(&z, 0).unwrap(), b"");
        assert_eq!(decompress(&z, 10).unwrap(), b"");
    }

    #[test]
    fn bomb_fails_fast() {
        // 64 MiB of zeros compress to ~64 KB; the limit stops it at 4 MiB.
        let big = vec![0u8; 64 << 20];
        let z = compress(&big);
        drop(big);
        let t = std::time::Instant::now();
        let e = decompress(&z, 4 << 20).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Decode);
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
    }
}
