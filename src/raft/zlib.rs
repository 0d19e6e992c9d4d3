//! zlib layer. pysyncobj compresses every pickle with `zlib.compress(data, 3)` (a zlib
//! stream with header and Adler-32, never raw deflate or gzip).
//!
//! Decompression is streamed into an output buffer that is never allowed to grow past
//! [`super::QueryLimits::max_decompressed_bytes`]: a 1 KB frame that inflates to 1 GB is
//! rejected after the limit is reached, in bounded time and memory.
//!
//! Why one compressor and one decompressor per thread, reset for each message: a new deflate
//! state is about 300 KB (miniz's dictionary and hash chains) allocated and zeroed, an inflate
//! state 40 KB, for messages of a few dozen bytes (a request) to a few KB (a status); with two
//! of each per Raft query, creating them was 3 % of the exporter's CPU polling 1000 clusters
//! (docs/bench/profile-n1000.md), and freeing blocks that large made malloc consolidate its
//! free lists. A reset state compresses to the same bytes as a new one.

use std::cell::RefCell;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::RaftError;

/// The size of the window decompressed into at a time.
const CHUNK: usize = 16 * 1024;

/// A decompressor and the window it writes into.
struct Inflater {
    state: Decompress,
    chunk: Box<[u8]>,
}

thread_local! {
    static DEFLATE: RefCell<Compress> = RefCell::new(Compress::new(Compression::new(3), true));
    static INFLATE: RefCell<Inflater> = RefCell::new(Inflater {
        state: Decompress::new(true),
        chunk: vec![0u8; CHUNK].into_boxed_slice(),
    });
}

/// Compresses with level 3, like pysyncobj (header `78 5e`).
pub fn compress(data: &[u8]) -> Vec<u8> {
    DEFLATE.with(|c| {
        let mut c = c.borrow_mut();
        c.reset();
        compress_with(&mut c, data)
    })
}

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
    INFLATE.with(|inflater| {
        let mut inflater = inflater.borrow_mut();
        let Inflater { state, chunk } = &mut *inflater;
        state.reset(true);
        decompress_with(state, chunk, data, max_out)
    })
}

fn decompress_with(
    d: &mut Decompress,
    chunk: &mut [u8],
    data: &[u8],
    max_out: usize,
) -> Result<Vec<u8>, RaftError> {
    let mut out: Vec<u8> = Vec::new();
    loop {
        let in_before = d.total_in() as usize;
        let out_before = d.total_out();
        let status = d
            .decompress(&data[in_before..], chunk, FlushDecompress::None)
            .map_err(|e| RaftError::decode(format!("zlib: {e}")))?;
        let produced = (d.total_out() - out_before) as usize;
        if out.len() + produced > max_out {
            return Err(RaftError::decode(format!(
                "zlib: decompressed size exceeds the limit of {max_out} bytes"
            )));
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
