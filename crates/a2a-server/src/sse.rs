//! SSE framing: one `data:` line per event, with `id: <seq>` when the event has a place in
//! the task's log (a client resumes with `Last-Event-ID`). The first item is fetched before
//! the response starts, so an error there is an ordinary error response (CHEATSHEET §6); an
//! error later is an `event: error` and ends the stream.

use crate::{EventStream, StreamItem};
use a2a_types::{A2AError, StreamResponse};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

/// How each event and error is written for a binding: the `data:` line's JSON, written once
/// straight from the event's type (no `serde_json::Value` in between).
pub(crate) trait Framing: Send + Sync + 'static {
    fn event(&self, e: &StreamResponse) -> String;
    fn error(&self, e: &A2AError) -> String;
}

/// Waits for the first event, then answers with an SSE response. `Err` when the stream
/// failed before its first event.
pub(crate) async fn respond(mut stream: EventStream, framing: impl Framing) -> Result<Response, A2AError> {
    let first = match stream.next().await {
        Some(Ok(first)) => first,
        Some(Err(e)) => return Err(e),
        None => return Err(A2AError::internal("the stream ended before its first event")),
    };
    let framing = std::sync::Arc::new(framing);
    let f = framing.clone();
    let head = futures::stream::once(async move { Ok(first) });
    let events = head.chain(stream).scan(false, move |failed, item| {
        if *failed {
            return futures::future::ready(None);
        }
        let event = match item {
            Ok(StreamItem::Event { id, event }) => {
                let sse = Event::default().data(f.event(&event));
                match id {
                    Some(id) => sse.id(id),
                    None => sse,
                }
            }
            Ok(StreamItem::Comment(text)) => Event::default().comment(text),
            Err(err) => {
                *failed = true;
                Event::default().event("error").data(f.error(&err))
            }
        };
        futures::future::ready(Some(Ok::<_, std::convert::Infallible>(event)))
    });
    let mut response = Sse::new(events).into_response();
    let h = response.headers_mut();
    h.insert("cache-control", "no-store".parse().expect("header"));
    h.insert("x-accel-buffering", "no".parse().expect("header"));
    Ok(response)
}
