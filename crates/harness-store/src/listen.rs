//! Wake-ups across processes on Postgres (D1, issue 20): every append and every cut is
//! announced with `pg_notify` inside its own transaction (Postgres delivers it with the
//! commit, and never for a transaction that rolled back), and every store LISTENs and
//! passes what other processes announce to its in-process [`crate::Notifier`]. A reader on
//! any instance is then woken by an append on any other as by one of its own: no polling
//! sets the latency floor. (The readers' one-second wait stays as the backstop for an
//! announcement a listener missed while its connection was down.)

use crate::Notifier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The channel every store of a database announces on.
pub(crate) const CHANNEL: &str = "tiny_harness_log";

/// A name for this store among the processes on its database: its own announcements come
/// back to it and are skipped.
pub(crate) fn origin() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{}.{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// What an announcement says.
#[derive(Debug, PartialEq, Eq)]
struct Announced<'a> {
    origin: &'a str,
    rewound: bool,
    seq: i64,
    task_id: &'a str,
}

/// `<origin> <n|r> <seq> <task id>` (task ids may hold anything but come last).
fn parse(payload: &str) -> Option<Announced<'_>> {
    let mut parts = payload.splitn(4, ' ');
    let origin = parts.next()?;
    let rewound = match parts.next()? {
        "n" => false,
        "r" => true,
        _ => return None,
    };
    let seq = parts.next()?.parse().ok()?;
    let task_id = parts.next()?;
    Some(Announced { origin, rewound, seq, task_id })
}

/// Tells the other processes on this database, once the transaction on `conn` commits, that
/// `task_id`'s log has `seq` (or, when `rewound`, was cut back and appended again from
/// `seq`). `origin` is this store's (`None` on SQLite: one process, nothing to tell).
pub(crate) async fn announce(
    conn: &mut crate::conn::Conn<'_>,
    origin: Option<&str>,
    task_id: &str,
    seq: i64,
    rewound: bool,
) -> Result<(), crate::StoreError> {
    let Some(origin) = origin else { return Ok(()) };
    let payload = format!("{} {seq} {task_id}", payload_head(origin, rewound));
    conn.fetch_all("SELECT pg_notify($1, $2)", args![CHANNEL, payload.as_str()]).await?;
    Ok(())
}

/// An announcement's payload up to its seq: `<origin> <n|r>`.
pub(crate) fn payload_head(origin: &str, rewound: bool) -> String {
    format!("{origin} {}", if rewound { "r" } else { "n" })
}

/// Listens for other processes' announcements, reconnecting after a lost connection;
/// after each (re)connect every reader is woken once, since anything may have been missed.
pub(crate) fn spawn_listener(url: String, origin: String, notifier: Notifier) {
    tokio::spawn(async move {
        loop {
            match sqlx::postgres::PgListener::connect(&url).await {
                Ok(mut listener) => match listener.listen(CHANNEL).await {
                    Ok(()) => {
                        notifier.nudge_all();
                        loop {
                            let notification = match listener.recv().await {
                                Ok(n) => n,
                                Err(e) => {
                                    tracing::warn!(error = %e, "store: the LISTEN connection was lost; reconnecting");
                                    break;
                                }
                            };
                            match parse(notification.payload()) {
                                Some(a) if a.origin == origin => {}
                                Some(a) if a.rewound => notifier.rewound(a.task_id, a.seq),
                                Some(a) => notifier.notify(a.task_id, a.seq),
                                None => tracing::debug!("store: an announcement not understood"),
                            }
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "store: LISTEN failed; retrying"),
                },
                Err(e) => tracing::warn!(error = %e, "store: no LISTEN connection; retrying"),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;

    /// Two stores on one Postgres database, as two instances have: an append on one wakes
    /// the other's readers, and an append the store refused (nothing committed) does not.
    #[tokio::test]
    async fn an_append_on_one_store_wakes_the_readers_of_another_only_once_committed() {
        let url = crate::testing::fresh_postgres_database().await.unwrap();
        let (a, b) = (Store::connect(&url).await.unwrap(), Store::connect(&url).await.unwrap());
        let mut woken = b.notifier().subscribe("t");
        // B listens once an append on A of another task reaches it (its listener connects
        // in the background, maybe before or after this subscribed).
        let mut probe = b.notifier().subscribe("probe");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut n = 0;
        loop {
            n += 1;
            let e = if n == 1 {
                opened("probe", "c", "2026-01-01T00:00:00Z", "q")
            } else {
                new("probe", &format!("wf-{n}"), status("probe", TaskState::Working))
            };
            a.append(&e).await.unwrap();
            if tokio::time::timeout(Duration::from_millis(200), probe.changed()).await.is_ok() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "B never heard A");
        }
        woken.borrow_and_update();
        a.append(&opened("t", "c", "2026-01-01T00:00:00Z", "q")).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), woken.changed()).await.expect("woken by A's append").unwrap();
        assert_eq!(woken.borrow_and_update().seq, 1);
        a.append(&new("t", "wf-2", status("t", TaskState::Completed))).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), woken.changed()).await.expect("woken again").unwrap();
        assert_eq!(woken.borrow_and_update().seq, 2);
        let refused = a.append(&new("t", "wf-3", status("t", TaskState::Working))).await;
        assert!(matches!(refused, Err(crate::StoreError::Closed(_))), "{refused:?}");
        let quiet = tokio::time::timeout(Duration::from_millis(800), woken.changed()).await;
        assert!(quiet.is_err(), "a refused append announces nothing: {:?}", *woken.borrow());
    }

    /// A batch of appends (a model call's events, one transaction) is announced once per
    /// task, with its newest seq: another store's reader wakes at the batch's last event and
    /// reads every event of it; a cut in a batch is still announced as a cut.
    #[tokio::test]
    async fn a_batch_of_appends_wakes_another_stores_readers_at_its_newest_event() {
        let url = crate::testing::fresh_postgres_database().await.unwrap();
        let (a, b) = (Store::connect(&url).await.unwrap(), Store::connect(&url).await.unwrap());
        a.append(&opened("t", "c", "2026-01-01T00:00:00Z", "q")).await.unwrap();
        let mut woken = b.notifier().subscribe("t");
        // B hears A once its listener is connected (it connects in the background).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut n = 1;
        loop {
            n += 1;
            a.append(&new("t", &format!("wf-{n}"), status("t", TaskState::Working))).await.unwrap();
            if tokio::time::timeout(Duration::from_millis(200), woken.changed()).await.is_ok() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "B never heard A");
        }
        woken.borrow_and_update();
        let batch: Vec<_> = (1..=3).map(|i| new("t", &format!("batch-{i}"), status("t", TaskState::Working))).collect();
        let appended = a.append_all(&batch).await.unwrap();
        let newest = appended.last().unwrap().seq;
        assert_eq!(newest, i64::from(n) + 3);
        let wake = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                woken.changed().await.unwrap();
                let now = *woken.borrow_and_update();
                if now.seq >= newest {
                    return now;
                }
            }
        })
        .await
        .expect("B woken at the batch's newest event");
        assert_eq!((wake.seq, wake.rewrites), (newest, 0));
        let read: Vec<i64> = b.events_after("t", newest - 3, 10).await.unwrap().iter().map(|e| e.seq).collect();
        assert_eq!(read, vec![newest - 2, newest - 1, newest], "every event of the batch is there to read");

        // The batch's first key again with another body: the log is cut back to it, and B
        // hears a cut from there, then the batch's newest seq.
        let mut again = batch.clone();
        again[0].event = status("t", TaskState::Submitted);
        let appended = a.append_all(&again).await.unwrap();
        assert!(appended[0].rewrote && appended[1].new && appended[2].new, "{appended:?}");
        let wake = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                woken.changed().await.unwrap();
                let now = *woken.borrow_and_update();
                if now.rewrites > 0 && now.seq >= newest {
                    return now;
                }
            }
        })
        .await
        .expect("B told of the cut and the appends after it");
        assert_eq!((wake.rewound_from, wake.seq), (newest - 2, newest));
    }

    #[test]
    fn an_announcement_names_its_origin_kind_seq_and_task() {
        let a = parse("12.0 n 7 task with spaces").unwrap();
        assert_eq!(a, Announced { origin: "12.0", rewound: false, seq: 7, task_id: "task with spaces" });
        assert!(parse("12.0 r 3 t").unwrap().rewound);
        assert_eq!(parse("12.0 x 3 t"), None);
        assert_eq!(parse("12.0 n seven t"), None);
        assert_eq!(parse("12.0 n 3"), None);
    }
}
