//! The one way the exporter reads a file an operator names (certificates, keys, YAML files,
//! secrets): bounded, so that a wrong path (a device, a log file) cannot exhaust memory, and
//! with errors that name the file and never show its content.

use std::io::Read;
use std::path::Path;

/// Reads at most `max` bytes of `path` into `buffer` (appended); a larger file is refused.
/// `what` names the file in errors ("secret file", "CA file").
///
/// Reading into the caller's buffer lets a secret be read straight into memory that is
/// wiped when dropped.
///
/// # Errors
/// When the file cannot be opened or read, or holds more than `max` bytes.
pub fn read_into(path: &Path, what: &str, max: u64, buffer: &mut Vec<u8>) -> anyhow::Result<()> {
    let start = buffer.len();
    std::fs::File::open(path)
        .and_then(|file| file.take(max + 1).read_to_end(buffer))
        .map_err(|error| anyhow::anyhow!("reading {what} {}: {error}", path.display()))?;
    if (buffer.len() - start) as u64 > max {
        anyhow::bail!("{what} {} is larger than {max} bytes", path.display());
    }
    Ok(())
}

/// Certificates, keys and configuration files are a few KiB: [`read_small`] refuses a larger
/// file.
pub const MAX_SMALL_FILE_BYTES: u64 = 1 << 20;

/// [`read`] with the cap of [`MAX_SMALL_FILE_BYTES`]: certificates, keys, the YAML files.
///
/// # Errors
/// As [`read_into`].
pub fn read_small(path: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    read(path, what, MAX_SMALL_FILE_BYTES)
}

/// [`read_into`] a new buffer.
///
/// # Errors
/// As [`read_into`].
pub fn read(path: &Path, what: &str, max: u64) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    read_into(path, what, max, &mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_named() {
        let (dir, path) = crate::temp_file("f", b"12345");
        assert_eq!(read(&path, "test file", 5).unwrap(), b"12345");
        let error = read(&path, "test file", 4).unwrap_err().to_string();
        assert!(
            error.contains("test file") && error.contains("larger than 4 bytes"),
            "{error}"
        );
        assert!(!error.contains("12345"));
        let missing = read(&dir.path().join("none"), "test file", 4)
            .unwrap_err()
            .to_string();
        assert!(missing.starts_with("reading test file"), "{missing}");
    }
}
