//! The public agent card route (S2, CHEATSHEET §9): the JSON is rendered once, with a weak
//! `ETag` (sha256 of the body), `Last-Modified` (when the card was built) and
//! `Cache-Control`; a matching `If-None-Match` is answered 304.

use crate::AppState;
use a2a_types::AgentCard;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// How long clients may cache the card.
pub const CARD_MAX_AGE_SECS: u32 = 300;

pub(crate) struct CardResponder {
    body: String,
    etag: HeaderValue,
    last_modified: HeaderValue,
    cache_control: HeaderValue,
}

impl CardResponder {
    pub(crate) fn new(card: &AgentCard) -> Self {
        let body = serde_json::to_string(card).unwrap_or_default();
        let digest = Sha256::digest(body.as_bytes());
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        let etag = HeaderValue::from_str(&format!("W/\"{hex}\"")).expect("hex is a valid header");
        let now = chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S GMT").to_string();
        let last_modified = HeaderValue::from_str(&now).expect("a date is a valid header");
        let cache_control = HeaderValue::from_str(&format!("public, max-age={CARD_MAX_AGE_SECS}")).expect("header");
        Self { body, etag, last_modified, cache_control }
    }
}

pub(crate) async fn serve(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let card = &state.card;
    let fresh =
        headers.get_all(header::IF_NONE_MATCH).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(
            |tag| {
                let tag = tag.trim();
                tag == "*" || tag.trim_start_matches("W/") == card.etag.to_str().unwrap_or("").trim_start_matches("W/")
            },
        );
    let common = [
        (header::ETAG, card.etag.clone()),
        (header::LAST_MODIFIED, card.last_modified.clone()),
        (header::CACHE_CONTROL, card.cache_control.clone()),
    ];
    if fresh {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    (common, crate::json_body(card.body.clone())).into_response()
}
