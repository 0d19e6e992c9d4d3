//! zlib layer. pysyncobj compresses every pickle with `zlib.compress(data, 3)` (a zlib
//! stream with header and Adler-32, never raw deflate or gzip).
//!
//! Decompression is streamed into an output buffer that is never allowed to grow past
//! [`super::QueryLimits::max_decompressed_bytes`]: a 1 KB frame that inflates to 1 GB is
//! rejected after the limit is reached, in bounded time and memory.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::RaftError;

/// Compresses with level 3, like pysyncobj (header `78 5e`).
pub fn compress(data: &[u8]) -> Vec<u8> {
    let mut c = Compress::new(Compression::new(3), true);
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
    let mut d = Decompress::new(true);
    let mut out: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let in_before = d.total_in() as usize;
        let out_before = d.total_out();
        let status = d
            .decompress(&data[in_before..], &mut chunk, FlushDecompress::None)
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
