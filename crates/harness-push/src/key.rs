//! The push key and sealed secrets.

use a2a_types::AuthenticationInfo;
use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The environment variable holding the key: 32 bytes, base64.
pub const KEY_ENV: &str = "TINY_HARNESS_PUSH_KEY";

/// Why a key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "{source_name} is not a valid push key: {why} (expected 32 bytes in base64, e.g. `openssl rand -base64 32`)"
    )]
    Malformed { source_name: String, why: String },
    #[error("push key file {path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("a sealed push secret does not open with this key (was the key changed?)")]
    Open,
}

/// The token and credentials of a push config: what is stored sealed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PushSecret {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo>,
}

/// An AES-256-GCM key.
#[derive(Clone)]
pub struct PushKey {
    cipher: Aes256Gcm,
}

impl std::fmt::Debug for PushKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PushKey([REDACTED])")
    }
}

impl PushKey {
    /// Parses a base64 key; `source_name` names where it came from in the error.
    pub fn from_base64(text: &str, source_name: &str) -> Result<Self, KeyError> {
        let malformed = |why: String| KeyError::Malformed { source_name: source_name.to_string(), why };
        let bytes = STANDARD.decode(text.trim()).map_err(|e| malformed(format!("not base64 ({e})")))?;
        if bytes.len() != 32 {
            return Err(malformed(format!("{} bytes, not 32", bytes.len())));
        }
        let cipher = Aes256Gcm::new_from_slice(&bytes).map_err(|e| malformed(e.to_string()))?;
        Ok(Self { cipher })
    }

    /// The key from [`KEY_ENV`], or `None` when it is unset or empty.
    pub fn from_env() -> Result<Option<Self>, KeyError> {
        match std::env::var(KEY_ENV) {
            Ok(v) if !v.trim().is_empty() => Self::from_base64(&v, KEY_ENV).map(Some),
            _ => Ok(None),
        }
    }

    /// The key in `path`, created (32 random bytes, mode 0600) when the file is missing.
    pub fn load_or_create(path: &Path) -> Result<Self, KeyError> {
        let io = |error| KeyError::Io { path: path.display().to_string(), error };
        match std::fs::read_to_string(path) {
            Ok(text) => Self::from_base64(&text, &path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = Aes256Gcm::generate_key(OsRng);
                let text = STANDARD.encode(key);
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                let mut file = options.open(path).map_err(io)?;
                std::io::Write::write_all(&mut file, text.as_bytes()).map_err(io)?;
                Self::from_base64(&text, &path.display().to_string())
            }
            Err(e) => Err(io(e)),
        }
    }

    /// Seals a secret: base64 of a fresh 96-bit nonce followed by the ciphertext.
    pub fn seal(&self, secret: &PushSecret) -> String {
        let plain = serde_json::to_vec(secret).expect("a PushSecret serialises");
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let cipher = self.cipher.encrypt(&nonce, plain.as_ref()).expect("AES-GCM encryption does not fail");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&cipher);
        STANDARD.encode(out)
    }

    /// Opens a sealed secret.
    pub fn open(&self, sealed: &str) -> Result<PushSecret, KeyError> {
        let bytes = STANDARD.decode(sealed).map_err(|_| KeyError::Open)?;
        if bytes.len() < 12 {
            return Err(KeyError::Open);
        }
        let (nonce, cipher) = bytes.split_at(12);
        let plain = self.cipher.decrypt(Nonce::from_slice(nonce), cipher).map_err(|_| KeyError::Open)?;
        serde_json::from_slice(&plain).map_err(|_| KeyError::Open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> PushSecret {
        PushSecret {
            token: "tok-123".into(),
            authentication: Some(AuthenticationInfo { scheme: "Bearer".into(), credentials: "cred-456".into() }),
        }
    }

    #[test]
    fn sealed_secrets_open_with_the_key_only_and_hide_the_plain_text() {
        let dir = tempfile::tempdir().unwrap();
        let key = PushKey::load_or_create(&dir.path().join("push.key")).unwrap();
        let sealed = key.seal(&secret());
        assert!(!sealed.contains("tok-123"));
        let decoded = STANDARD.decode(&sealed).unwrap();
        assert!(!String::from_utf8_lossy(&decoded).contains("tok-123"), "the token is encrypted, not encoded");
        assert_ne!(sealed, key.seal(&secret()), "every seal takes a fresh nonce");
        assert_eq!(key.open(&sealed).unwrap(), secret());
        let other = PushKey::load_or_create(&dir.path().join("other.key")).unwrap();
        assert!(matches!(other.open(&sealed), Err(KeyError::Open)));
    }

    #[test]
    fn a_created_key_file_is_private_and_reloads_as_the_same_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("push.key");
        let key = PushKey::load_or_create(&path).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        let again = PushKey::load_or_create(&path).unwrap();
        assert_eq!(again.open(&key.seal(&secret())).unwrap(), secret());
    }

    #[test]
    fn a_malformed_key_is_an_error_naming_its_source() {
        let short = PushKey::from_base64("c2hvcnQ=", KEY_ENV).unwrap_err().to_string();
        assert!(short.contains(KEY_ENV) && short.contains("5 bytes, not 32"), "{short}");
        let garbage = PushKey::from_base64("not base64!", KEY_ENV).unwrap_err().to_string();
        assert!(garbage.contains("not base64"), "{garbage}");
    }
}
