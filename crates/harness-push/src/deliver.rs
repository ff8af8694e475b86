//! Delivery of a task's events to its push configs (S14, CHEATSHEET §10): `POST {url}` with
//! the event's `StreamResponse` JSON, `X-A2A-Notification-Token` when the config has a token,
//! `Authorization: {scheme} {credentials}` when it has authentication.
//!
//! Each config has its own queue and worker, so events reach a webhook in log order while a
//! slow webhook delays only itself; a failed post is retried with exponential backoff up to
//! the policy's attempts, then dropped with a warning naming the URL (never the token or
//! the body). `deliver` only enqueues: it never waits on a webhook.

use crate::{PushKey, PushSecret};
use a2a_types::StreamResponse;
use harness_store::Store;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// Retries and timeouts of a delivery.
#[derive(Clone, Debug)]
pub struct DeliveryPolicy {
    /// Posts per event, the first included.
    pub attempts: u32,
    /// Wait before the second post; doubled for each next one.
    pub first_backoff: Duration,
    /// Per post.
    pub timeout: Duration,
}

impl Default for DeliveryPolicy {
    fn default() -> Self {
        Self { attempts: 5, first_backoff: Duration::from_millis(500), timeout: Duration::from_secs(15) }
    }
}

struct Job {
    url: String,
    secret: PushSecret,
    body: String,
}

/// Delivers events to push configs, in order per config.
pub struct Pusher {
    store: Store,
    key: PushKey,
    http: reqwest::Client,
    policy: DeliveryPolicy,
    queues: Mutex<HashMap<(String, String), mpsc::UnboundedSender<Job>>>,
}

impl Pusher {
    pub fn new(store: Store, key: PushKey, policy: DeliveryPolicy) -> Arc<Self> {
        let http = reqwest::Client::builder().timeout(policy.timeout).build().expect("an HTTP client builds");
        Arc::new(Self { store, key, http, policy, queues: Mutex::new(HashMap::new()) })
    }

    /// The key that seals and opens config secrets.
    pub fn key(&self) -> &PushKey {
        &self.key
    }

    /// Queues `event` for every push config of `task_id`. Returns once queued.
    pub async fn deliver(self: &Arc<Self>, task_id: &str, event: &StreamResponse) {
        let configs = match self.store.push_configs(task_id).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(task_id, error = %e, "push: could not read the task's push configs");
                return;
            }
        };
        if configs.is_empty() {
            return;
        }
        let body = match serde_json::to_string(event) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(task_id, error = %e, "push: the event does not serialise");
                return;
            }
        };
        let terminal = event.state().is_some_and(|s| s.is_terminal());
        let mut queues = self.queues.lock().expect("push queues");
        for config in configs {
            let secret = match self.key.open(&config.sealed) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(task_id, config_id = %config.config_id, error = %e, "push: config skipped");
                    continue;
                }
            };
            let key = (config.task_id.clone(), config.config_id.clone());
            let sender = queues.entry(key).or_insert_with(|| self.spawn_worker());
            let _ = sender.send(Job { url: config.url, secret, body: body.clone() });
        }
        if terminal {
            // Nothing follows a terminal event: the workers drain their queues and end.
            queues.retain(|(t, _), _| t != task_id);
        }
    }

    fn spawn_worker(self: &Arc<Self>) -> mpsc::UnboundedSender<Job> {
        let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
        let this = self.clone();
        tokio::spawn(async move {
            while let Some(job) = rx.recv().await {
                this.post_with_retries(&job).await;
            }
        });
        tx
    }

    async fn post_with_retries(&self, job: &Job) {
        let mut backoff = self.policy.first_backoff;
        for attempt in 1..=self.policy.attempts.max(1) {
            match self.post(job).await {
                Ok(()) => return,
                Err(why) if attempt == self.policy.attempts.max(1) => {
                    tracing::warn!(url = %job.url, attempts = attempt, %why, "push: delivery given up");
                }
                Err(why) => {
                    tracing::debug!(url = %job.url, attempt, %why, "push: delivery failed, retrying");
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                }
            }
        }
    }

    async fn post(&self, job: &Job) -> Result<(), String> {
        let mut request = self.http.post(&job.url).header("content-type", "application/json").body(job.body.clone());
        if !job.secret.token.is_empty() {
            request = request.header("X-A2A-Notification-Token", &job.secret.token);
        }
        if let Some(auth) = &job.secret.authentication {
            request = request.header("authorization", format!("{} {}", auth.scheme, auth.credentials));
        }
        let response = request.send().await.map_err(|e| e.without_url().to_string())?;
        if response.status().is_success() { Ok(()) } else { Err(format!("HTTP {}", response.status())) }
    }
}
