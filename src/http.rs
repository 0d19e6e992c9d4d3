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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use sha2::{Digest, Sha256};

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

/// Clients shared by every cluster whose settings give the same key, for as long as one of
/// them uses it: [`Transports`] and the Patroni source's pool of clients.
///
/// Held weakly, so that a client goes with its last user (a reload that changes a CA file
/// leaves the old client to the pollers still polling with it); entries whose client is gone
/// are dropped on the next lookup. The lock is held while a missing client is built, so two
/// clusters with the same settings never build two.
pub struct SharedClients<K, C> {
    clients: Arc<Mutex<HashMap<K, Weak<C>>>>,
}

impl<K: Eq + std::hash::Hash, C> SharedClients<K, C> {
    /// The client for `key`: the one in use, or a new one from `build`.
    ///
    /// # Errors
    /// What `build` returns.
    pub fn get_or_build(
        &self,
        key: K,
        build: impl FnOnce() -> anyhow::Result<C>,
    ) -> anyhow::Result<Arc<C>> {
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        clients.retain(|_, client| client.strong_count() > 0);
        if let Some(client) = clients.get(&key).and_then(Weak::upgrade) {
            return Ok(client);
        }
        let client = Arc::new(build()?);
        clients.insert(key, Arc::downgrade(&client));
        Ok(client)
    }

    /// How many clients are in use.
    pub fn len(&self) -> usize {
        let clients = self
            .clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        clients
            .values()
            .filter(|client| client.strong_count() > 0)
            .count()
    }

    /// Whether no client is in use.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

// By hand: derived, these would ask `K` and `C` to be `Clone`, `Default` and `Debug` too.
impl<K, C> Clone for SharedClients<K, C> {
    fn clone(&self) -> Self {
        SharedClients {
            clients: Arc::clone(&self.clients),
        }
    }
}

impl<K, C> Default for SharedClients<K, C> {
    fn default() -> Self {
        SharedClients {
            clients: Arc::default(),
        }
    }
}

impl<K: Eq + std::hash::Hash, C> std::fmt::Debug for SharedClients<K, C> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SharedClients")
            .field("in_use", &self.len())
            .finish()
    }
}

/// The HTTP transports (`reqwest` clients) of a fleet's sources that keep their own state
/// beside the transport (the etcd client keeps its tokens per cluster): one per distinct TLS
/// set-up and timeout, shared by every cluster with the same ones.
///
/// Why: a client carries its own rustls configuration with the system's roots parsed, about
/// 260 KB; one per cluster cost 130 MiB at 500 clusters on etcd (`scripts/bench.sh fleet`,
/// `ETCD_SHARE=50`). Told apart by timeout, the *content* of the CA file, of the client
/// certificate and key, the key's passphrase and insecure mode, so that a transport never
/// presents one cluster's certificate to another's peers. Only a SHA-256 of them is kept.
/// Held weakly: a transport goes when no client uses it.
#[derive(Debug, Clone, Default)]
pub struct Transports {
    clients: SharedClients<[u8; 32], reqwest::Client>,
    built: Arc<std::sync::atomic::AtomicUsize>,
}

impl Transports {
    /// The transport for `tls` (whose files `files` holds, read once) and `timeout`: the
    /// one already built for the same, or a new one ([`build_client`]).
    ///
    /// # Errors
    /// As [`build_client`].
    pub fn get(
        &self,
        tls: &TlsSettings,
        files: &TlsFiles,
        timeout: Duration,
    ) -> anyhow::Result<Arc<reqwest::Client>> {
        self.clients
            .get_or_build(transport_key(tls, files, timeout), || {
                let client = build_client(tls, files, timeout)?;
                self.built
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(client)
            })
    }

    /// How many transports were built since the pool was made (a transport taken again is
    /// not counted): what a configuration's load costs.
    pub fn built(&self) -> usize {
        self.built.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many transports are alive.
    pub fn len(&self) -> usize {
        self.clients.len()
    }

    /// Whether no transport is alive.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The digest that tells two transports apart (see [`Transports`]): each part present or
/// absent (a tag), then length-prefixed, so that no two different set-ups hash alike.
fn transport_key(tls: &TlsSettings, files: &TlsFiles, timeout: Duration) -> [u8; 32] {
    let mut digest = Sha256::new();
    let mut part = |bytes: Option<&[u8]>| match bytes {
        Some(bytes) => {
            digest.update([1]);
            digest.update((bytes.len() as u64).to_be_bytes());
            digest.update(bytes);
        }
        None => digest.update([0]),
    };
    part(Some(&timeout.as_nanos().to_be_bytes()));
    part(Some(&[u8::from(tls.insecure_skip_verify)]));
    part(files.ca.as_ref().map(|ca| &ca.pem[..]));
    part(files.identity.as_ref().map(|(cert, _)| &cert.pem[..]));
    part(files.identity.as_ref().map(|(_, key)| &key.pem[..]));
    part(
        tls.key_password
            .as_ref()
            .map(|password| password.expose().as_bytes()),
    );
    digest.finalize().into()
}

/// Why a bounded body read gave no body.
#[derive(Debug)]
pub enum BodyError {
    /// The body (or its announced `Content-Length`) exceeds the cap.
    TooLarge,
    /// The transport failed while the body was read.
    Transport(reqwest::Error),
}

/// The most [`read_body`] reserves before the bytes arrive.
const MAX_RESERVED_BODY: usize = 64 * 1024;

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
    // As large as the announced length (already checked against the cap), else grown to the
    // first chunk's exact size: a fixed 4 KiB buffer was a large-bin allocation for every
    // answer, most of which are under 1 KiB, and glibc consolidates its fast bins on each.
    // At most 64 KiB reserved on the announcement alone: a member that announces the cap and
    // hangs holds no more than that until the deadline.
    let announced = response
        .content_length()
        .map_or(0, |length| length as usize);
    let mut body = Vec::with_capacity(announced.min(MAX_RESERVED_BODY));
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

    #[test]
    fn transports_are_shared_by_tls_set_up_and_timeout_only() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, pem: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).unwrap();
            path
        };
        let one = rcgen::generate_simple_self_signed(vec!["one".into()]).unwrap();
        let two = rcgen::generate_simple_self_signed(vec!["two".into()]).unwrap();
        let ca_one = write("ca-one.pem", one.cert.pem());
        let ca_two = write("ca-two.pem", two.cert.pem());
        let cert = write("c.pem", one.cert.pem());
        let key = write("k.pem", one.signing_key.serialize_pem());
        let transports = Transports::default();
        let get = |tls: &TlsSettings, timeout: u64| {
            let files = TlsFiles::read(tls, &crate::capped_file::read_small).unwrap();
            transports
                .get(tls, &files, Duration::from_secs(timeout))
                .unwrap()
        };
        let plain = TlsSettings::default();
        let with_ca = |ca: &std::path::PathBuf| TlsSettings {
            ca_file: Some(ca.clone()),
            ..TlsSettings::default()
        };
        let a = get(&plain, 5);
        assert!(
            Arc::ptr_eq(&a, &get(&plain, 5)),
            "the same set-up: one transport"
        );
        assert!(!Arc::ptr_eq(&a, &get(&plain, 6)), "another timeout");
        let b = get(&with_ca(&ca_one), 5);
        assert!(!Arc::ptr_eq(&a, &b), "a CA");
        assert!(
            !Arc::ptr_eq(&b, &get(&with_ca(&ca_two), 5)),
            "another CA's content"
        );
        let identity = TlsSettings {
            cert_file: Some(cert.clone()),
            key_file: Some(key.clone()),
            ..with_ca(&ca_one)
        };
        let c = get(&identity, 5);
        assert!(
            !Arc::ptr_eq(&b, &c),
            "a client certificate: never presented to another"
        );
        assert!(Arc::ptr_eq(&c, &get(&identity, 5)));
        assert_eq!(transports.len(), 3, "a, b, c alive; the others dropped");
        drop((a, b, c));
        assert!(transports.is_empty(), "held weakly");
    }
}
