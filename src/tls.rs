//! PEM files for both TLS sides: the Patroni client (CA bundle, client certificate and key)
//! and the exporter's own listener (`--web.config.file`).
//!
//! rustls reads PEM certificates and unencrypted keys itself (through `rustls-pki-types`);
//! what it does not do is decrypt a private key protected by a passphrase (Patroni's
//! `keyfile_password`). The `pkcs8` crate does that for the standard PKCS#8
//! `ENCRYPTED PRIVATE KEY` form (PBES2: PBKDF2 or scrypt with AES-CBC, what `openssl genpkey
//! -aes256` and `openssl pkcs8 -topk8 -v2 aes256` write). The legacy OpenSSL form
//! (`Proc-Type: 4,ENCRYPTED`, MD5-based) is refused with a hint to convert it.
//!
//! Errors name the file, never its content nor the passphrase.
//!
//! The Patroni client's rustls configuration is made here ([`client_config`]) rather than by
//! reqwest, for one reason: TLS session resumption across a fleet. Patroni's REST server
//! (Python's `ssl`) closes the connection after every answer, so each request is a new TLS
//! connection; resuming a session saves the certificate chain, its verification and the
//! server's signature. reqwest leaves rustls' default session cache, which remembers
//! 32 servers (`Resumption::default()`: 256 sessions, 8 per server) and evicts the oldest
//! first: polling more members than that in turn, a member's tickets are always gone when
//! its turn comes back, and only requests of one poll to the same member resume.
//! [`SESSION_CACHE_SERVERS`] members are remembered instead (docs/performance.md, "Cost per
//! cluster"). What reqwest did otherwise is
//! done the same way: the platform's roots plus the CA file (rustls-platform-verifier, as
//! reqwest), the client certificate, HTTP/1.1 in ALPN, and no verification at all in
//! insecure mode.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::secret::Secret;

/// Every certificate of a PEM file (at least one).
///
/// # Errors
/// When the file cannot be read, holds no certificate, or a certificate block is malformed.
pub fn load_certificates(path: &Path, what: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    parse_certificates(&crate::capped_file::read_small(path, what)?, path, what)
}

/// Every certificate of `pem`, the content of the file `path` (named in errors, with `what`).
///
/// # Errors
/// When it holds no certificate, or a certificate block is malformed.
pub fn parse_certificates(
    pem: &[u8],
    path: &Path,
    what: &str,
) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| anyhow::anyhow!("parsing {what} {}: {error}", path.display()))?;
    if certificates.is_empty() {
        anyhow::bail!("{what} {} holds no PEM certificate", path.display());
    }
    Ok(certificates)
}

/// The private key of a PEM file, decrypted with `password` when it is an encrypted PKCS#8 key.
///
/// # Errors
/// When the file cannot be read, holds no key, is encrypted without a password being given,
/// the password is wrong, or the legacy OpenSSL encryption is used.
pub fn load_private_key(
    path: &Path,
    password: Option<&Secret>,
) -> anyhow::Result<PrivateKeyDer<'static>> {
    parse_private_key(
        &crate::capped_file::read_small(path, "key file")?,
        path,
        password,
    )
}

/// The private key of `pem`, the content of the key file `path` (named in errors), decrypted
/// as [`load_private_key`] does.
///
/// # Errors
/// As [`load_private_key`], but for reading the file.
pub fn parse_private_key(
    pem: &[u8],
    path: &Path,
    password: Option<&Secret>,
) -> anyhow::Result<PrivateKeyDer<'static>> {
    let text = String::from_utf8_lossy(pem);
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        anyhow::bail!(
            "key file {} uses the legacy OpenSSL encryption; convert it with `openssl pkcs8 -topk8 -v2 aes256`",
            path.display()
        );
    }
    if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        let Some(password) = password else {
            anyhow::bail!(
                "key file {} is encrypted and no key password is configured",
                path.display()
            );
        };
        let (label, der) = pkcs8::der::pem::decode_vec(pem)
            .map_err(|_| anyhow::anyhow!("key file {}: invalid encrypted PEM", path.display()))?;
        if label != "ENCRYPTED PRIVATE KEY" {
            anyhow::bail!(
                "key file {}: expected one ENCRYPTED PRIVATE KEY block",
                path.display()
            );
        }
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice()).map_err(|_| {
            anyhow::anyhow!("key file {}: invalid encrypted PKCS#8 key", path.display())
        })?;
        let document = info.decrypt(password.expose().as_bytes()).map_err(|_| {
            anyhow::anyhow!(
                "key file {}: cannot decrypt the key (wrong password or unsupported cipher)",
                path.display()
            )
        })?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            document.as_bytes().to_vec(),
        )));
    }
    PrivateKeyDer::from_pem_slice(pem).map_err(|error| {
        anyhow::anyhow!(
            "key file {}: no usable private key ({error})",
            path.display()
        )
    })
}

/// Servers (member addresses) whose TLS sessions the Patroni client remembers: the 3000
/// members of 1000 clusters and room to spare. rustls reserves its table for this many
/// servers at start and keeps up to 8 tickets per server, each with its copy of the server's
/// certificate chain: the memory https costs over http (docs/performance.md).
pub const SESSION_CACHE_SERVERS: usize = 4096;

/// The rustls configuration of the Patroni client: `extra_roots` trusted beside the
/// platform's, the client certificate chain and key when given, any server certificate
/// accepted when `insecure`, and a session cache for [`SESSION_CACHE_SERVERS`] members.
///
/// # Errors
/// When the platform's roots cannot be loaded or the client key does not fit its certificate.
pub fn client_config(
    extra_roots: Vec<CertificateDer<'static>>,
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    insecure: bool,
) -> anyhow::Result<rustls::ClientConfig> {
    install_crypto_provider();
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous();
    let builder = if insecure {
        builder.with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
    } else {
        builder.with_custom_certificate_verifier(Arc::new(
            rustls_platform_verifier::Verifier::new_with_extra_roots(extra_roots, provider)?,
        ))
    };
    let mut config = match identity {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key)?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.resumption = rustls::client::Resumption::in_memory_sessions(8 * SESSION_CACHE_SERVERS);
    Ok(config)
}

/// `insecure_skip_verify`: any certificate for any name is accepted; the handshake's
/// signatures are still checked, so the peer holds the key of the certificate it showed.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// rustls needs one process-wide crypto provider; the build uses ring, which compiles without
/// cmake or a C++ toolchain (unlike the default aws-lc-rs).
pub fn install_crypto_provider() {
    // Err means another provider is installed already, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_encrypted_keys() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let plain = dir.path().join("plain.pem");
        std::fs::write(&plain, key.serialize_pem()).unwrap();
        let loaded = load_private_key(&plain, None).unwrap();
        assert_eq!(loaded.secret_der(), key.serialized_der());

        // Encrypt with pkcs8 (PBES2, scrypt + AES-256-CBC) and decrypt again.
        let info = pkcs8::PrivateKeyInfo::try_from(key.serialized_der()).unwrap();
        let encrypted = info
            .encrypt(pkcs8::rand_core::OsRng, b"key-pass-phrase")
            .unwrap();
        let encrypted_pem = encrypted
            .to_pem("ENCRYPTED PRIVATE KEY", pkcs8::LineEnding::LF)
            .unwrap();
        let path = dir.path().join("encrypted.pem");
        std::fs::write(&path, encrypted_pem.as_bytes()).unwrap();
        let password = Secret::new("key-pass-phrase");
        let decrypted = load_private_key(&path, Some(&password)).unwrap();
        assert_eq!(decrypted.secret_der(), key.serialized_der());

        let missing = load_private_key(&path, None).unwrap_err().to_string();
        assert!(missing.contains("no key password"), "{missing}");
        let wrong = load_private_key(&path, Some(&Secret::new("nope")))
            .unwrap_err()
            .to_string();
        assert!(wrong.contains("cannot decrypt"), "{wrong}");
        assert!(!wrong.contains("nope"));
    }

    #[test]
    fn legacy_encryption_and_garbage_are_refused() {
        let (dir, legacy) = crate::temp_file(
            "legacy.pem",
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----\n",
        );
        let error = load_private_key(&legacy, Some(&Secret::new("x")))
            .unwrap_err()
            .to_string();
        assert!(error.contains("legacy"), "{error}");
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not a pem").unwrap();
        assert!(load_private_key(&garbage, None).is_err());
        assert!(load_certificates(&garbage, "CA file").is_err());
    }

    #[test]
    fn oversized_files_are_refused() {
        let (_dir, big) = crate::temp_file(
            "big.pem",
            vec![b'a'; (crate::capped_file::MAX_SMALL_FILE_BYTES + 1) as usize],
        );
        let error = load_certificates(&big, "CA file").unwrap_err().to_string();
        assert!(error.contains("larger than"), "{error}");
    }
}
