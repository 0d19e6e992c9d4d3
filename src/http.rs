//! The HTTP plumbing both HTTP sources share: the Patroni REST source and the etcd JSON
//! gateway source.
//!
//! Why a module of its own: the two sources must know nothing of each other, yet both need
//! the same three things, and each is easy to get subtly wrong twice:
//!
//! * a `reqwest::Client` built from the TLS files an operator names (CA bundle, client
//!   certificate and key, the key's passphrase, insecure mode), with no redirects and no
//!   environment proxy: the peers are addressed directly, and a redirect or a proxy would
//!   change what we see;
//! * a body read in chunks against a byte cap, never with an unbounded `bytes()`: a peer can
//!   stream for ever;
//! * the classification of a transport failure into [`ErrorKind::Timeout`],
//!   [`ErrorKind::Tls`], [`ErrorKind::Connect`] or [`ErrorKind::Transport`], told by the
//!   error's causes rather than their wording.
//!
//! Each source keeps its own error enum, its own requests and its own parsers.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error_kind::ErrorKind;
use crate::secret::Secret;

/// The TLS side of a client: what to trust and what to present.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// PEM CA bundle to trust in addition to the system's roots.
    pub ca_file: Option<PathBuf>,
    /// Accept any server certificate (logged once as a warning by the caller).
    pub insecure_skip_verify: bool,
    /// PEM client certificate (chain), for peers that require one.
    pub cert_file: Option<PathBuf>,
    /// PEM private key of `cert_file`.
    pub key_file: Option<PathBuf>,
    /// Passphrase of an encrypted `key_file`.
    pub key_password: Option<Secret>,
}

/// How a client's files are read: [`crate::capped_file::read_small`] (a path and what it is,
/// for errors), or a test's reader that counts.
pub type ReadFile<'a> = dyn Fn(&Path, &str) -> anyhow::Result<Vec<u8>> + 'a;

/// What the CA file, the client certificate and its key are called in errors.
const CA_FILE: &str = "CA file";
const CLIENT_CERTIFICATE: &str = "client certificate";
const KEY_FILE: &str = "key file";

/// The files a [`TlsSettings`] names, read once: a client pool's key can be a digest of their
/// content and a new client parses it, so that both see the same bytes.
pub struct TlsFiles {
    pub ca: Option<PemFile>,
    /// The client certificate and its key.
    pub identity: Option<(PemFile, PemFile)>,
}

/// A PEM file's path (for errors) and content.
pub struct PemFile {
    pub path: PathBuf,
    pub pem: Vec<u8>,
}

impl PemFile {
    fn read(path: &Path, what: &str, read: &ReadFile<'_>) -> anyhow::Result<PemFile> {
        Ok(PemFile {
            path: path.to_owned(),
            pem: read(path, what)?,
        })
    }
}

impl TlsFiles {
    /// Reads the files `tls` names with `read`.
    ///
    /// # Errors
    /// When a file cannot be read, or a certificate is named without its key (or the reverse).
    pub fn read(tls: &TlsSettings, read: &ReadFile<'_>) -> anyhow::Result<TlsFiles> {
        let ca = match &tls.ca_file {
            Some(path) => Some(PemFile::read(path, CA_FILE, read)?),
            None => None,
        };
        let identity = match (&tls.cert_file, &tls.key_file) {
            (Some(cert_file), Some(key_file)) => Some((
                PemFile::read(cert_file, CLIENT_CERTIFICATE, read)?,
                PemFile::read(key_file, KEY_FILE, read)?,
            )),
            (None, None) => None,
            _ => anyhow::bail!("a client certificate needs both a certificate file and a key file"),
        };
        Ok(TlsFiles { ca, identity })
    }
}

/// A `reqwest::Client` trusting and presenting what `files` (read from `tls`) hold, with
/// `timeout` on the connect and on the whole request, no redirects and no proxy.
///
/// # Errors
/// When a certificate or the key cannot be parsed, or they do not form an identity.
pub fn build_client(
    tls: &TlsSettings,
    files: &TlsFiles,
    timeout: Duration,
) -> anyhow::Result<reqwest::Client> {
    let builder = reqwest::Client::builder()
        .connect_timeout(timeout)
        .timeout(timeout)
        // Neither Patroni nor etcd redirects; following one would let a peer point us anywhere.
        .redirect(reqwest::redirect::Policy::none())
        // The peers are addressed directly; an environment proxy would change what we see.
        .no_proxy()
        .user_agent(concat!("patroni-raft-exporter/", env!("CARGO_PKG_VERSION")));
    // Parsed by rustls-pki-types: reqwest's own parser accepts a file with no certificate
    // at all, which would silently trust nothing extra.
    let extra_roots = match &files.ca {
        Some(ca) => crate::tls::parse_certificates(&ca.pem, &ca.path, CA_FILE)?,
        None => Vec::new(),
    };
    let identity = match &files.identity {
        Some((cert, key)) => Some((
            crate::tls::parse_certificates(&cert.pem, &cert.path, CLIENT_CERTIFICATE)?,
            crate::tls::parse_private_key(&key.pem, &key.path, tls.key_password.as_ref())?,
        )),
        None => None,
    };
    // Our own rustls configuration, for its session cache (src/tls.rs says why). A CA
    // certificate whose PEM decodes but whose DER does not parse is refused only here, by the
    // verifier: the error names every file that went into it.
    let config = crate::tls::client_config(extra_roots, identity, tls.insecure_skip_verify)
        .map_err(|error| {
            let ca = files
                .ca
                .iter()
                .map(|ca| format!("{CA_FILE} {}", ca.path.display()));
            let identity = files.identity.iter().flat_map(|(cert, key)| {
                [
                    format!("{CLIENT_CERTIFICATE} {}", cert.path.display()),
                    format!("{KEY_FILE} {}", key.path.display()),
                ]
            });
            let named: Vec<String> = ca.chain(identity).collect();
            let verb = if named.len() == 1 { "does" } else { "do" };
            if named.is_empty() {
                error
            } else {
                anyhow::anyhow!(
                    "{} {verb} not make a usable TLS configuration ({error})",
                    named.join(", ")
                )
            }
        })?;
    Ok(builder.tls_backend_preconfigured(config).build()?)
}

/// Why a bounded body read gave no body.
#[derive(Debug)]
pub enum BodyError {
    /// The body (or its announced `Content-Length`) exceeds the cap.
    TooLarge,
    /// The transport failed while the body was read.
    Transport(reqwest::Error),
}

/// The body of `response`, refused as soon as it exceeds `cap` bytes: read in chunks, never
/// with an unbounded `bytes()`. A `Content-Length` above the cap is refused before any read.
///
/// # Errors
/// [`BodyError::TooLarge`] past the cap, [`BodyError::Transport`] when a read fails.
pub async fn read_body(response: &mut reqwest::Response, cap: usize) -> Result<Vec<u8>, BodyError> {
    if response
        .content_length()
        .is_some_and(|length| length > cap as u64)
    {
        return Err(BodyError::TooLarge);
    }
    let mut body = Vec::with_capacity(4096);
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Transport)? {
        if body.len() + chunk.len() > cap {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// What a failed request's causes say: [`ErrorKind::Timeout`], [`ErrorKind::Tls`],
/// [`ErrorKind::Connect`] or [`ErrorKind::Transport`].
///
/// TLS is told by its causes, not by their wording: a `rustls::Error` among them (an unknown
/// issuer, a name mismatch, or the server's alert refusing a missing client certificate,
/// which TLS 1.3 sends after the handshake, so that it surfaces on the first read), or the
/// peer closing the connection while it was being made: a TCP connect never ends in an
/// unexpected end of file, a TLS handshake does (tokio-rustls' "tls handshake eof").
pub fn transport_failure(error: &reqwest::Error) -> ErrorKind {
    // reqwest walks the chain itself for its own, hyper's and the OS's timeouts.
    if error.is_timeout() {
        return ErrorKind::Timeout;
    }
    if causes(error).any(|cause| cause.is::<rustls::Error>()) {
        return ErrorKind::Tls;
    }
    if !error.is_connect() {
        return ErrorKind::Transport;
    }
    let cut_short = causes(error).any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::UnexpectedEof)
    });
    if cut_short {
        ErrorKind::Tls
    } else {
        ErrorKind::Connect
    }
}

/// Whether a connect failed because nothing listens on the port (the host answered with a
/// reset): the process is down, as opposed to a host that cannot be reached. The quorum
/// verdicts count such members as evidence of a loss; a timeout is none.
pub fn connection_refused(error: &reqwest::Error) -> bool {
    causes(error).any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    })
}

/// An error and its causes, outermost first, including the error an `io::Error` wraps:
/// `io::Error::source` skips that one (it returns the wrapped error's own source), and
/// rustls' errors reach hyper wrapped in an `io::Error` by tokio-rustls.
pub fn causes<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(error), |current| {
        let wrapped = current
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref);
        match wrapped {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => current.source(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_reach_into_the_error_an_io_error_wraps() {
        // As tokio-rustls hands a TLS alert to hyper: an io::Error wrapping the rustls error,
        // whose `source()` would skip it.
        let alert = rustls::Error::AlertReceived(rustls::AlertDescription::CertificateRequired);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, alert);
        let outer = anyhow::Error::new(io).context("error sending request");
        let chain: Vec<String> = causes(outer.as_ref()).map(|c| c.to_string()).collect();
        assert_eq!(chain.len(), 3, "{chain:?}");
        assert!(causes(outer.as_ref()).any(|cause| cause.is::<rustls::Error>()));
        let plain = anyhow::Error::new(std::io::Error::other("reset")).context("sending");
        assert!(!causes(plain.as_ref()).any(|cause| cause.is::<rustls::Error>()));
    }

    #[test]
    fn a_certificate_without_its_key_is_refused() {
        let tls = TlsSettings {
            cert_file: Some("/nonexistent/c.pem".into()),
            ..TlsSettings::default()
        };
        let never_read = |_: &Path, _: &str| -> anyhow::Result<Vec<u8>> { unreachable!() };
        let error = TlsFiles::read(&tls, &never_read).err().unwrap().to_string();
        assert!(
            error.contains("both a certificate file and a key file"),
            "{error}"
        );
    }
}
