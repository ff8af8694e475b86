//! Traces and logs (issue 32): the process's `tracing` subscriber, with the OpenTelemetry
//! layer and its OTLP exporter when traces are configured, and text or JSON log lines.
//!
//! Traces are off unless an endpoint is configured: `[observability] otlp_endpoint`, else
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`
//! (`OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn them off). Off, no
//! OpenTelemetry layer is installed: a span is what it was before, and no trace context
//! travels with a message. docs/observability.md lists the spans and their attributes.

use crate::config::ConfigError;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde::Deserialize;
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer as _;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, format::Writer};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;

/// The `[observability]` section.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ObservabilitySection {
    /// Where spans go, as `OTEL_EXPORTER_OTLP_ENDPOINT` is written: a base URL (`/v1/traces`
    /// is added for HTTP). Unset: the `OTEL_*` variables decide; neither: traces are off.
    pub otlp_endpoint: Option<String>,
    /// `http/protobuf` (default) or `grpc`; unset: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, then
    /// `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub otlp_protocol: Option<String>,
    /// The `service.name` of every span; unset: `OTEL_SERVICE_NAME`, else `tiny-harness`.
    pub service_name: Option<String>,
    /// Record message and reply text on the model's spans (redacted). Off by default: a
    /// trace backend is not where users' conversations should end up unasked.
    pub record_content: bool,
    /// `text` (default) or `json`: one JSON object per line, with the trace and span ids of
    /// the span it was logged in when traces are on. `--log-format` wins over it.
    pub log_format: LogFormat,
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            other => Err(format!("`{other}` is not a log format: `text` or `json`")),
        }
    }
}

/// How spans are exported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OtlpProtocol {
    HttpProtobuf,
    Grpc,
}

/// Where spans go, resolved from the section and the `OTEL_*` variables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceExport {
    /// The whole URL the exporter posts to (HTTP) or connects to (gRPC).
    pub endpoint: String,
    pub protocol: OtlpProtocol,
    /// `None`: `OTEL_SERVICE_NAME`, else `tiny-harness`.
    pub service_name: Option<String>,
}

impl ObservabilitySection {
    /// Where spans go, or `None` when traces are off; `env` reads a variable (the process's
    /// environment outside tests). A protocol this build cannot speak is an error naming it.
    pub fn trace_export(&self, env: impl Fn(&str) -> Option<String>) -> Result<Option<TraceExport>, ConfigError> {
        let var = |name: &str| env(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v == "none")
        {
            return Ok(None);
        }
        let (protocol, from) = match self.otlp_protocol.clone() {
            Some(p) => (p, "`observability.otlp_protocol`"),
            None => match var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") {
                Some(p) => (p, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
                None => (var("OTEL_EXPORTER_OTLP_PROTOCOL").unwrap_or_default(), "OTEL_EXPORTER_OTLP_PROTOCOL"),
            },
        };
        let protocol = match protocol.as_str() {
            "" | "http/protobuf" => OtlpProtocol::HttpProtobuf,
            "grpc" => OtlpProtocol::Grpc,
            other => {
                return Err(ConfigError(format!(
                    "{from} = `{other}`: this build exports traces over `http/protobuf` or `grpc`"
                )));
            }
        };
        let base = |url: String| match protocol {
            OtlpProtocol::HttpProtobuf => format!("{}/v1/traces", url.trim_end_matches('/')),
            OtlpProtocol::Grpc => url,
        };
        let endpoint = match self.otlp_endpoint.clone().filter(|e| !e.trim().is_empty()) {
            Some(url) => base(url),
            None => match var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
                // The signal's own variable is the whole URL, as the specification says.
                Some(url) => url,
                None => match var("OTEL_EXPORTER_OTLP_ENDPOINT") {
                    Some(url) => base(url),
                    None => return Ok(None),
                },
            },
        };
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(ConfigError(format!(
                "the OTLP endpoint `{endpoint}` is not an http:// or https:// URL (`observability.otlp_endpoint` or \
                 OTEL_EXPORTER_OTLP_ENDPOINT)"
            )));
        }
        Ok(Some(TraceExport { endpoint, protocol, service_name: self.service_name.clone() }))
    }
}

/// What [`install`] set up; [`Telemetry::shutdown`] sends the spans still buffered.
#[must_use = "shut it down when the process stops, or the last spans are lost"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported.
    pub fn traces(&self) -> bool {
        self.provider.is_some()
    }

    /// Exports what is buffered and stops the exporter (outside an async context: the HTTP
    /// exporter's client blocks).
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            eprintln!("tiny-harness: the last spans could not be exported: {e}");
        }
    }
}

/// The crates whose spans and events become OpenTelemetry spans (a dependency's are not).
const OUR_CRATES: [&str; 6] =
    ["tiny_harness", "a2a_server", "harness_agent", "harness_store", "harness_push", "harness_cli"];

/// Installs the process's subscriber: log lines on stderr as `format` says, filtered by
/// `RUST_LOG` (else `default_filter`), and the OpenTelemetry layer when `export` is given
/// (with the W3C trace-context propagator). Call it inside the tokio runtime (the gRPC
/// exporter's channel lives on it). A second call in one process does nothing to the
/// subscriber already installed.
pub fn install(
    format: LogFormat,
    export: Option<&TraceExport>,
    default_filter: &str,
) -> Result<Telemetry, ConfigError> {
    let filter = || tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default_filter.into());
    // Colour codes only on a terminal: a log file or a collector's pipe gets plain text (and
    // the span fields every request records are not styled for nobody, issue 31).
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let lines = match format {
        LogFormat::Text => {
            tracing_subscriber::fmt::layer().with_ansi(ansi).with_writer(std::io::stderr).with_filter(filter()).boxed()
        }
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .event_format(JsonLines)
            .with_writer(std::io::stderr)
            .with_filter(filter())
            .boxed(),
    };
    let Some(export) = export else {
        let _ = tracing_subscriber::registry().with(lines).try_init();
        return Ok(Telemetry { provider: None });
    };
    let failed = |e: opentelemetry_otlp::ExporterBuildError| {
        ConfigError(format!("the OTLP exporter for {} cannot be built: {e}", export.endpoint))
    };
    let exporter = match export.protocol {
        OtlpProtocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(&export.endpoint)
            .build()
            .map_err(failed)?,
        OtlpProtocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(&export.endpoint)
            .build()
            .map_err(failed)?,
    };
    let mut resource = opentelemetry_sdk::Resource::builder();
    match &export.service_name {
        Some(name) => resource = resource.with_service_name(name.clone()),
        None if std::env::var_os("OTEL_SERVICE_NAME").is_none() => {
            resource = resource.with_service_name("tiny-harness")
        }
        None => {}
    }
    let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource.build()).build();
    opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
    opentelemetry::global::set_tracer_provider(provider.clone());
    let ours = tracing_subscriber::filter::filter_fn(|meta| {
        OUR_CRATES.iter().any(|c| meta.target().starts_with(c))
            && (meta.is_span() && *meta.level() <= tracing::Level::INFO || *meta.level() <= tracing::Level::WARN)
    });
    let spans = tracing_opentelemetry::layer().with_tracer(provider.tracer("tiny-harness")).with_filter(ours);
    let _ = tracing_subscriber::registry().with(lines).with(spans).try_init();
    Ok(Telemetry { provider: Some(provider) })
}

/// One JSON object per line: `timestamp`, `level`, `target`, the event's fields (its
/// `message` among them), `span` (the innermost span's name) and, when traces are on,
/// `trace_id` and `span_id` of the span it was logged in.
struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> std::fmt::Result {
        let mut line = serde_json::Map::new();
        line.insert("timestamp".into(), chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true).into());
        line.insert("level".into(), event.metadata().level().as_str().into());
        line.insert("target".into(), event.metadata().target().into());
        event.record(&mut Fields(&mut line));
        if let Some(span) = ctx.lookup_current() {
            line.insert("span".into(), span.name().into());
            // The innermost span that has OpenTelemetry data (every span of ours has).
            for span in span.scope() {
                let ext = span.extensions();
                if let Some(data) = ext.get::<tracing_opentelemetry::OtelData>()
                    && let (Some(trace), Some(id)) = (data.trace_id(), data.span_id())
                {
                    line.insert("trace_id".into(), trace.to_string().into());
                    line.insert("span_id".into(), id.to_string().into());
                    break;
                }
            }
        }
        let mut text = serde_json::Value::Object(line).to_string();
        text.push('\n');
        writer.write_str(&text)
    }
}

/// An event's fields into the line's object.
struct Fields<'a>(&'a mut serde_json::Map<String, serde_json::Value>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}").into());
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn traces_are_off_unless_an_endpoint_is_configured() {
        assert_eq!(ObservabilitySection::default().trace_export(env(&[])).unwrap(), None);
        let on = ObservabilitySection::default()
            .trace_export(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")]))
            .unwrap()
            .unwrap();
        assert_eq!(on.endpoint, "http://collector:4318/v1/traces", "the signal's path is added to the base");
        assert_eq!(on.protocol, OtlpProtocol::HttpProtobuf);
        let off = ObservabilitySection { otlp_endpoint: Some("http://c:4318".into()), ..Default::default() }
            .trace_export(env(&[("OTEL_SDK_DISABLED", "true")]))
            .unwrap();
        assert_eq!(off, None, "OTEL_SDK_DISABLED turns them off");
    }

    #[test]
    fn the_section_wins_over_the_variables_and_a_signal_endpoint_is_taken_whole() {
        let vars = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ]);
        let section = ObservabilitySection {
            otlp_endpoint: Some("http://file:4317".into()),
            otlp_protocol: Some("grpc".into()),
            ..Default::default()
        };
        let export = section.trace_export(&vars).unwrap().unwrap();
        assert_eq!((export.endpoint.as_str(), export.protocol), ("http://file:4317", OtlpProtocol::Grpc));
        let whole = ObservabilitySection::default()
            .trace_export(env(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/custom/path")]))
            .unwrap()
            .unwrap();
        assert_eq!(whole.endpoint, "http://c:4318/custom/path");
    }

    #[test]
    fn a_protocol_or_endpoint_this_build_cannot_use_is_named() {
        let err = ObservabilitySection::default()
            .trace_export(env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("OTEL_EXPORTER_OTLP_PROTOCOL = `http/json`"), "{err}");
        let err = ObservabilitySection { otlp_endpoint: Some("collector:4317".into()), ..Default::default() }
            .trace_export(env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`collector:4317/v1/traces` is not an http:// or https:// URL"), "{err}");
    }
}
