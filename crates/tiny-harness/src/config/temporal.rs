//! `[temporal]`: where Temporal comes from (D3), how to reach it and prove this harness to
//! it (TLS, an API key: issue 20).

use super::ConfigError;
use serde::Deserialize;
use std::path::PathBuf;

/// Where Temporal comes from (D3).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TemporalMode {
    #[default]
    Embedded,
    Remote,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TemporalSection {
    pub mode: TemporalMode,
    pub address: String,
    pub namespace: String,
    pub task_queue: String,
    pub cli: Option<PathBuf>,
    pub request_timeout_secs: u64,
    /// Run a worker in this process (false: a front end only; workers run elsewhere).
    pub worker: bool,
    /// Compression of the gRPC calls to Temporal; `None`: [`TemporalSection::compression`]
    /// decides by the address.
    pub grpc_compression: Option<GrpcCompression>,
    /// Workflows the worker keeps in memory (least recently used first out); an evicted one
    /// is replayed from its history on its next message.
    pub max_cached_workflows: usize,
    /// TLS to a remote Temporal (issue 20): the CA that signed the server's certificate
    /// (PEM; default: the system's roots when TLS is on), this client's certificate and key
    /// for mTLS (PEM, both or neither), and the name to verify the server as.
    pub tls: bool,
    pub tls_ca_file: Option<PathBuf>,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
    pub tls_domain: Option<String>,
    /// The environment variable holding an API key (Temporal Cloud): sent on every call,
    /// and TLS is on with it.
    pub api_key_env: Option<String>,
}

/// How this harness proves itself to a remote Temporal (issue 20), read from the files and
/// the environment the configuration names.
#[derive(Clone, Default)]
pub struct TemporalAuth {
    /// TLS is on.
    pub tls: bool,
    pub ca: Option<Vec<u8>>,
    /// Client certificate and key, PEM.
    pub client: Option<(Vec<u8>, Vec<u8>)>,
    pub domain: Option<String>,
    pub api_key: Option<String>,
}

impl std::fmt::Debug for TemporalAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TemporalAuth")
            .field("tls", &self.tls)
            .field("ca", &self.ca.is_some())
            .field("client", &self.client.is_some())
            .field("domain", &self.domain)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .finish()
    }
}

/// Compression of the gRPC calls to Temporal (both ways: the server answers in kind).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum GrpcCompression {
    None,
    Gzip,
}

impl GrpcCompression {
    /// The default for a server at `address`: none on a loopback address (the embedded dev
    /// server; gzip there costs both processes CPU and saves no network), else gzip (the
    /// SDK's default).
    pub fn for_address(address: &str) -> Self {
        let host = url::Url::parse(address).ok().and_then(|u| u.host_str().map(str::to_owned)).unwrap_or_default();
        let loopback = host == "localhost"
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if loopback { Self::None } else { Self::Gzip }
    }
}

impl TemporalSection {
    /// The TLS and API key settings, their files read; an unreadable file, a certificate
    /// without its key (or the other way round) and an unset variable are errors naming
    /// the key.
    pub fn auth(&self) -> Result<TemporalAuth, ConfigError> {
        let read = |key: &str, path: &Option<PathBuf>| -> Result<Option<Vec<u8>>, ConfigError> {
            path.as_ref()
                .map(|p| std::fs::read(p).map_err(|e| ConfigError(format!("`temporal.{key}` {}: {e}", p.display()))))
                .transpose()
        };
        let ca = read("tls_ca_file", &self.tls_ca_file)?;
        let client = match (read("tls_cert_file", &self.tls_cert_file)?, read("tls_key_file", &self.tls_key_file)?) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            _ => {
                return Err(ConfigError(
                    "`temporal.tls_cert_file` and `temporal.tls_key_file` go together: give both or neither".into(),
                ));
            }
        };
        let api_key = match &self.api_key_env {
            Some(var) => Some(std::env::var(var).ok().filter(|v| !v.is_empty()).ok_or_else(|| {
                ConfigError(format!("`temporal.api_key_env` names the environment variable {var}, which is not set"))
            })?),
            None => None,
        };
        let tls = self.tls || ca.is_some() || client.is_some() || self.tls_domain.is_some() || api_key.is_some();
        Ok(TemporalAuth { tls, ca, client, domain: self.tls_domain.clone(), api_key })
    }

    /// The compression for a server at `address`: configured, else by the address.
    pub fn compression(&self, address: &str) -> GrpcCompression {
        self.grpc_compression.unwrap_or_else(|| GrpcCompression::for_address(address))
    }
}

impl Default for TemporalSection {
    fn default() -> Self {
        Self {
            mode: TemporalMode::Embedded,
            address: "http://127.0.0.1:7233".into(),
            namespace: "default".into(),
            task_queue: "tiny-harness".into(),
            max_cached_workflows: 256,
            tls: false,
            tls_ca_file: None,
            tls_cert_file: None,
            tls_key_file: None,
            tls_domain: None,
            api_key_env: None,
            cli: None,
            request_timeout_secs: 30,
            worker: true,
            grpc_compression: None,
        }
    }
}
