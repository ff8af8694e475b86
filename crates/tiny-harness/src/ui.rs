//! The web UI (issue 30, S20): the single-page app built from `ui/` at the repository root
//! (`cargo xtask ui`), embedded in the binary and served at `<prefix>/ui/` by default. A
//! `server.ui_dir` serves other files there instead; `RouteOptions { ui: false }` serves
//! none. The app finds the A2A routes beside `/ui` (`<prefix>/a2a/rest`), so a host that
//! merges the harness's routes into its own router nests [`router`] at `<prefix>/ui`.
//!
//! The built files are committed (`crates/tiny-harness/ui/`), so a fresh `cargo run` needs no
//! Node; CI rebuilds them and fails when they differ from the sources (docs/ui.md).

use axum::Router;
use axum::extract::OriginalUri;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const INDEX: &str = include_str!("../ui/index.html");
const APP_JS: &str = include_str!("../ui/app.js");
const APP_CSS: &str = include_str!("../ui/app.css");

/// What the page may load: its own files, its own API, images and media an A2UI surface
/// shows from anywhere; inline styles, which the renderer's components set.
const CSP: &str = "default-src 'self'; img-src * data: blob:; media-src *; style-src 'self' 'unsafe-inline'; \
                   connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'self'";

/// The embedded UI as a router of its own: `/` (the page), `/app.js`, `/app.css`. Nest it
/// at `<prefix>/ui`; any other path under it is a 404.
pub fn router() -> Router {
    Router::new()
        .route("/", get(index))
        .route("/index.html", get(index))
        .route("/app.js", get(|| async { file("text/javascript; charset=utf-8", APP_JS) }))
        .route("/app.css", get(|| async { file("text/css; charset=utf-8", APP_CSS) }))
}

/// The page; `<...>/ui` without its slash is redirected to `<...>/ui/`, where the page's
/// relative paths resolve.
async fn index(OriginalUri(original): OriginalUri) -> Response {
    let path = original.path();
    if !path.ends_with('/') && !path.ends_with("/index.html") {
        let location = format!("{path}/");
        if let Ok(location) = HeaderValue::from_str(&location) {
            return (StatusCode::PERMANENT_REDIRECT, [(header::LOCATION, location)]).into_response();
        }
    }
    let mut response = file("text/html; charset=utf-8", INDEX);
    response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    response
}

fn file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            // One build per binary, and names without hashes: revalidate each load.
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        ],
        body,
    )
        .into_response()
}
