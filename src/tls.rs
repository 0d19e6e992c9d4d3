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

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::secret::Secret;

/// PEM and YAML files larger than this are refused (a certificate chain or a configuration
/// is a few KiB).
pub const MAX_PEM_BYTES: u64 = 1 << 20;

/// Reads a file of at most [`MAX_PEM_BYTES`] (certificates, keys, the YAML files).
///
/// # Errors
/// When the file cannot be read or is larger than the cap.
pub fn read_pem_file(path: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    crate::capped_file::read(path, what, MAX_PEM_BYTES)
}

/// Every certificate of a PEM file (at least one).
///
/// # Errors
/// When the file cannot be read, holds no certificate, or a certificate block is malformed.
pub fn load_certificates(path: &Path, what: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let pem = read_pem_file(path, what)?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
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
    let pem = read_pem_file(path, "key file")?;
    let text = String::from_utf8_lossy(&pem);
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
        let (label, der) = pkcs8::der::pem::decode_vec(&pem)
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
    PrivateKeyDer::from_pem_slice(&pem).map_err(|error| {
        anyhow::anyhow!(
            "key file {}: no usable private key ({error})",
            path.display()
        )
    })
}

/// A key as PEM text (for APIs that take PEM, such as reqwest's `Identity`).
///
/// # Errors
/// Never in practice (encoding DER as PEM cannot fail for these labels).
pub fn private_key_pem(key: &PrivateKeyDer<'_>) -> anyhow::Result<String> {
    let label = match key {
        PrivateKeyDer::Pkcs1(_) => "RSA PRIVATE KEY",
        PrivateKeyDer::Sec1(_) => "EC PRIVATE KEY",
        _ => "PRIVATE KEY",
    };
    pkcs8::der::pem::encode_string(label, pkcs8::der::pem::LineEnding::LF, key.secret_der())
        .map_err(|_| anyhow::anyhow!("cannot encode the private key as PEM"))
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
        // Round trip through PEM text.
        let pem = private_key_pem(&loaded).unwrap();
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"));

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
        let (_dir, big) = crate::temp_file("big.pem", vec![b'a'; (MAX_PEM_BYTES + 1) as usize]);
        let error = load_certificates(&big, "CA file").unwrap_err().to_string();
        assert!(error.contains("larger than"), "{error}");
    }
}
