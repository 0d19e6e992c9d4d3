//! A wrapper for passwords that cannot leak through `Debug`, `Display` or logs.
//!
//! Secrets only ever come from files (a password file, or the Patroni YAML), never from a
//! command-line value, because argv is world-readable in `/proc`. They are wiped from memory
//! when dropped (`zeroize`), so that a core dump or a later heap read shows no old password.

use std::fmt;
use std::path::Path;

use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

/// A secret string. `Debug` prints `Secret(<redacted>)`; there is no `Display`. Wiped on drop.
#[derive(Clone, PartialEq, Eq, Zeroize, ZeroizeOnDrop)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// Reads a secret from a file, without its trailing newline (as `echo pw > file` writes it).
    /// Files larger than 64 KiB are refused (a password file is a line).
    ///
    /// # Errors
    /// When the file cannot be read, is too large or is not UTF-8. The error names the file,
    /// never its content.
    pub fn from_file(path: &Path) -> anyhow::Result<Secret> {
        const MAX: u64 = 64 * 1024;
        let mut bytes = Zeroizing::new(Vec::new());
        crate::capped_file::read_into(path, "secret file", MAX, &mut bytes)?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| anyhow::anyhow!("secret file {} is not UTF-8", path.display()))?;
        Ok(Secret(text.trim_end_matches(['\n', '\r']).to_owned()))
    }

    /// The secret itself, for the one place that must use it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Read from YAML as a plain string (Patroni's `raft.password`), kept wrapped from then on.
impl<'de> serde::Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Secret, D::Error> {
        String::deserialize(deserializer).map(Secret)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("Secret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let secret = Secret::new("raft-pass");
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
        assert_eq!(format!("{:?}", Some(secret)), "Some(Secret(<redacted>))");
    }

    #[test]
    fn file_loses_trailing_newline_only() {
        let (_dir, path) = crate::temp_file("pw", " p w \n");
        assert_eq!(Secret::from_file(&path).unwrap().expose(), " p w ");
    }
}
