//! A push-notification webhook on loopback that records what it receives.

/// What a webhook received: the path it was posted to, its token and authorization
/// headers, and the body.
pub type Posts = std::sync::Arc<std::sync::Mutex<Vec<(String, String, String, serde_json::Value)>>>;

/// A webhook on loopback that records every post and answers 200.
pub async fn webhook() -> (String, Posts) {
    webhook_answering(std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true))).await
}

/// A webhook that takes posts while `open` holds (recording them) and answers 503 else.
pub async fn webhook_answering(open: std::sync::Arc<std::sync::atomic::AtomicBool>) -> (String, Posts) {
    let posts = Posts::default();
    let record = posts.clone();
    let app = axum::Router::new().route(
        "/{hook}",
        axum::routing::post(
            move |axum::extract::Path(hook): axum::extract::Path<String>,
                  headers: axum::http::HeaderMap,
                  axum::Json(body): axum::Json<serde_json::Value>| {
                let (record, open) = (record.clone(), open.clone());
                async move {
                    if !open.load(std::sync::atomic::Ordering::SeqCst) {
                        return axum::http::StatusCode::SERVICE_UNAVAILABLE;
                    }
                    let header =
                        |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
                    let token = header("x-a2a-notification-token");
                    record.lock().unwrap().push((hook, token, header("authorization"), body));
                    axum::http::StatusCode::OK
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, posts)
}
