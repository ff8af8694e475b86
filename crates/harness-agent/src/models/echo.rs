//! `echo`: replies `echo: <the user's text>`, streamed word by word. Deterministic, offline,
//! the default model.

use super::{DeltaStream, ModelError, ModelEvent, ModelProvider, ModelRequest, last_user_text};
use futures::StreamExt;

/// The echo model.
pub struct EchoModel;

/// Splits a reply into deltas after each whitespace run, so a reply streams in pieces.
pub fn split_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_space = false;
    for ch in text.chars() {
        if in_space && !ch.is_whitespace() {
            out.push(std::mem::take(&mut cur));
        }
        in_space = ch.is_whitespace();
        cur.push(ch);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[async_trait::async_trait]
impl ModelProvider for EchoModel {
    /// It answers the turn's message alone.
    fn history_window(&self) -> Option<usize> {
        Some(1)
    }

    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        let reply = format!("echo: {}", last_user_text(&request.history));
        Ok(futures::stream::iter(split_words(&reply).into_iter().map(|w| Ok(ModelEvent::Text(w)))).boxed())
    }

    fn is_instant(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_their_spacing_so_the_deltas_join_back_to_the_reply() {
        let parts = split_words("echo: hello  big world");
        assert_eq!(parts, vec!["echo: ", "hello  ", "big ", "world"]);
        assert_eq!(parts.concat(), "echo: hello  big world");
    }
}
