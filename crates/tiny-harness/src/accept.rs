//! The harness's own server: an accept loop with the caps a peer meets (issue 13), serving
//! the router until shutdown.

use std::sync::Arc;
use std::time::Duration;

/// What one server may hold open (issue 13: a peer must not exhaust it).
pub(crate) struct ConnectionCaps {
    /// Connections served at once; the next waits in the listen backlog until one closes.
    pub(crate) max: usize,
    /// A connection whose request head is not complete this long after it opened (or after
    /// its previous response) is closed.
    pub(crate) header_read_timeout: Duration,
}

/// Serves `app` on `listener` until `shutdown` resolves, within `caps`; then lets the open
/// connections finish for up to 5 s.
pub(crate) async fn serve_connections(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    caps: ConnectionCaps,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use tower::ServiceExt;
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(caps.header_read_timeout);
    let permits = Arc::new(tokio::sync::Semaphore::new(caps.max));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            _ = &mut shutdown => break,
        };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little, never spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        // Without TCP_NODELAY a response's head and body can wait on the client's delayed
        // ACK (about 40 ms per request).
        let _ = tcp.set_nodelay(true);
        let service = app.clone().map_request(move |mut req: axum::extract::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
            req.map(axum::body::Body::new)
        });
        let service = hyper_util::service::TowerToHyperService::new(service);
        let connection = builder.serve_connection_with_upgrades(TokioIo::new(tcp), service).into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, %peer, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(Duration::from_secs(5), graceful.shutdown()).await;
    Ok(())
}
