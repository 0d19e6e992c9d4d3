//! A wrapper for passwords that cannot leak through `Debug`, `Display` or logs.
//!
//! Secrets only ever come from files (a password file, or the Patroni YAML), never from a
//! command-line value, because argv is world-readable in `/proc`.

use std::fmt;
use std::path::Path;

/// A secret string. `Debug` prints `Secret(<redacted>)`; there is no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// Reads a secret from a file, without its trailing newline (as `echo pw > file` writes it).
    ///
    /// # Errors
    /// When the file cannot be read. The error names the file, never its content.
    pub fn from_file(path: &Path) -> anyhow::Result<Secret> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| anyhow::anyhow!("reading secret file {}: {error}", path.display()))?;
        Ok(Secret(text.trim_end_matches(['\n', '\r']).to_owned()))
    }

    /// The secret itself, for the one place that must use it.
    pub fn expose(&self) -> &str {
        &self.0
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
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pw");
        std::fs::write(&path, " p w \n").unwrap();
        assert_eq!(Secret::from_file(&path).unwrap().expose(), " p w ");
    }
}
