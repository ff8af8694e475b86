//! Issue 20: a remote Temporal over TLS with a client certificate (mTLS). The dev server
//! speaks plain gRPC, so the test puts a TLS-terminating proxy in front of it that demands
//! a client certificate signed by the test CA (`tests/tls/`: test-only keys, valid for a
//! century, never used elsewhere). The harness reaches Temporal only through the proxy.

use contract_tests::{HarnessOptions, HarnessProcess, user_text};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio_rustls::rustls;

fn tls(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tls").join(name)
}

/// A TLS proxy to the dev server on a free port: (its port, handshakes it accepted, refused).
async fn tls_proxy() -> (u16, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(tls("server.pem")).unwrap().map(|c| c.unwrap()).collect();
    let key = PrivateKeyDer::from_pem_file(tls("server.key")).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(tls("ca.pem")).unwrap()).unwrap();
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone()).build().unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let upstream = contract_tests::temporal_address().trim_start_matches("http://").to_string();
    let (accepted, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (a, r) = (accepted.clone(), refused.clone());
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, upstream, a, r) = (acceptor.clone(), upstream.clone(), a.clone(), r.clone());
            tokio::spawn(async move {
                let mut tls = match acceptor.accept(tcp).await {
                    Ok(t) => t,
                    Err(_) => {
                        r.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                };
                a.fetch_add(1, Ordering::SeqCst);
                let mut server = tokio::net::TcpStream::connect(&upstream).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut server).await;
            });
        }
    });
    (port, accepted, refused)
}

/// Issue 20: with the CA, a client certificate and key, the harness's client and worker
/// reach Temporal over mTLS and a conversation runs; without the client certificate the
/// server refuses the handshake and the harness does not connect.
#[tokio::test(flavor = "multi_thread")]
async fn a_remote_temporal_over_mtls_runs_tasks_and_refuses_a_client_without_a_certificate() {
    let (port, accepted, refused) = tls_proxy().await;
    let h = HarnessProcess::start(HarnessOptions {
        temporal: Some(format!("https://localhost:{port}")),
        temporal_extra: format!(
            "tls_ca_file = \"{}\"\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n",
            tls("ca.pem").display(),
            tls("client.pem").display(),
            tls("client.key").display()
        ),
        ..Default::default()
    })
    .await;
    let r = h.client().send(user_text("over tls"), json!({})).await;
    let task = &r["result"]["task"];
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "echo: over tls", "{r}");
    assert!(accepted.load(Ordering::SeqCst) >= 1, "the harness went through the TLS proxy");
    assert_eq!(refused.load(Ordering::SeqCst), 0);

    // The CA but no client certificate: the proxy refuses the handshake.
    let ca = std::fs::read(tls("ca.pem")).unwrap();
    let auth = tiny_harness::config::TemporalAuth { tls: true, ca: Some(ca), ..Default::default() };
    let address = format!("https://localhost:{port}");
    let none = tiny_harness::connect_temporal_with(&address, "default", tiny_harness::GrpcCompression::None, &auth);
    let Err(err) = none.await else { panic!("no connection without a client certificate") };
    let err = err.to_string();
    assert!(err.contains(&address) && err.contains("CertificateRequired"), "the error says what happened: {err}");
    assert!(refused.load(Ordering::SeqCst) >= 1, "the handshake was refused");
}
