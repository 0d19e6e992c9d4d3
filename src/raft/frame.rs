//! Length-prefixed framing: `i32` length (native endian in pysyncobj, little-endian on
//! every real deployment) followed by that many payload bytes.
//!
//! pysyncobj itself has no maximum frame size, so the reader checks the announced length
//! against [`super::QueryLimits::max_frame_bytes`] *before* allocating: a hostile or
//! non-Raft peer (an HTTP server answering `HTTP/1.1 …` announces ~1.3 GB) cannot make us
//! allocate.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::RaftError;

/// Size of the length header.
pub const HEADER_LEN: usize = 4;

/// Validates a frame header and returns the payload length.
///
/// A negative length (pysyncobj packs a signed int) or one above `max_frame_bytes` is a
/// protocol error.
pub fn parse_header(header: [u8; HEADER_LEN], max_frame_bytes: usize) -> Result<usize, RaftError> {
    let n = i32::from_le_bytes(header);
    if n < 0 {
        return Err(RaftError::protocol(format!(
            "negative frame length {n} (not a pysyncobj raft port?)"
        )));
    }
    let n = n as usize;
    if n > max_frame_bytes {
        return Err(RaftError::protocol(format!(
            "frame length {n} exceeds the limit of {max_frame_bytes} bytes (not a pysyncobj raft port?)"
        )));
    }
    Ok(n)
}

/// Builds one frame (header and payload).
pub fn encode(payload: &[u8]) -> Result<Vec<u8>, RaftError> {
    let n = i32::try_from(payload.len())
        .map_err(|_| RaftError::protocol("outgoing frame larger than 2 GiB"))?;
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(payload);
    Ok(out)
}

/// Splits one complete frame from the start of `buf`: returns the payload and the rest.
/// Used by tests and fuzzing; the network path uses [`read_frame`].
pub fn split_frame(buf: &[u8], max_frame_bytes: usize) -> Result<(&[u8], &[u8]), RaftError> {
    if buf.len() < HEADER_LEN {
        return Err(RaftError::protocol("truncated frame header"));
    }
    let mut header = [0u8; HEADER_LEN];
    header.copy_from_slice(&buf[..HEADER_LEN]);
    let n = parse_header(header, max_frame_bytes)?;
    let rest = &buf[HEADER_LEN..];
    if rest.len() < n {
        return Err(RaftError::protocol(format!(
            "truncated frame: {} of {n} payload bytes",
            rest.len()
        )));
    }
    Ok(rest.split_at(n))
}

/// What [`read_frame`] saw when the connection ended or failed.
#[derive(Debug)]
pub enum ReadError {
    /// Clean EOF or a reset before any byte of the frame arrived.
    ClosedBeforeFrame(std::io::Error),
    /// Any other failure (truncated frame, bad header, I/O error mid-frame).
    Other(RaftError),
}

/// Reads one frame payload.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max_frame_bytes: usize,
) -> Result<Vec<u8>, ReadError> {
    let mut header = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        match reader.read(&mut header[got..]).await {
            Ok(0) => {
                return Err(if got == 0 {
                    ReadError::ClosedBeforeFrame(std::io::ErrorKind::UnexpectedEof.into())
                } else {
                    ReadError::Other(RaftError::protocol(
                        "connection closed inside a frame header",
                    ))
                })
            }
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(if got == 0 {
                    ReadError::ClosedBeforeFrame(e)
                } else {
                    ReadError::Other(RaftError::protocol(format!(
                        "connection lost inside a frame header: {e}"
                    )))
                })
            }
        }
    }
    let n = parse_header(header, max_frame_bytes).map_err(ReadError::Other)?;
    // Allocation is bounded by the check above.
    let mut payload = vec![0u8; n];
    reader.read_exact(&mut payload).await.map_err(|e| {
        ReadError::Other(RaftError::protocol(format!(
            "connection lost inside a frame of {n} bytes: {e}"
        )))
    })?;
    Ok(payload)
}

/// Writes one frame and flushes.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    payload: &[u8],
) -> std::io::Result<()> {
    let frame = encode(payload).map_err(std::io::Error::other)?;
    writer.write_all(&frame).await?;
    writer.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_kind::ErrorKind;

    #[test]
    fn header_limits() {
        assert_eq!(parse_header(28u32.to_le_bytes(), 100).unwrap(), 28);
        assert_eq!(parse_header(0u32.to_le_bytes(), 100).unwrap(), 0);
        let e = parse_header(0x7fff_ffffu32.to_le_bytes(), 1 << 20).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol);
        let e = parse_header((-1i32).to_le_bytes(), 1 << 20).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol);
        let e = parse_header(*b"HTTP", 1 << 20).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol);
    }

    #[test]
    fn encode_split_roundtrip() {
        let f = encode(b"hello").unwrap();
        assert_eq!(&f[..4], &[5, 0, 0, 0]);
        let (p, rest) = split_frame(&f, 10).unwrap();
        assert_eq!(p, b"hello");
        assert!(rest.is_empty());
        assert_eq!(
            split_frame(&f[..6], 10).unwrap_err().kind(),
            ErrorKind::Protocol
        );
        assert_eq!(split_frame(&f, 4).unwrap_err().kind(), ErrorKind::Protocol);
    }

    #[tokio::test]
    async fn read_frame_cases() {
        let data = encode(b"abc").unwrap();
        let mut r: &[u8] = &data;
        assert_eq!(read_frame(&mut r, 10).await.unwrap(), b"abc");
        let mut r: &[u8] = &[];
        assert!(matches!(
            read_frame(&mut r, 10).await,
            Err(ReadError::ClosedBeforeFrame(_))
        ));
        let mut r: &[u8] = &data[..2];
        assert!(matches!(
            read_frame(&mut r, 10).await,
            Err(ReadError::Other(_))
        ));
        let mut r: &[u8] = &data[..5];
        assert!(matches!(
            read_frame(&mut r, 10).await,
            Err(ReadError::Other(_))
        ));
    }
}
