//! The harness's own server: an accept loop with the caps a peer meets (issues 13 and 34),
//! serving the router until shutdown.
//!
//! - At most `max` connections at once; the next waits in the listen backlog.
//! - At most `per_client` of them from one address (a trusted proxy's excepted): one client
//!   cannot take every slot, and `/_ready` answers others meanwhile. One over it is closed
//!   at once.
//! - A connection with no request in flight for `idle_timeout` is closed gracefully (an
//!   HTTP/2 GOAWAY lets open streams finish; HTTP/1 closes after the response being
//!   written): idle h2c connections do not pile up. HTTP/1 also has its header timeout.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What one server may hold open (issue 13: a peer must not exhaust it).
pub(crate) struct ConnectionCaps {
    /// Connections served at once; the next waits in the listen backlog until one closes.
    pub(crate) max: usize,
    /// A connection whose request head is not complete this long after it opened (or after
    /// its previous response) is closed; so is any connection idle this long.
    pub(crate) header_read_timeout: Duration,
    /// Connections one client address may hold at once; 0: no cap.
    pub(crate) per_client: usize,
    /// Addresses exempt from `per_client` (`server.trusted_proxies`: a load balancer
    /// carries many clients).
    pub(crate) proxies: crate::peer::Proxies,
}

/// Requests in flight on one connection, and since when it has had none.
struct Activity {
    in_flight: AtomicUsize,
    idle_since: Mutex<Instant>,
}

/// One request in flight on a connection, until its response body is sent (or dropped).
struct InFlight(Arc<Activity>);

/// A response body that keeps its request in flight while it is being sent: an SSE stream
/// is activity, not idleness.
struct Tracked {
    body: axum::body::Body,
    _in_flight: InFlight,
}

impl hyper::body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

impl InFlight {
    fn enter(activity: &Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::SeqCst);
        Self(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            *self.0.idle_since.lock().expect("activity") = Instant::now();
        }
    }
}

impl Activity {
    fn idle_for(&self) -> Option<Duration> {
        (self.in_flight.load(Ordering::SeqCst) == 0).then(|| self.idle_since.lock().expect("activity").elapsed())
    }
}

/// How long a connection closing gracefully and idle may take to close before it is cut.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Connections per client address; a slot is given back when its guard drops.
#[derive(Clone, Default)]
struct PerClient(Arc<Mutex<HashMap<IpAddr, usize>>>);

struct ClientSlot(PerClient, IpAddr);

impl PerClient {
    fn take(&self, ip: IpAddr, most: usize) -> Option<ClientSlot> {
        let mut counts = self.0.lock().expect("per-client connections");
        let n = counts.entry(ip).or_default();
        if most > 0 && *n >= most {
            return None;
        }
        *n += 1;
        Some(ClientSlot(self.clone(), ip))
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut counts = (self.0).0.lock().expect("per-client connections");
        if let Some(n) = counts.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.1);
            }
        }
    }
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
    builder.http2().timer(TokioTimer::new());
    let permits = Arc::new(tokio::sync::Semaphore::new(caps.max));
    let clients = PerClient::default();
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let idle_timeout = caps.header_read_timeout;
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
        let ip = crate::peer::canonical(peer.ip());
        let most = if caps.proxies.trusts(ip) { 0 } else { caps.per_client };
        let Some(slot) = clients.take(ip, most) else {
            tracing::debug!(%peer, "connection refused: the client holds `server.max_connections_per_client`");
            drop(tcp);
            continue;
        };
        // Without TCP_NODELAY a response's head and body can wait on the client's delayed
        // ACK (about 40 ms per request).
        let _ = tcp.set_nodelay(true);
        let activity = Arc::new(Activity { in_flight: AtomicUsize::new(0), idle_since: Mutex::new(Instant::now()) });
        let seen = activity.clone();
        let app = app.clone();
        let service = tower::service_fn(move |mut req: axum::extract::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
            let guard = InFlight::enter(&seen);
            let answer = app.clone().oneshot(req.map(axum::body::Body::new));
            async move {
                let response = answer.await?;
                Ok::<_, std::convert::Infallible>(
                    response.map(|body| axum::body::Body::new(Tracked { body, _in_flight: guard })),
                )
            }
        });
        let service = hyper_util::service::TowerToHyperService::new(service);
        let connection = builder.serve_connection_with_upgrades(TokioIo::new(tcp), service).into_owned();
        let mut stopping = stopping.clone();
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let mut watch = tokio::time::interval(Duration::from_millis(500));
            let mut closing: Option<Instant> = None;
            loop {
                tokio::select! {
                    ended = connection.as_mut() => {
                        if let Err(e) = ended {
                            tracing::debug!(error = %e, %peer, "connection ended with an error");
                        }
                        break;
                    }
                    _ = stopping.changed(), if closing.is_none() => {
                        connection.as_mut().graceful_shutdown();
                        closing = Some(Instant::now());
                    }
                    _ = watch.tick() => match closing {
                        None if activity.idle_for().is_some_and(|idle| idle >= idle_timeout) => {
                            connection.as_mut().graceful_shutdown();
                            closing = Some(Instant::now());
                        }
                        // A peer that does not take part in a graceful close (an HTTP/2 one
                        // that never acknowledges the GOAWAY's ping) is cut off once idle.
                        Some(since) if since.elapsed() >= CLOSE_GRACE && activity.idle_for().is_some() => break,
                        _ => {}
                    }
                }
            }
            drop((permit, slot));
        });
    }
    drop(listener);
    let _ = stop.send(true);
    // The connections give their permits back as they finish.
    let all = u32::try_from(caps.max).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(Duration::from_secs(5), permits.acquire_many(all)).await;
    Ok(())
}
