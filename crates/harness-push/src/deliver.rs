//! Delivery of a task's events to its push configs (S14, CHEATSHEET §10): `POST {url}` with
//! the event's `StreamResponse` JSON, `X-A2A-Notification-Token` when the config has a token,
//! `Authorization: {scheme} {credentials}` when it has authentication.
//!
//! Each config has its own queue and worker, so events reach a webhook in log order while a
//! slow webhook delays only itself; a failed post is retried with exponential backoff up to
//! the policy's attempts, then dropped with a warning naming the URL (never the token or
//! the body). `deliver` only enqueues: it never waits on a webhook.
//!
//! Every delivery is also in the store's outbox, put there by the append of its event and
//! taken out once posted or given up. [`Pusher::spawn_sweeper`] takes over what a process
//! that died left there (when this process starts, and then whenever a lease runs out), so
//! delivery is at-least-once across a crash; a delivery that was posted just before the
//! crash can come twice.

use crate::hosts::{GuardedResolver, HostPolicy};
use crate::{PUSH_DELIVERIES, PUSH_RETRIES, PushKey, PushSecret};
use a2a_types::StreamResponse;
use harness_store::{PUSH_LEASE, PendingPush, Store};
use std::collections::{HashMap, HashSet};
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
    /// Which hosts a push may go to (SSRF, `[push] allow_private_hosts`).
    pub hosts: HostPolicy,
    /// Posts in flight at once, to all hosts and to one host (issue 34): a task with many
    /// configs, or a webhook that never answers, holds at most this many sockets; the rest
    /// wait their turn in their config's queue.
    pub max_posts: usize,
    pub max_posts_per_host: usize,
}

impl Default for DeliveryPolicy {
    fn default() -> Self {
        Self {
            attempts: 5,
            first_backoff: Duration::from_millis(500),
            timeout: Duration::from_secs(15),
            hosts: HostPolicy::default(),
            max_posts: 64,
            max_posts_per_host: 8,
        }
    }
}

/// A delivery as its worker posts it: the outbox's row with the config's secret opened.
struct Job {
    push: PendingPush,
    secret: PushSecret,
}

/// Delivers events to push configs, in order per config.
pub struct Pusher {
    store: Store,
    key: PushKey,
    http: reqwest::Client,
    policy: DeliveryPolicy,
    queues: Mutex<HashMap<(String, String), mpsc::UnboundedSender<Job>>>,
    /// Deliveries queued in this process (task, config, seq), so a sweep does not queue
    /// one twice.
    queued: Mutex<HashSet<(String, String, i64)>>,
    /// The per-config workers, stopped by [`Pusher::stop`].
    workers: Mutex<Vec<tokio::task::AbortHandle>>,
    /// Permits for posts in flight: all of them, and per host.
    posts: Arc<tokio::sync::Semaphore>,
    posts_per_host: Mutex<HashMap<String, Arc<tokio::sync::Semaphore>>>,
}

impl Pusher {
    pub fn new(store: Store, key: PushKey, policy: DeliveryPolicy) -> Arc<Self> {
        let http = reqwest::Client::builder()
            .timeout(policy.timeout)
            .dns_resolver(Arc::new(GuardedResolver(policy.hosts)))
            .pool_max_idle_per_host(policy.max_posts_per_host)
            .build()
            .expect("an HTTP client builds");
        let posts = Arc::new(tokio::sync::Semaphore::new(policy.max_posts.max(1)));
        Arc::new(Self {
            store,
            key,
            http,
            policy,
            queues: Mutex::default(),
            queued: Mutex::default(),
            workers: Mutex::default(),
            posts,
            posts_per_host: Mutex::default(),
        })
    }

    /// Which hosts a push may go to.
    pub fn hosts(&self) -> HostPolicy {
        self.policy.hosts
    }

    /// The key that seals and opens config secrets.
    pub fn key(&self) -> &PushKey {
        &self.key
    }

    /// Queues `event` (the log's `seq`, which its append put in the outbox) for every push
    /// config of `task_id`. Returns once queued.
    pub async fn deliver(self: &Arc<Self>, task_id: &str, event: &StreamResponse, seq: i64) {
        let configs = match self.store.push_configs(task_id).await {
            Ok(c) => c,
            Err(e) => {
                // The outbox keeps the deliveries; a sweep takes them once their lease runs out.
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
        let pending = configs.into_iter().map(|c| PendingPush {
            task_id: c.task_id,
            config_id: c.config_id,
            seq,
            url: c.url,
            sealed: c.sealed,
            body: body.clone(),
        });
        self.enqueue(pending).await;
        if event.state().is_some_and(|s| s.is_terminal()) {
            // Nothing follows a terminal event: the workers drain their queues and end.
            self.queues.lock().expect("push queues").retain(|(t, _), _| t != task_id);
        }
    }

    /// Takes over the outbox's deliveries of `task_queue`'s tasks that no process holds (see
    /// [`Store::claim_pushes`]) and queues them, in log order per config. Returns how many.
    pub async fn resume(
        self: &Arc<Self>,
        task_queue: &str,
        starting: bool,
    ) -> Result<usize, harness_store::StoreError> {
        let pending = self.store.claim_pushes(task_queue, starting).await?;
        Ok(self.enqueue(pending.into_iter()).await)
    }

    /// Resumes what the outbox holds when started, then again every half lease.
    /// The first sweep waits for `first` (the harness's reconciler: a delivery a crashed
    /// workflow task queued may be cut from the outbox by it, docs/event-log.md).
    pub fn spawn_sweeper(
        self: &Arc<Self>,
        task_queue: String,
        first: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            first.await;
            let mut starting = true;
            loop {
                match this.resume(&task_queue, starting).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(deliveries = n, "push: took over deliveries left in the outbox"),
                    Err(e) => tracing::warn!(error = %e, "push: could not read the outbox"),
                }
                starting = false;
                tokio::time::sleep(PUSH_LEASE / 2).await;
            }
        })
    }

    /// Queues deliveries not queued in this process yet (an append's own and a sweep's can
    /// meet); one whose config this key cannot open is dropped from the outbox, as it can
    /// never be posted. Returns how many were queued.
    async fn enqueue(self: &Arc<Self>, pending: impl Iterator<Item = PendingPush>) -> usize {
        let mut undeliverable = Vec::new();
        let mut count = 0;
        {
            let mut queues = self.queues.lock().expect("push queues");
            let mut queued = self.queued.lock().expect("queued pushes");
            for p in pending {
                let secret = match self.key.open(&p.sealed) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(task_id = %p.task_id, config_id = %p.config_id, error = %e, "push: config skipped");
                        undeliverable.push(p);
                        continue;
                    }
                };
                if !queued.insert((p.task_id.clone(), p.config_id.clone(), p.seq)) {
                    continue;
                }
                count += 1;
                let sender =
                    queues.entry((p.task_id.clone(), p.config_id.clone())).or_insert_with(|| self.spawn_worker());
                let _ = sender.send(Job { push: p, secret });
            }
        }
        for p in undeliverable {
            self.clear(&p).await;
        }
        count
    }

    /// Takes a delivery that is over (posted, given up, or never deliverable) out of the
    /// outbox.
    async fn clear(&self, p: &PendingPush) {
        if let Err(e) = self.store.push_done(&p.task_id, &p.config_id, p.seq).await {
            tracing::warn!(task_id = %p.task_id, error = %e, "push: could not clear a delivery from the outbox");
        }
    }

    /// Stops every delivery of this process: what is not posted yet stays in the outbox,
    /// for the next start (or, on Postgres, another instance) to take over.
    pub fn stop(&self) {
        for worker in self.workers.lock().expect("push workers").drain(..) {
            worker.abort();
        }
        self.queues.lock().expect("push queues").clear();
        self.queued.lock().expect("queued pushes").clear();
    }

    fn spawn_worker(self: &Arc<Self>) -> mpsc::UnboundedSender<Job> {
        let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
        let this = self.clone();
        let worker = tokio::spawn(async move {
            while let Some(job) = rx.recv().await {
                this.post_with_retries(&job).await;
                this.clear(&job.push).await;
                let p = job.push;
                this.queued.lock().expect("queued pushes").remove(&(p.task_id, p.config_id, p.seq));
            }
        });
        let mut workers = self.workers.lock().expect("push workers");
        workers.retain(|w| !w.is_finished());
        workers.push(worker.abort_handle());
        tx
    }

    /// Posts a push, retrying with backoff; counts its outcome (issue 32).
    async fn post_with_retries(&self, job: &Job) {
        // A literal address never meets the resolver: checked here too (a config stored
        // before the policy, or under another one).
        let host = a2a_types::validate::push_url_host(&job.push.url).unwrap_or_default();
        if let Some(why) = self.policy.hosts.refuses_host(host) {
            tracing::warn!(url = ?job.push.url, why, "push: not posted: the host is refused");
            metrics::counter!(PUSH_DELIVERIES, "outcome" => "refused_host").increment(1);
            return;
        }
        let mut backoff = self.policy.first_backoff;
        for attempt in 1..=self.policy.attempts.max(1) {
            match self.post(job).await {
                Ok(()) => {
                    metrics::counter!(PUSH_DELIVERIES, "outcome" => "delivered").increment(1);
                    return;
                }
                Err(why) if attempt == self.policy.attempts.max(1) => {
                    // Debug-quoted: a URL never breaks a log line (issue 34).
                    tracing::warn!(url = ?job.push.url, attempts = attempt, %why, "push: delivery given up");
                    metrics::counter!(PUSH_DELIVERIES, "outcome" => "given_up").increment(1);
                }
                Err(why) => {
                    tracing::debug!(url = ?job.push.url, attempt, %why, "push: delivery failed, retrying");
                    metrics::counter!(PUSH_RETRIES).increment(1);
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                }
            }
        }
    }

    /// The permits one post holds: one of its host's, then one of all.
    async fn permits(&self, host: &str) -> (tokio::sync::OwnedSemaphorePermit, tokio::sync::OwnedSemaphorePermit) {
        let per_host = {
            let mut hosts = self.posts_per_host.lock().expect("push hosts");
            if hosts.len() > 10_000 {
                // Forget idle hosts (no post holds their semaphore).
                hosts.retain(|_, s| Arc::strong_count(s) > 1);
            }
            let limit = self.policy.max_posts_per_host.max(1);
            hosts.entry(host.to_string()).or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(limit))).clone()
        };
        let host_permit = per_host.acquire_owned().await.expect("never closed");
        let permit = self.posts.clone().acquire_owned().await.expect("never closed");
        (host_permit, permit)
    }

    async fn post(&self, job: &Job) -> Result<(), String> {
        let host = a2a_types::validate::push_url_host(&job.push.url).unwrap_or_default().to_ascii_lowercase();
        let _permits = self.permits(&host).await;
        let mut request =
            self.http.post(&job.push.url).header("content-type", "application/json").body(job.push.body.clone());
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// A webhook that answers 503 until `open`, counting what it took.
    async fn webhook(open: Arc<AtomicBool>, taken: Arc<AtomicUsize>, refused: Arc<AtomicUsize>) -> String {
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move || {
                let (open, taken, refused) = (open.clone(), taken.clone(), refused.clone());
                async move {
                    if open.load(Ordering::SeqCst) {
                        taken.fetch_add(1, Ordering::SeqCst);
                        axum::http::StatusCode::OK
                    } else {
                        refused.fetch_add(1, Ordering::SeqCst);
                        axum::http::StatusCode::SERVICE_UNAVAILABLE
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    async fn until(what: &str, done: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// S14: a stopped pusher posts nothing more, and what it had not posted stays in the
    /// outbox for the next start, which posts it.
    #[tokio::test]
    async fn a_stopped_pusher_leaves_its_deliveries_in_the_outbox_for_the_next_start() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite://{}", dir.path().join("s.db").display())).await.unwrap();
        let key = PushKey::load_or_create(&dir.path().join("push.key")).unwrap();
        let (open, taken, refused) = (Arc::new(AtomicBool::new(false)), Arc::default(), Arc::default());
        let url = webhook(open.clone(), Arc::clone(&taken), Arc::clone(&refused)).await;
        let secret = PushSecret { token: "tok".into(), authentication: None };
        let config =
            harness_store::PushRow { task_id: "t".into(), config_id: "c".into(), url, sealed: key.seal(&secret) };
        store.put_push_config(&config).await.unwrap();
        let event = StreamResponse::Task(a2a_types::Task { id: "t".into(), ..Default::default() });
        let appended = store.append(&harness_store::NewEvent::new("t", "k1", event.clone(), "q")).await.unwrap();
        assert!(appended.pushes);

        let policy = DeliveryPolicy { attempts: 5, first_backoff: Duration::from_millis(100), ..Default::default() };
        let pusher = Pusher::new(store.clone(), key.clone(), policy.clone());
        pusher.deliver("t", &event, appended.seq).await;
        until("a first refused post", || refused.load(Ordering::SeqCst) > 0).await;
        pusher.stop();
        open.store(true, Ordering::SeqCst);
        // Its retries (100, 200, 400, 800 ms apart) would have posted within this.
        tokio::time::sleep(Duration::from_millis(2000)).await;
        assert_eq!(taken.load(Ordering::SeqCst), 0, "a stopped pusher posts nothing more");
        assert_eq!(store.pending_pushes().await.unwrap(), 1, "the delivery stays in the outbox");

        let next = Pusher::new(store.clone(), key, policy);
        assert_eq!(next.resume("q", true).await.unwrap(), 1, "the next start takes it over");
        until("the post", || taken.load(Ordering::SeqCst) == 1).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while store.pending_pushes().await.unwrap() > 0 {
            assert!(tokio::time::Instant::now() < deadline, "the posted delivery stays in the outbox");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
