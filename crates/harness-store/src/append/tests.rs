use super::*;
use crate::test_support::*;
use sqlx::Row as _;

on_both!(appends_are_gap_free_idempotent_and_fenced_after_a_terminal_event, gap_free_idempotent_fenced);
on_both!(concurrent_writers_of_one_task_never_leave_a_gap, concurrent_writers);
on_both!(every_terminal_state_fences_the_log_and_a_retried_key_still_answers, terminal_fences);
on_both!(a_failed_write_is_reported_and_the_writer_goes_on, failed_write);
on_both!(an_event_that_replaces_an_uncommitted_one_cuts_the_log_and_its_rows_back, replaces_uncommitted);
on_both!(a_reconciler_cuts_back_only_a_log_still_as_it_read_it, cut_back_when_unchanged);
on_both!(events_appended_together_land_in_order_all_or_none, appended_together);
on_both!(an_answer_read_on_a_kept_tail_is_the_stored_history_also_after_a_cut, answers_on_tails);
on_both!(an_answers_artifacts_read_on_a_kept_tail_are_the_stored_ones_also_when_written_again, artifacts_on_tails);
on_both!(a_run_of_chunks_appended_together_is_what_appending_each_writes, chunk_runs);
on_both!(a_turn_appended_together_counts_its_senders_message_once, turn_together);
on_both!(a_batch_appended_together_leaves_what_its_events_one_by_one_leave, together_as_one_by_one);
on_both!(a_log_read_with_its_answer_is_the_log_and_the_answer_read_apart, log_with_answer);

async fn gap_free_idempotent_fenced(store: Store) {
    let a = store.append(&new("t", "k1", status("t", TaskState::Working))).await.unwrap();
    let b = store.append(&new("t", "k2", status("t", TaskState::Working))).await.unwrap();
    let again = store.append(&new("t", "k1", status("t", TaskState::Working))).await.unwrap();
    assert_eq!((a.seq, b.seq), (1, 2));
    assert_eq!(again, Appended { seq: 1, new: false, pushes: false, rewrote: false });
    store.append(&new("t", "k3", status("t", TaskState::Canceled))).await.unwrap();
    let refused = store.append(&new("t", "k4", status("t", TaskState::Working))).await.unwrap_err();
    assert_eq!(refused.to_string(), "the task is in a terminal state (TASK_STATE_CANCELED)");
    let seqs: Vec<i64> = store.events_after("t", 0, 100).await.unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3]);
}

/// Issue 31: `append_all` (an `emit_event` carrying a held echo and its WORKING) writes
/// its events in order with their rows, each idempotent on its key; when one is refused,
/// none is written, so a retry never finds half of it.
async fn appended_together(store: Store) {
    store.append(&opened("t", "c", "2026-01-01T00:00:00Z", "q")).await.unwrap();
    let echo = NewEvent {
        history: vec![message("m1")],
        history_from: 0,
        stored_before: Some(crate::Stored::default()),
        ..new("t", "wf-1", status("t", TaskState::Submitted))
    };
    let working = NewEvent {
        stored_before: Some(crate::Stored { history: 1, artifacts: 0 }),
        ..new("t", "wf-2", status("t", TaskState::Working))
    };
    let both = store.append_all(&[echo.clone(), working.clone()]).await.unwrap();
    assert_eq!(both.iter().map(|a| (a.seq, a.new)).collect::<Vec<_>>(), vec![(2, true), (3, true)]);
    assert_eq!(store.task_head("t").await.unwrap().unwrap().state, TaskState::Working);
    assert_eq!(ids(&store.history("t", i64::MAX, None).await.unwrap()), vec!["m1"]);
    // A retry of the pair answers the first seqs and writes nothing twice.
    let again = store.append_all(&[echo, working]).await.unwrap();
    assert_eq!(again.iter().map(|a| (a.seq, a.new)).collect::<Vec<_>>(), vec![(2, false), (3, false)]);
    // The second of a pair refused (the first ended the task): neither is written, and
    // the error says why.
    let pair = [new("t", "wf-3", status("t", TaskState::Canceled)), new("t", "wf-4", status("t", TaskState::Working))];
    let refused = store.append_all(&pair).await.unwrap_err().to_string();
    assert!(refused.contains("the task is in a terminal state (TASK_STATE_CANCELED)"), "{refused}");
    assert!(refused.contains("none of them was written"), "{refused}");
    let seqs: Vec<i64> = store.events_after("t", 0, 100).await.unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3], "nothing of the refused pair");
    assert_eq!(store.task_head("t").await.unwrap().unwrap().state, TaskState::Working);
    // The store goes on: the next append follows the pair before.
    assert_eq!(store.append(&new("t", "wf-3", status("t", TaskState::InputRequired))).await.unwrap().seq, 4);
    // Once the task ended, a pair whose first is a retry (it writes nothing) is refused as
    // one append would be: closed, which no retry mends.
    store.append(&new("t", "end", status("t", TaskState::Canceled))).await.unwrap();
    let pair =
        [new("t", "wf-3", status("t", TaskState::InputRequired)), new("t", "wf-5", status("t", TaskState::Working))];
    assert!(matches!(store.append_all(&pair).await, Err(StoreError::Closed(TaskState::Canceled))));
}

async fn concurrent_writers(store: Store) {
    let mut handles = Vec::new();
    for w in 0..4 {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            for i in 0..25 {
                store.append(&new("t", &format!("w{w}-{i}"), status("t", TaskState::Working))).await.unwrap();
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let seqs: Vec<i64> = store.events_after("t", 0, 1000).await.unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=100).collect::<Vec<_>>());
}

async fn terminal_fences(store: Store) {
    for state in [TaskState::Completed, TaskState::Failed, TaskState::Canceled, TaskState::Rejected] {
        let t = state.as_str();
        store.append(&new(t, "w", status(t, TaskState::Working))).await.unwrap();
        store.append(&new(t, "end", status(t, state))).await.unwrap();
        let refused = store.append(&new(t, "late", status(t, TaskState::Working))).await.unwrap_err();
        assert_eq!(refused.to_string(), format!("the task is in a terminal state ({t})"));
        let again = store.append(&new(t, "end", status(t, state))).await.unwrap();
        assert_eq!(
            again,
            Appended { seq: 2, new: false, pushes: false, rewrote: false },
            "a retry of the terminal event answers its seq"
        );
    }
    // A state that is not terminal does not fence.
    store.append(&new("ir", "a", status("ir", TaskState::InputRequired))).await.unwrap();
    assert_eq!(store.append(&new("ir", "b", status("ir", TaskState::Working))).await.unwrap().seq, 2);
}

async fn failed_write(store: Store) {
    let m = a2a_types::Message::agent_text("m1", "hi");
    store.record_inbox("r1", "t", &m, crate::InboxOutcome::Received, "").await.unwrap();
    let working = new("t", "k1", status("t", TaskState::Working));
    let (dup, append) =
        tokio::join!(store.record_inbox("r1", "t", &m, crate::InboxOutcome::Received, ""), store.append(&working));
    let dup = dup.unwrap_err().to_string();
    assert!(dup.contains("UNIQUE") || dup.contains("unique") || dup.contains("duplicate"), "{dup}");
    // The append shared the failed write's batch (and was not written) or it did not.
    let seq = match append {
        Ok(a) => a.seq,
        Err(e) => {
            assert!(e.to_string().contains("nothing of the batch was written"), "{e}");
            store.append(&new("t", "k1", status("t", TaskState::Working))).await.unwrap().seq
        }
    };
    assert_eq!(seq, 1);
    assert_eq!(store.inbox_count().await.unwrap(), 1);
    let seqs: Vec<i64> = store.events_after("t", 0, 10).await.unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![1]);
}

/// A turn as the workflow emits it, each event appended by itself: WORKING with the user's
/// message at `at`, a chunk, then INPUT_REQUIRED with the reply and its artifact.
async fn turn(store: &Store, t: &str, n: u32, text: &str, ts: &str, at: i64) -> Vec<Appended> {
    let mut out = Vec::new();
    for e in turn_events(t, n, text, ts, at) {
        out.push(store.append(&e).await.unwrap());
    }
    out
}

/// The events of [`turn`].
fn turn_events(t: &str, n: u32, text: &str, ts: &str, at: i64) -> [NewEvent; 3] {
    let keys = (2 * n, 2 * n + 1);
    let stamped = |state| {
        let mut e = status(t, state);
        if let StreamResponse::StatusUpdate(u) = &mut e {
            u.status.timestamp = Some(ts.to_string());
        }
        e
    };
    let mut working = new(t, &format!("wf-{}", keys.0), stamped(TaskState::Working));
    working.history = vec![Message { role: a2a_types::Role::User, ..Message::agent_text(format!("u{n}"), text) }];
    working.history_from = at;
    working.stored_before = Some(Stored { history: at, artifacts: i64::from(n) - 1 });
    let chunk = chunk(t, n, 0, &format!("echo: {text}"), true);
    let mut parked = new(t, &format!("wf-{}", keys.1), stamped(TaskState::InputRequired));
    parked.history = vec![Message::agent_text(format!("r{n}"), format!("echo: {text}"))];
    parked.history_from = at + 1;
    parked.artifacts = vec![(i64::from(n) - 1, Artifact { artifact_id: format!("reply-{n}"), ..Default::default() })];
    parked.stored_before = Some(Stored { history: at + 1, artifacts: i64::from(n) - 1 });
    [working, chunk, parked]
}

/// A turn's events appended together (an instant model's call, issue 31). On Postgres the
/// sender's message is written in its event's statement and counted on the task's row by a
/// later statement of the transaction: it is counted once, also when its event ends the
/// batch, when another task's events follow it, and when the batch is retried.
async fn turn_together(store: Store) {
    let (t, u) = ("t", "u");
    store.append(&new(t, "wf-1", status(t, TaskState::Submitted))).await.unwrap();
    let first = turn_events(t, 1, "one", "2026-01-01T00:00:01Z", 0);
    let appended = store.append_all(&first).await.unwrap();
    assert_eq!(appended.iter().map(|a| (a.seq, a.new)).collect::<Vec<_>>(), [(2, true), (3, true), (4, true)]);
    assert_eq!(texts(&store, t).await, ["one", "echo: one"]);
    assert_eq!(artifact_ids(&store, t).await, ["reply-1"]);
    assert_eq!(user_messages(&store, t).await, 1);
    let again = store.append_all(&first).await.unwrap();
    assert!(again.iter().all(|a| !a.new && !a.rewrote), "{again:?}");
    assert_eq!(user_messages(&store, t).await, 1, "a retried batch counts nothing twice");

    // The sender's message in the last event of its batch.
    let [working, chunk, parked] = turn_events(t, 2, "two", "2026-01-01T00:00:02Z", 2);
    store.append_all(&[working]).await.unwrap();
    assert_eq!(user_messages(&store, t).await, 2);
    store.append_all(&[chunk, parked]).await.unwrap();
    assert_eq!(user_messages(&store, t).await, 2);

    // Another task's turn right after this task's sender's message, in one batch.
    store.append(&new(u, "wf-1", status(u, TaskState::Submitted))).await.unwrap();
    let [working, chunk, parked] = turn_events(t, 3, "three", "2026-01-01T00:00:03Z", 4);
    let [elsewhere, ..] = turn_events(u, 1, "elsewhere", "2026-01-01T00:00:03Z", 0);
    store.append_all(&[working, elsewhere, chunk, parked]).await.unwrap();
    assert_eq!((user_messages(&store, t).await, user_messages(&store, u).await), (3, 1));
    assert_eq!(texts(&store, t).await, ["one", "echo: one", "two", "echo: two", "three", "echo: three"]);
    assert_eq!(texts(&store, u).await, ["elsewhere"]);
    assert_eq!(artifact_ids(&store, t).await, ["reply-1", "reply-2", "reply-3"]);
    let seqs: Vec<i64> = store.events_after(t, 0, 100).await.unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=10).collect::<Vec<_>>(), "no gap");
}

/// A task's artifact ids in their places.
async fn artifact_ids(store: &Store, task_id: &str) -> Vec<String> {
    let rows = sqlx::query("SELECT artifact_id FROM task_artifacts WHERE task_id = $1 ORDER BY idx")
        .bind(task_id)
        .fetch_all(store.reads())
        .await
        .unwrap();
    rows.iter().map(|r| r.try_get("artifact_id").unwrap()).collect()
}

async fn texts(store: &Store, t: &str) -> Vec<String> {
    store.history(t, i64::MAX, None).await.unwrap().iter().map(|m| m.text()).collect()
}

async fn replaces_uncommitted(store: Store) {
    let t = "t";
    store.append(&new(t, "wf-1", status(t, TaskState::Submitted))).await.unwrap();
    turn(&store, t, 1, "one", "2026-01-01T00:00:01Z", 0).await;
    // A workflow task appends turn 2 ("lost") and dies before it commits: Temporal never
    // accepted that message.
    turn(&store, t, 2, "lost", "2026-01-01T00:00:02Z", 2).await;
    assert_eq!(user_messages(&store, t).await, 2);
    assert_eq!(store.task_head(t).await.unwrap(), None, "no snapshot was written in this test");
    let mut wake = store.notifier().subscribe(t);
    // Its retry takes another message: the same keys with other content replace the
    // uncommitted tail, and the lost message's rows go with it.
    let again = turn(&store, t, 2, "new", "2026-01-01T00:00:09Z", 2).await;
    assert!(again[0].rewrote && again[0].new, "{again:?}");
    assert_eq!(again.iter().map(|a| a.seq).collect::<Vec<_>>(), vec![5, 6, 7]);
    assert!(!again[1].rewrote && !again[2].rewrote, "after the cut the rest is appended anew");
    assert_eq!(texts(&store, t).await, vec!["one", "echo: one", "new", "echo: new"]);
    assert_eq!(user_messages(&store, t).await, 2, "the cut message is no longer counted, its replacement is");
    let events = store.events_after(t, 0, 100).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=7).collect::<Vec<_>>(), "no gap");
    let chunk = serde_json::to_string(&events[5].event).unwrap();
    assert!(chunk.contains("echo: new") && !chunk.contains("lost"), "{chunk}");
    let woke = *wake.borrow_and_update();
    assert_eq!((woke.rewrites, woke.rewound_from), (1, 5), "readers are told where the cut began");
    // An identical retry of a replacing event is a plain retry.
    let retry = turn(&store, t, 2, "new", "2026-01-01T00:00:09Z", 2).await;
    assert!(retry.iter().all(|a| !a.new && !a.rewrote), "{retry:?}");
    assert_eq!(user_messages(&store, t).await, 2, "a retry counts nothing twice");

    // A cut-off tail that ended the task (an uncommitted cancel) does not fence its
    // replacement.
    let c = "c";
    store.append(&new(c, "wf-1", status(c, TaskState::Working))).await.unwrap();
    store.append(&new(c, "wf-2", status(c, TaskState::Canceled))).await.unwrap();
    let mut replacing = new(c, "wf-2", status(c, TaskState::InputRequired));
    replacing.stored_before = Some(Stored::default());
    assert_eq!(store.append(&replacing).await.unwrap().seq, 2);
    assert_eq!(store.append(&new(c, "wf-3", status(c, TaskState::Working))).await.unwrap().seq, 3);
}

async fn cut_back_when_unchanged(store: Store) {
    let t = "t";
    let mut open = new(t, "wf-1", status(t, TaskState::Submitted));
    open.snapshot = Some(Task { id: t.into(), context_id: "c".into(), ..Default::default() });
    store.append(&open).await.unwrap();
    turn(&store, t, 1, "one", "2026-01-01T00:00:01Z", 0).await;
    turn(&store, t, 2, "lost", "2026-01-01T00:00:02Z", 2).await;
    assert_eq!(user_messages(&store, t).await, 2);
    let seen = store.task_head(t).await.unwrap().unwrap();
    assert_eq!(seen.last_seq, 7);
    let mut head = Task { id: t.into(), context_id: "c".into(), ..Default::default() };
    head.status.state = TaskState::InputRequired;
    head.status.timestamp = Some("2026-01-01T00:00:01Z".into());
    let kept = Stored { history: 2, artifacts: 1 };
    // Something appended since the head was read: the cut is not made.
    let stale = TaskHead { last_seq: 6, ..seen.clone() };
    assert!(!store.cut_back(t, &stale, 4, kept, &head).await.unwrap());
    assert!(store.cut_back(t, &seen, 4, kept, &head).await.unwrap());
    assert_eq!(texts(&store, t).await, vec!["one", "echo: one"]);
    let row = store.task(t, None).await.unwrap().unwrap();
    assert_eq!((row.last_seq, row.state, row.task.artifacts.len()), (4, TaskState::InputRequired, 1));
    assert_eq!(store.events_after(t, 0, 100).await.unwrap().len(), 4);
    // The same head again: the count of cuts moved on, so a second cut is refused.
    assert!(!store.cut_back(t, &seen, 4, kept, &head).await.unwrap());
    // The next turn appends after the cut, gap-free.
    let next = turn(&store, t, 2, "two", "2026-01-01T00:00:03Z", 2).await;
    assert_eq!(next.iter().map(|a| a.seq).collect::<Vec<_>>(), vec![5, 6, 7]);
}

/// Issue 31: an answer's window read on the tail kept from the answer before (tails.rs) is
/// what a whole read of the history gives: as turns are added, with a wider window than the
/// tail holds, and after a cut whose place was taken by other messages at the same indexes.
async fn answers_on_tails(store: Store) {
    let t = "t";
    let mut open = new(t, "wf-1", status(t, TaskState::Submitted));
    open.snapshot = Some(Task { id: t.into(), context_id: "c".into(), ..Default::default() });
    store.append(&open).await.unwrap();
    let answer = |window: i32| {
        let store = store.clone();
        async move {
            let row = store.task_with(t, Some(window), crate::Artifacts::Newest(2)).await.unwrap().unwrap();
            row.task.history.iter().map(|m| m.text()).collect::<Vec<_>>()
        }
    };
    let newest = |all: Vec<String>, n: usize| all[all.len().saturating_sub(n)..].to_vec();
    assert!(answer(3).await.is_empty());
    for n in 1..=4 {
        turn(&store, t, n, &format!("say {n}"), "2026-01-01T00:00:01Z", 2 * i64::from(n) - 2).await;
        assert_eq!(answer(3).await, newest(texts(&store, t).await, 3), "after turn {n}");
    }
    assert_eq!(answer(3).await, ["echo: say 3", "say 4", "echo: say 4"], "nothing added: the same answer");
    // Answers share the tail's messages and artifacts instead of copying them.
    let shared = || {
        let store = store.clone();
        async move { store.task_with(t, Some(3), crate::Artifacts::Newest(2)).await.unwrap().unwrap().task }
    };
    let (one, two) = (shared().await, shared().await);
    assert_eq!((one.history.len(), one.artifacts.len()), (3, 2));
    assert!(one.history.iter().zip(&two.history).all(|(a, b)| a2a_types::Shared::ptr_eq(a, b)), "history copied");
    assert!(one.artifacts.iter().zip(&two.artifacts).all(|(a, b)| a2a_types::Shared::ptr_eq(a, b)), "artifacts copied");
    assert_eq!(answer(5).await, newest(texts(&store, t).await, 5), "a wider window than the tail holds");
    assert_eq!(answer(50).await.len(), 8, "a window wider than the history: all of it");
    assert_eq!(answer(2).await, ["say 4", "echo: say 4"]);

    // Turn 4 is cut off (its workflow task never committed) and another message takes its
    // place: the same history indexes, other messages.
    let seen = store.task_head(t).await.unwrap().unwrap();
    let mut head = Task { id: t.into(), context_id: "c".into(), ..Default::default() };
    head.status.state = TaskState::InputRequired;
    // The tail kept (from the answer of 2 above) holds the cut messages' indexes, and
    // nothing is read between the cut and the new turn.
    assert!(store.cut_back(t, &seen, 11, Stored { history: 6, artifacts: 3 }, &head).await.unwrap());
    turn(&store, t, 4, "other", "2026-01-01T00:00:02Z", 6).await;
    assert_eq!(answer(2).await, ["other", "echo: other"], "not the cut messages the tail held");
    assert_eq!(answer(3).await, ["echo: say 3", "other", "echo: other"]);
    // A cut with nothing after it yet: the answer ends where the cut left the history.
    let seen = store.task_head(t).await.unwrap().unwrap();
    assert!(store.cut_back(t, &seen, seen.last_seq - 2, Stored { history: 6, artifacts: 3 }, &head).await.unwrap());
    assert_eq!(answer(3).await, ["echo: say 2", "say 3", "echo: say 3"]);
}

/// Issue 31: a blocking SendMessage reads the log from its receipt and the answer's row in
/// one statement (`log_and_task`). What it reads is what the log's read (`events_after`)
/// and the row's (`task_with`) give apart: on a task with no tail kept, on the tail the last
/// answer kept, after a cut, from the log's start, with nothing after the cursor, and for a
/// task that has no row.
async fn log_with_answer(store: Store) {
    let t = "t";
    let both = |after: i64| {
        let store = store.clone();
        async move {
            let answer = store.log_and_task(t, Some(after), Some(3), crate::Artifacts::Newest(2)).await.unwrap();
            let events: Vec<(i64, StreamResponse)> = answer.0.into_iter().map(|e| (e.seq, e.event)).collect();
            (events, answer.1)
        }
    };
    let apart = |after: i64| {
        let store = store.clone();
        async move {
            let events = store.events_after(t, after, crate::LOG_PAGE).await.unwrap();
            let row = store.task_with(t, Some(3), crate::Artifacts::Newest(2)).await.unwrap();
            (events.into_iter().map(|e| (e.seq, e.event)).collect::<Vec<_>>(), row)
        }
    };
    assert_eq!(both(0).await, (Vec::new(), None), "no task, no row");
    let mut open = new(t, "wf-1", status(t, TaskState::Submitted));
    open.snapshot = Some(Task { id: t.into(), context_id: "c".into(), ..Default::default() });
    store.append(&open).await.unwrap();
    for n in 1..=4 {
        let cursor = store.task_head(t).await.unwrap().unwrap().last_seq;
        turn(&store, t, n, &format!("say {n}"), "2026-01-01T00:00:01Z", 2 * i64::from(n) - 2).await;
        if n == 1 {
            store.tails.forget(t);
        }
        let read = both(cursor).await;
        assert_eq!(read.0.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [cursor + 1, cursor + 2, cursor + 3]);
        assert_eq!(read, apart(cursor).await, "turn {n}");
        let row = read.1.unwrap();
        assert_eq!(row.task.history.last().unwrap().text(), format!("echo: say {n}"), "the answer has its reply");
        assert_eq!(row.state, TaskState::InputRequired);
    }
    let last = store.task_head(t).await.unwrap().unwrap().last_seq;
    assert_eq!(both(0).await, apart(0).await, "from the log's start");
    assert_eq!(both(0).await.0.len() as i64, last);
    let (none, row) = both(last).await;
    assert!(none.is_empty() && row.is_some(), "nothing after the cursor, and the row");
    // Turn 4 is cut off and another takes its place: the answer read on the tail is the
    // stored one.
    let seen = store.task_head(t).await.unwrap().unwrap();
    let mut head = Task { id: t.into(), context_id: "c".into(), ..Default::default() };
    head.status.state = TaskState::InputRequired;
    assert!(store.cut_back(t, &seen, 11, Stored { history: 6, artifacts: 3 }, &head).await.unwrap());
    turn(&store, t, 4, "other", "2026-01-01T00:00:02Z", 6).await;
    let read = both(10).await;
    assert_eq!(read, apart(10).await, "after a cut");
    // A stream's first read: the events with the log's epoch, the count of its cuts.
    let (events, epoch) = store.events_after_in_epoch(t, 10, crate::LOG_PAGE).await.unwrap();
    assert_eq!(events, store.events_after(t, 10, crate::LOG_PAGE).await.unwrap());
    assert_eq!((events.len(), epoch), (3, store.task_head(t).await.unwrap().unwrap().rewrites));
    assert!(epoch > 0, "the log was cut");
    assert_eq!(store.events_after_in_epoch("none", 0, crate::LOG_PAGE).await.unwrap(), (Vec::new(), 0));
    let texts = read.1.unwrap().task.history.iter().map(|m| m.text()).collect::<Vec<_>>();
    assert_eq!(texts, ["echo: say 3", "other", "echo: other"]);

    // Read as the audit row of the accepted message takes its outcome (one statement on
    // Postgres): the same log and row, and the row's outcome and receipt's cursor written.
    let sent = Message { role: a2a_types::Role::User, ..Message::agent_text("u5", "five") };
    store.record_inbox("r5", t, &sent, crate::InboxOutcome::Received, "").await.unwrap();
    let cursor = store.task_head(t).await.unwrap().unwrap().last_seq;
    turn(&store, t, 5, "five", "2026-01-01T00:00:03Z", 8).await;
    let read = store.accepted_then_log_and_task("r5", t, cursor, Some(3), crate::Artifacts::Newest(2)).await.unwrap();
    let read = (read.0.into_iter().map(|e| (e.seq, e.event)).collect::<Vec<_>>(), read.1);
    assert_eq!(read, apart(cursor).await, "read with the outcome");
    let prior = store.prior_message(t, "u5").await.unwrap().unwrap();
    assert!(prior.accepted(), "{prior:?}");
    assert_eq!(prior.cursor, Some(cursor));
    // All the history asked for (no tail serves it): the whole row, and the outcome written.
    let sent = Message { role: a2a_types::Role::User, ..Message::agent_text("u6", "six") };
    store.record_inbox("r6", t, &sent, crate::InboxOutcome::Received, "").await.unwrap();
    let cursor = store.task_head(t).await.unwrap().unwrap().last_seq;
    turn(&store, t, 6, "six", "2026-01-01T00:00:04Z", 10).await;
    let read = store.accepted_then_log_and_task("r6", t, cursor, None, crate::Artifacts::All).await.unwrap();
    assert_eq!(read.0.iter().map(|e| e.seq).collect::<Vec<_>>(), [cursor + 1, cursor + 2, cursor + 3]);
    assert_eq!(read.1, store.task(t, None).await.unwrap(), "the whole row, read with the outcome");
    let texts = read.1.unwrap().task.history.iter().map(|m| m.text()).collect::<Vec<_>>();
    assert_eq!(texts.last().map(String::as_str), Some("echo: six"));
    assert_eq!(store.prior_message(t, "u6").await.unwrap().unwrap().cursor, Some(cursor));
}

/// Issue 31: an answer's newest artifacts read on the tail kept from the answer before
/// (only those written since are read, tails.rs) are what a whole read gives: as turns add
/// artifacts (one by one and in a batch), when a held artifact or an older one is written
/// again, and after a cut whose places other artifacts took.
async fn artifacts_on_tails(store: Store) {
    let t = "t";
    let mut open = new(t, "wf-1", status(t, TaskState::Submitted));
    open.snapshot = Some(Task { id: t.into(), context_id: "c".into(), ..Default::default() });
    store.append(&open).await.unwrap();
    let answer = || {
        let store = store.clone();
        async move {
            let answer = store.task_with(t, Some(3), crate::Artifacts::Newest(2)).await.unwrap().unwrap().task;
            answer.artifacts.into_iter().map(a2a_types::Shared::into_inner).collect::<Vec<_>>()
        }
    };
    let stored = || {
        let store = store.clone();
        async move {
            let all = store.task(t, Some(0)).await.unwrap().unwrap().task.artifacts;
            all[all.len().saturating_sub(2)..].iter().map(|a| Artifact::clone(a)).collect::<Vec<_>>()
        }
    };
    // An artifact event that writes `id` at `place` again, with `text`.
    let written_again = |key: &str, place: i64, id: &str, text: &str| {
        let mut e = new(
            t,
            key,
            StreamResponse::ArtifactUpdate(a2a_types::TaskArtifactUpdateEvent {
                task_id: t.into(),
                context_id: "c".into(),
                artifact: artifact(id, text),
                ..Default::default()
            }),
        );
        e.artifacts = vec![(place, artifact(id, text))];
        e.stored_before = Some(Stored::default());
        e
    };
    assert!(answer().await.is_empty());
    for n in 1..=3 {
        turn(&store, t, n, &format!("say {n}"), "2026-01-01T00:00:01Z", 2 * i64::from(n) - 2).await;
        assert_eq!(answer().await, stored().await, "after turn {n}");
    }
    store.append_all(&turn_events(t, 4, "say 4", "2026-01-01T00:00:01Z", 6)).await.unwrap();
    let ids = |artifacts: Vec<Artifact>| artifacts.into_iter().map(|a| a.artifact_id).collect::<Vec<_>>();
    assert_eq!(ids(answer().await), ["reply-3", "reply-4"], "a batch's artifact");
    // A held artifact written again (a surface updated): its new content, in its place.
    store.append(&written_again("again-3", 2, "reply-3", "again")).await.unwrap();
    let answered = answer().await;
    assert_eq!(answered, stored().await);
    assert_eq!(answered[0], artifact("reply-3", "again"), "not the held one");
    // An older one written again: not among the newest two; then a batch writing one held
    // and one new.
    store.append(&written_again("again-1", 0, "reply-1", "again")).await.unwrap();
    assert_eq!(answer().await, answered);
    store
        .append_all(&[written_again("again-4", 3, "reply-4", "again"), written_again("new-5", 4, "reply-5", "new")])
        .await
        .unwrap();
    assert_eq!(answer().await, [artifact("reply-4", "again"), artifact("reply-5", "new")]);
    assert_eq!(answer().await, stored().await);

    // The newest artifacts are cut off with their events (a workflow task that never
    // committed) and others take their places: the answer has those, not the held ones.
    let seen = store.task_head(t).await.unwrap().unwrap();
    let mut head = Task { id: t.into(), context_id: "c".into(), ..Default::default() };
    head.status.state = TaskState::InputRequired;
    assert!(store.cut_back(t, &seen, seen.last_seq - 3, Stored { history: 8, artifacts: 3 }, &head).await.unwrap());
    store.append(&written_again("other-4", 3, "other-4", "other")).await.unwrap();
    assert_eq!(answer().await, [artifact("reply-3", "again"), artifact("other-4", "other")]);
    assert_eq!(answer().await, stored().await);

    // A writer that does not keep the seq (an older version's instance through an upgrade, a
    // fix by hand): what it wrote shows within a bounded number of answers.
    let fixed = serde_json::to_string(&artifact("other-4", "fixed")).unwrap();
    sqlx::query("UPDATE task_artifacts SET body = $2 WHERE task_id = $1 AND artifact_id = 'other-4'")
        .bind(t)
        .bind(fixed)
        .execute(store.reads())
        .await
        .unwrap();
    let mut answers = 0;
    while answer().await != stored().await {
        answers += 1;
        assert!(answers <= crate::tails::MOST_ARTIFACT_READS, "still not shown after {answers} answers");
    }
    assert_eq!(stored().await[1], artifact("other-4", "fixed"));
}

/// The senders' messages counted on the task's row (`/_monitor`'s turns, issue 15).
async fn user_messages(store: &Store, task_id: &str) -> i64 {
    let row = sqlx::query("SELECT user_messages FROM tasks WHERE task_id = $1")
        .bind(task_id)
        .fetch_one(store.reads())
        .await
        .unwrap();
    row.try_get("user_messages").unwrap()
}

/// A model's streamed chunk of reply `n`, `i`th (`last`: it ends the reply).
fn chunk(t: &str, n: u32, i: u32, text: &str, last: bool) -> NewEvent {
    new(
        t,
        &format!("turn-{n}-chunk-{i}"),
        StreamResponse::ArtifactUpdate(a2a_types::TaskArtifactUpdateEvent {
            task_id: t.into(),
            context_id: "c".into(),
            artifact: Artifact {
                artifact_id: format!("reply-{n}"),
                parts: vec![a2a_types::Part::text(text)],
                ..Default::default()
            },
            append: i > 0,
            last_chunk: last,
            metadata: None,
        }),
    )
}

/// Issue 31: a run of a task's chunks in one `append_all` (one statement on Postgres) takes
/// consecutive seqs in order after the events before it, with their bodies, as appending
/// each would; a retry of the run answers the same seqs and writes nothing; a run of which
/// some are there already writes the rest after them; a run for an ended task is refused
/// and writes nothing; the other stores' readers are told the run's newest seq.
async fn chunk_runs(store: Store) {
    let t = "t";
    store.append(&opened(t, "c", "2026-01-01T00:00:00Z", "q")).await.unwrap();
    let run = [
        new(t, "wf-2", status(t, TaskState::Working)),
        chunk(t, 1, 0, "echo:", false),
        chunk(t, 1, 1, " one", false),
        chunk(t, 1, 2, " two", false),
        new(t, "wf-3", status(t, TaskState::InputRequired)),
    ];
    let mut wake = store.notifier().subscribe(t);
    let appended = store.append_all(&run).await.unwrap();
    assert_eq!(
        appended.iter().map(|a| (a.seq, a.new)).collect::<Vec<_>>(),
        (2..=6).map(|s| (s, true)).collect::<Vec<_>>()
    );
    assert_eq!(wake.borrow_and_update().seq, 6, "readers woken at the run's newest event");
    let events = store.events_after(t, 0, 100).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=6).collect::<Vec<_>>(), "no gap");
    let bodies: Vec<StreamResponse> = events.iter().map(|e| e.event.clone()).collect();
    assert_eq!(bodies[1..], run.iter().map(|e| e.event.clone()).collect::<Vec<_>>()[..], "each as it was given");
    assert_eq!(store.task_head(t).await.unwrap().unwrap().state, TaskState::InputRequired);

    // A retry of the whole run: the first seqs, nothing written twice.
    let again = store.append_all(&run).await.unwrap();
    assert_eq!(
        again.iter().map(|a| (a.seq, a.new)).collect::<Vec<_>>(),
        (2..=6).map(|s| (s, false)).collect::<Vec<_>>()
    );
    // A run of which the first two are there: those answer their seqs, the rest follow.
    let second = [chunk(t, 2, 0, "a", false), chunk(t, 2, 1, "b", false)];
    store.append_all(&second).await.unwrap();
    let longer = [
        chunk(t, 2, 0, "a", false),
        chunk(t, 2, 1, "b", false),
        chunk(t, 2, 2, "c", false),
        chunk(t, 2, 3, "d", false),
    ];
    let mixed = store.append_all(&longer).await.unwrap();
    assert_eq!(
        mixed.iter().map(|a| (a.seq, a.new)).collect::<Vec<_>>(),
        [(7, false), (8, false), (9, true), (10, true)]
    );
    let seqs: Vec<i64> = store.events_after(t, 0, 100).await.unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=10).collect::<Vec<_>>());

    // Ended: a run of new chunks is refused and writes nothing.
    store.append(&new(t, "wf-4", status(t, TaskState::Canceled))).await.unwrap();
    let late = [chunk(t, 3, 0, "late", false), chunk(t, 3, 1, "r", false)];
    assert!(matches!(store.append_all(&late).await, Err(StoreError::Closed(TaskState::Canceled))));
    assert_eq!(store.events_after(t, 0, 100).await.unwrap().len(), 11, "nothing after the terminal event");
    // A task with no row yet: its first events go one by one, and take seqs from 1.
    let fresh = store.append_all(&[chunk("u", 1, 0, "x", false), chunk("u", 1, 1, "y", false)]).await.unwrap();
    assert_eq!(fresh.iter().map(|a| a.seq).collect::<Vec<_>>(), [1, 2]);
}

/// Issue 31: a batch of one task's events, which Postgres writes as one statement (its row's
/// fields each the last an event gave, an artifact written twice kept at its first place
/// with its last body and seq, a message carried twice written once), leaves the task, its
/// log, its rows and its push outbox as the same events appended one by one do.
async fn together_as_one_by_one(store: Store) {
    let events = |t: &str| {
        let stamped = |state, at: &str, md: Option<serde_json::Value>| {
            let mut e = status(t, state);
            if let StreamResponse::StatusUpdate(u) = &mut e {
                u.status.timestamp = Some(at.to_string());
                u.metadata = md.map(|v| serde_json::from_value(v).unwrap());
            }
            e
        };
        let surface = |n: u32, text: &str| {
            let mut e = chunk(t, 9, n, text, true);
            if let StreamResponse::ArtifactUpdate(u) = &mut e.event {
                u.artifact.artifact_id = "surface".into();
            }
            NewEvent {
                artifacts: vec![(1, artifact("surface", text))],
                stored_before: Some(Stored { history: 1, artifacts: 1 }),
                ..e
            }
        };
        let mut working = new(t, "wf-2", stamped(TaskState::Working, "2026-01-01T00:00:01Z", None));
        working.history = vec![Message { role: a2a_types::Role::User, ..Message::agent_text("u1", "hi") }];
        working.stored_before = Some(Stored::default());
        let first_surface = NewEvent { key: "wf-3".into(), ..surface(0, "first") };
        let second_surface = NewEvent { key: "wf-4".into(), ..surface(1, "second") };
        let mut parked = new(
            t,
            "wf-5",
            stamped(TaskState::InputRequired, "2026-01-01T00:00:02Z", Some(serde_json::json!({"k": "v"}))),
        );
        // The sender's message again (a task's whole history from index 0), and the reply.
        parked.history = vec![
            Message { role: a2a_types::Role::User, ..Message::agent_text("u1", "hi") },
            Message::agent_text("r1", "hello"),
        ];
        parked.artifacts = vec![(0, artifact("reply", "hello"))];
        parked.stored_before = Some(Stored { history: 1, artifacts: 2 });
        vec![working, chunk(t, 1, 0, "hel", false), first_surface, second_surface, parked]
    };
    let (one, together) = ("task-one", "task-two");
    for t in [one, together] {
        store.append(&opened(t, "c", "2026-01-01T00:00:00Z", "q")).await.unwrap();
        let config = crate::PushRow { task_id: t.into(), config_id: "c".into(), url: "u".into(), sealed: "s".into() };
        store.put_push_config(&config).await.unwrap();
    }
    let mut one_by_one = Vec::new();
    for e in events(one) {
        one_by_one.push(store.append(&e).await.unwrap());
    }
    let appended = store.append_all(&events(together)).await.unwrap();
    assert_eq!(appended, one_by_one);
    assert_eq!(appended.iter().map(|a| a.pushes).collect::<Vec<_>>(), [true, false, true, true, true]);

    // Every column but the write's time, each task's id read as the other's.
    let rows = |sql: &'static str, t: &'static str| {
        let store = store.clone();
        async move {
            let rows = sqlx::query(sql).bind(t).fetch_all(store.reads()).await.unwrap();
            let mut out = Vec::new();
            for row in rows {
                let mut cells = Vec::new();
                for i in 0..row.len() {
                    let cell = match row.try_get::<String, _>(i) {
                        Ok(text) => text.replace(t, "T"),
                        Err(_) => row.try_get::<i64, _>(i).unwrap().to_string(),
                    };
                    cells.push(cell);
                }
                out.push(cells);
            }
            out
        }
    };
    for sql in [
        "SELECT state, status, status_ts, snapshot, context_id, status_md, user_messages, last_seq FROM tasks \
         WHERE task_id = $1",
        "SELECT seq, event_key, body FROM events WHERE task_id = $1 ORDER BY seq",
        "SELECT idx, message FROM task_history WHERE task_id = $1 ORDER BY idx",
        "SELECT idx, artifact_id, body, seq FROM task_artifacts WHERE task_id = $1 ORDER BY idx",
        "SELECT config_id, seq FROM push_outbox WHERE task_id = $1 ORDER BY seq",
    ] {
        let (a, b) = (rows(sql, one).await, rows(sql, together).await);
        assert!(!a.is_empty(), "{sql}");
        assert_eq!(a, b, "{sql}");
    }
    let task = store.task(together, None).await.unwrap().unwrap().task;
    assert_eq!(task.status.state, TaskState::InputRequired);
    assert_eq!(ids(&task.history), ["u1", "r1"]);
    let artifacts: Vec<_> = task.artifacts.iter().map(|a| (a.artifact_id.as_str(), a.parts.clone())).collect();
    assert_eq!(artifacts, [("reply", artifact("reply", "hello").parts), ("surface", artifact("s", "second").parts)]);
    assert_eq!(user_messages(&store, together).await, 1);
}
