//! An OTLP trace receiver for the traces tests (issue 32): it decodes the real OTLP protobuf
//! (`opentelemetry-proto`'s types) from `POST /v1/traces` (HTTP/protobuf) or the collector's
//! gRPC `TraceService/Export`, and keeps every span it was sent.

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message as _;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One received span, its ids in lowercase hex as W3C `traceparent` writes them.
#[derive(Clone, Debug)]
pub struct Span {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// `SPAN_KIND_SERVER`, `SPAN_KIND_CLIENT`...
    pub kind: String,
    /// Every attribute's value as text (a number as its digits).
    pub attributes: BTreeMap<String, String>,
    /// `STATUS_CODE_ERROR` when it failed.
    pub status: String,
    /// The resource's `service.name`.
    pub service: String,
}

impl Span {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// The spans received so far, and the raw bytes of every export (to look for secrets).
#[derive(Clone, Default)]
pub struct Received {
    spans: Arc<Mutex<Vec<Span>>>,
    raw: Arc<Mutex<Vec<u8>>>,
    /// The `authorization` headers the exports came with (HTTP).
    authorizations: Arc<Mutex<Vec<String>>>,
}

impl Received {
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// The `authorization` header of each HTTP export.
    pub fn authorizations(&self) -> Vec<String> {
        self.authorizations.lock().unwrap().clone()
    }

    /// Every byte the receiver was sent, for a search.
    pub fn raw(&self) -> Vec<u8> {
        self.raw.lock().unwrap().clone()
    }

    /// Waits (up to 30 s) until `done` holds of the spans received; the spans then.
    pub async fn until(&self, what: &str, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            assert!(Instant::now() < deadline, "{what}: the spans received: {spans:#?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn take(&self, request: ExportTraceServiceRequest, raw: &[u8]) {
        self.raw.lock().unwrap().extend_from_slice(raw);
        let mut spans = self.spans.lock().unwrap();
        for resource in request.resource_spans {
            let service = resource
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
                .map(|a| text(a.value.as_ref().and_then(|v| v.value.as_ref())))
                .unwrap_or_default();
            for scope in resource.scope_spans {
                for span in scope.spans {
                    spans.push(Span {
                        kind: format!("{:?}", span.kind()),
                        status: span.status.as_ref().map(|s| format!("{:?}", s.code())).unwrap_or_default(),
                        name: span.name,
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        attributes: span
                            .attributes
                            .iter()
                            .map(|a| (a.key.clone(), text(a.value.as_ref().and_then(|v| v.value.as_ref()))))
                            .collect(),
                        service: service.clone(),
                    });
                }
            }
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(value: Option<&Any>) -> String {
    match value {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        Some(Any::ArrayValue(a)) => a.values.iter().map(|v| text(v.value.as_ref())).collect::<Vec<_>>().join(","),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

/// A receiver of OTLP over HTTP/protobuf; its base URL (what `OTEL_EXPORTER_OTLP_ENDPOINT`
/// names) and what it received. A body that is not an `ExportTraceServiceRequest` is a 400.
pub async fn http_receiver() -> (String, Received) {
    let received = Received::default();
    let keep = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let keep = keep.clone();
            async move {
                let kind = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
                if kind != "application/x-protobuf" {
                    return (StatusCode::UNSUPPORTED_MEDIA_TYPE, Vec::new());
                }
                match ExportTraceServiceRequest::decode(body.as_ref()) {
                    Ok(request) => {
                        if let Some(v) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
                            keep.authorizations.lock().unwrap().push(v.to_string());
                        }
                        keep.take(request, &body);
                        (StatusCode::OK, ExportTraceServiceResponse::default().encode_to_vec())
                    }
                    Err(_) => (StatusCode::BAD_REQUEST, Vec::new()),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, received)
}

struct Grpc(Received);

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let request = request.into_inner();
        let raw = request.encode_to_vec();
        self.0.take(request, &raw);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// A receiver of OTLP over gRPC (the collector's `TraceService`); its URL and what it received.
pub async fn grpc_receiver() -> (String, Received) {
    let received = Received::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let service = TraceServiceServer::new(Grpc(received.clone()));
    tokio::spawn(async move {
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let _ = tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming).await;
    });
    (url, received)
}
