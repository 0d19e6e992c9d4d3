//! Key derivation and a hand-written Fernet, as used by pysyncobj's `encryptor.py`.
//!
//! Key: `PBKDF2-HMAC-SHA256(password, SALT, 100 000 iterations, 32 bytes)`; the first 16
//! bytes sign (HMAC-SHA256), the last 16 encrypt (AES-128-CBC, PKCS#7).
//! Token: `base64url(0x80 | ts:u64 BE | IV:16 | ciphertext | HMAC(all before):32)`.
//!
//! Why by hand rather than the `fernet` crate: that crate rejects tokens stamped more than
//! 60 s in the future, and pysyncobj nodes stamp tokens with arbitrary clocks (see
//! [`decrypt`]). The whole format is ~60 lines on top of RustCrypto primitives.

use aes::cipher::{block_padding::Pkcs7, BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use base64::engine::{general_purpose::GeneralPurpose, DecodePaddingMode, GeneralPurposeConfig};
use base64::{alphabet, Engine};
use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::RaftError;

/// pysyncobj's fixed PBKDF2 salt (the same for every cluster).
pub const SALT: [u8; 16] = [
    0x15, 0x25, 0x71, 0xe6, 0xbb, 0x02, 0xa6, 0xf8, 0x13, 0x71, 0x90, 0xcf, 0x36, 0x2b, 0x1e, 0xeb,
];
/// PBKDF2 iteration count used by pysyncobj.
pub const PBKDF2_ITERATIONS: u32 = 100_000;

const VERSION: u8 = 0x80;
const HMAC_LEN: usize = 32;
const IV_LEN: usize = 16;
const HEADER_LEN: usize = 1 + 8 + IV_LEN;
/// Smallest possible token: header, one cipher block, HMAC.
const MIN_TOKEN_LEN: usize = HEADER_LEN + 16 + HMAC_LEN;

type HmacSha256 = Hmac<Sha256>;
type Aes128CbcEnc = cbc::Encryptor<aes::Aes128>;
type Aes128CbcDec = cbc::Decryptor<aes::Aes128>;

/// Accepts tokens with or without `=` padding; pysyncobj writes padded base64url.
const B64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Derived Fernet keys for one cluster password.
///
/// Deriving costs 100 000 PBKDF2 rounds (far slower still in an unoptimised build), so
/// derive once per password and keep the value. The `Debug` output never shows
/// key material, and the key is wiped from memory when dropped.
#[derive(Clone, zeroize::Zeroize, zeroize::ZeroizeOnDrop)]
pub struct RaftKey {
    signing: [u8; 16],
    encryption: [u8; 16],
}

impl std::fmt::Debug for RaftKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RaftKey(<redacted>)")
    }
}

impl RaftKey {
    /// Derives the keys from the password bytes (pysyncobj UTF-8-encodes `str` passwords).
    /// An empty password is a valid password: pysyncobj turns encryption on whenever a
    /// password is set at all.
    pub fn derive(password: &[u8]) -> RaftKey {
        // ring's PBKDF2, not the generic `pbkdf2` crate: a generic function is compiled at the
        // caller's optimisation level, and unoptimised (the debug build the tests run) its
        // 100 000 rounds cost 0.4 s of CPU, which a loaded CI machine stretches past `status`'s
        // deadline; ring's is compiled once, in ring.
        let mut raw = zeroize::Zeroizing::new([0u8; 32]);
        let iterations = std::num::NonZeroU32::new(PBKDF2_ITERATIONS).expect("a positive constant");
        ring::pbkdf2::derive(
            ring::pbkdf2::PBKDF2_HMAC_SHA256,
            iterations,
            &SALT,
            password,
            &mut *raw,
        );
        Self::from_raw(*raw)
    }

    /// Builds the key from the raw 32 derived bytes (the decoded Fernet key).
    pub fn from_raw(mut raw: [u8; 32]) -> RaftKey {
        let mut signing = [0u8; 16];
        let mut encryption = [0u8; 16];
        signing.copy_from_slice(&raw[..16]);
        encryption.copy_from_slice(&raw[16..]);
        zeroize::Zeroize::zeroize(&mut raw);
        RaftKey {
            signing,
            encryption,
        }
    }

    /// The derived key of `password`, shared by every cluster with the same password.
    ///
    /// Deriving costs 100 000 PBKDF2 rounds; a fleet of clusters sharing one password would
    /// otherwise derive the same key once per cluster at start (and on every reload). Clusters
    /// starting together wait for the one derivation in progress. Entries are found by the
    /// SHA-256 of the password (no further copy of the secret is kept) and dropped once no
    /// poller uses their key any more.
    pub async fn shared(password: &[u8]) -> Result<Arc<RaftKey>, RaftError> {
        use sha2::{Digest, Sha256};
        use std::collections::HashMap;
        use std::sync::{Mutex, OnceLock};
        use tokio::sync::OnceCell;

        type Slot = Arc<OnceCell<Arc<RaftKey>>>;
        static KEYS: OnceLock<Mutex<HashMap<[u8; 32], Slot>>> = OnceLock::new();

        let digest: [u8; 32] = Sha256::digest(password).into();
        let slot = {
            let mut keys = KEYS
                .get_or_init(Mutex::default)
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            // Forget keys no poller holds any more (e.g. a password changed on reload).
            keys.retain(|_, slot| {
                Arc::strong_count(slot) > 1
                    || slot.get().is_some_and(|key| Arc::strong_count(key) > 1)
            });
            keys.entry(digest).or_default().clone()
        };
        let key = slot
            .get_or_try_init(|| async {
                let password = zeroize::Zeroizing::new(password.to_vec());
                let key = tokio::task::spawn_blocking(move || RaftKey::derive(&password))
                    .await
                    .map_err(|error| {
                        RaftError::protocol(format!("key derivation failed: {error}"))
                    })?;
                Ok::<_, RaftError>(Arc::new(key))
            })
            .await?;
        Ok(key.clone())
    }

    fn mac(&self) -> HmacSha256 {
        <HmacSha256 as Mac>::new_from_slice(&self.signing).expect("HMAC accepts any key length")
    }
}

/// Encrypts `plaintext` into a base64url Fernet token stamped `timestamp`, with a fresh
/// random IV.
pub fn encrypt(key: &RaftKey, plaintext: &[u8], timestamp: u64) -> Result<Vec<u8>, RaftError> {
    let mut iv = [0u8; IV_LEN];
    getrandom::fill(&mut iv)
        .map_err(|e| RaftError::protocol(format!("no randomness for the IV: {e}")))?;
    Ok(encrypt_with_iv(key, plaintext, timestamp, iv))
}

/// [`encrypt`] with a given IV (deterministic; for tests and the fake node).
pub fn encrypt_with_iv(
    key: &RaftKey,
    plaintext: &[u8],
    timestamp: u64,
    iv: [u8; IV_LEN],
) -> Vec<u8> {
    // PKCS#7 always adds 1..=16 bytes.
    let mut ciphertext = vec![0u8; (plaintext.len() / 16 + 1) * 16];
    ciphertext[..plaintext.len()].copy_from_slice(plaintext);
    let ct_len = Aes128CbcEnc::new(&key.encryption.into(), &iv.into())
        .encrypt_padded_mut::<Pkcs7>(&mut ciphertext, plaintext.len())
        .expect("buffer sized for the padding")
        .len();
    ciphertext.truncate(ct_len);
    let mut raw = Vec::with_capacity(HEADER_LEN + ciphertext.len() + HMAC_LEN);
    raw.push(VERSION);
    raw.extend_from_slice(&timestamp.to_be_bytes());
    raw.extend_from_slice(&iv);
    raw.extend_from_slice(&ciphertext);
    let mut mac = key.mac();
    mac.update(&raw);
    raw.extend_from_slice(&mac.finalize().into_bytes());
    B64.encode(raw).into_bytes()
}

/// Verifies and decrypts a token; returns the plaintext.
///
/// The HMAC is checked (in constant time) before anything is decrypted; any failure is a
/// `decode` error.
///
/// The timestamp is deliberately **not** checked. Since 0.3.12 pysyncobj stamps tokens
/// with `int(monotonic())`, i.e. seconds since the node's boot, not Unix time (older
/// versions used Unix time). So a node's timestamp says nothing about token age, it jumps
/// backwards whenever the node's host reboots, and differs between nodes; pysyncobj itself
/// never applies a TTL either. Replay is not a concern for a read-only status query: each
/// reply is also bound to our per-connection random key.
pub fn decrypt(key: &RaftKey, token: &[u8]) -> Result<Vec<u8>, RaftError> {
    let raw = B64
        .decode(token)
        .map_err(|e| RaftError::decode(format!("fernet: invalid base64: {e}")))?;
    if raw.len() < MIN_TOKEN_LEN || (raw.len() - HEADER_LEN - HMAC_LEN) % 16 != 0 {
        return Err(RaftError::decode(format!(
            "fernet: bad token length {}",
            raw.len()
        )));
    }
    if raw[0] != VERSION {
        return Err(RaftError::decode(format!(
            "fernet: bad version byte {:#04x}",
            raw[0]
        )));
    }
    let (signed, tag) = raw.split_at(raw.len() - HMAC_LEN);
    let mut mac = key.mac();
    mac.update(signed);
    mac.verify_slice(tag)
        .map_err(|_| RaftError::decode("fernet: HMAC mismatch (corrupted token or other key)"))?;
    let mut iv = [0u8; IV_LEN];
    iv.copy_from_slice(&signed[9..HEADER_LEN]);
    // Decrypted where it lies and moved to the front: one buffer per token, not two.
    let ciphertext = HEADER_LEN..raw.len() - HMAC_LEN;
    let mut raw = raw;
    let pt_len = Aes128CbcDec::new(&key.encryption.into(), &iv.into())
        .decrypt_padded_mut::<Pkcs7>(&mut raw[ciphertext])
        .map_err(|_| RaftError::decode("fernet: bad padding"))?
        .len();
    raw.copy_within(HEADER_LEN..HEADER_LEN + pt_len, 0);
    raw.truncate(pt_len);
    Ok(raw)
}

/// The timestamp of a token, without verifying it (tests).
#[cfg(test)]
pub fn token_timestamp(token: &[u8]) -> Option<u64> {
    let raw = B64.decode(token).ok()?;
    let ts: [u8; 8] = raw.get(1..9)?.try_into().ok()?;
    Some(u64::from_be_bytes(ts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_kind::ErrorKind;

    #[test]
    fn debug_is_redacted() {
        let k = RaftKey::from_raw([7u8; 32]);
        assert_eq!(format!("{k:?}"), "RaftKey(<redacted>)");
    }

    #[test]
    fn roundtrip_and_tamper() {
        let k = RaftKey::from_raw([1u8; 32]);
        let other = RaftKey::from_raw([2u8; 32]);
        for len in [0usize, 1, 15, 16, 17, 1000] {
            let pt = vec![0xabu8; len];
            let tok = encrypt(&k, &pt, 304).unwrap();
            assert_eq!(token_timestamp(&tok), Some(304));
            assert_eq!(decrypt(&k, &tok).unwrap(), pt);
            assert_eq!(decrypt(&other, &tok).unwrap_err().kind(), ErrorKind::Decode);
        }
        let tok = encrypt(&k, b"hello", 1).unwrap();
        let mut raw = B64.decode(&tok).unwrap();
        let last = raw.len() - 1;
        raw[last] ^= 1;
        let bad = B64.encode(&raw);
        assert!(decrypt(&k, bad.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("HMAC"));
        assert_eq!(decrypt(&k, b"!!!").unwrap_err().kind(), ErrorKind::Decode);
        assert_eq!(decrypt(&k, b"").unwrap_err().kind(), ErrorKind::Decode);
        // unpadded base64 is accepted too
        let unpadded: Vec<u8> = tok.iter().copied().filter(|&c| c != b'=').collect();
        assert_eq!(decrypt(&k, &unpadded).unwrap(), b"hello");
    }

    #[test]
    fn timestamps_are_not_checked() {
        let k = RaftKey::from_raw([3u8; 32]);
        for ts in [0, 5, u64::MAX] {
            let tok = encrypt(&k, b"x", ts).unwrap();
            assert_eq!(decrypt(&k, &tok).unwrap(), b"x");
        }
    }

    #[tokio::test]
    async fn one_derivation_per_password() {
        let (a, b) = (b"one-password", b"another-password");
        let (first, second, other) =
            tokio::join!(RaftKey::shared(a), RaftKey::shared(a), RaftKey::shared(b));
        let (first, second, other) = (first.unwrap(), second.unwrap(), other.unwrap());
        assert!(std::sync::Arc::ptr_eq(&first, &second));
        assert!(!std::sync::Arc::ptr_eq(&first, &other));
        assert_eq!(
            format!("{:?}", first.as_ref()),
            "RaftKey(<redacted>)",
            "the key never shows"
        );
    }
}
