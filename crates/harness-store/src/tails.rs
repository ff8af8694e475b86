//! The newest messages of the tasks answered lately, so that the next answer reads only the
//! messages added since (issue 31: re-reading and parsing an answer's 50 messages was two
//! thirds of SendMessage's own CPU, docs/performance.md "An answer's history from memory").
//!
//! Why a tail stays true: a history row, once written, is never changed (a message is
//! inserted once, `ON CONFLICT DO NOTHING`); the one thing that removes rows is a cut of
//! the log (append.rs, `rewind`), and a cut counts one more in the task's `rewrites` in
//! the same transaction. So the rows up to a tail's last index are the same in every later
//! snapshot whose `rewrites` is the tail's. That holds across processes too (Postgres, many
//! instances): the check is the database's column, read in the same statement as the rows
//! added since.
//!
//! A tail also holds the task's newest artifacts by their place (an answer's other half). An
//! artifact can be written again (a surface updated, a sub-task's result), so what is read
//! after is by the seq of the event that last wrote each row, not by place: every artifact
//! row written after the tail's `seq` (the task's `last_seq` in the tail's snapshot) has a
//! greater one, and a cut, which can write a seq again, counts in `rewrites`. A writer that
//! does not keep the seq (an instance of an older version still running through an upgrade,
//! a fix made by hand in SQL) would go unseen, so a tail's artifacts are read whole again
//! after [`MOST_ARTIFACT_READS`] answers: what such a writer wrote shows by then.

use a2a_types::{Artifact, Message, Shared};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The most messages one tail holds: an answer asking for more reads them all.
pub(crate) const MOST_MESSAGES: i64 = 256;
/// What all tails hold at most, counted as the messages' JSON as read (with each one's place):
/// the oldest-placed are let go.
/// (A held message is parsed, and keeps its JSON once an answer wrote it (`Shared`): what the
/// tails take in memory is a few times this count.)
const MOST_BYTES: usize = 8 << 20;
/// How many tasks' tails are kept at most.
const MOST_TASKS: usize = 1024;
/// How many answers read only the artifacts written since a whole read: the next reads them
/// all again.
pub(crate) const MOST_ARTIFACT_READS: u32 = 32;

/// A task's newest messages as one snapshot of the store had them.
#[derive(Debug)]
pub(crate) struct Tail {
    /// The task's `rewrites` in that snapshot.
    pub rewrites: i64,
    /// The history index of `messages[0]`; the rest follow without a gap.
    pub first: i64,
    /// Shared with the tails that follow this one: a message is parsed once.
    pub messages: Vec<Shared<Message>>,
    /// The messages' JSON, in bytes (what the budget counts).
    pub bytes: usize,
    /// The newest artifacts in the same snapshot, when an answer asked for them.
    pub artifacts: Option<PlacedArtifacts>,
}

/// A task's newest artifacts by place, as one snapshot of the store had them.
#[derive(Debug)]
pub(crate) struct PlacedArtifacts {
    /// The task's `last_seq` in that snapshot: an artifact written since has a greater seq.
    pub seq: i64,
    /// How many of the newest are held at most (all there are when fewer).
    pub limit: i64,
    /// `(place, artifact)`, by place.
    pub artifacts: Vec<(i64, Shared<Artifact>)>,
    /// Their JSON, in bytes (what the budget counts).
    pub bytes: usize,
    /// How many answers read only what was written since the last whole read.
    pub reads: u32,
}

impl PlacedArtifacts {
    /// Whether the next answer may read only the artifacts written since these.
    pub fn fresh(&self) -> bool {
        self.reads < MOST_ARTIFACT_READS
    }

    /// These artifacts with `written` (every artifact row written after [`Self::seq`], of
    /// `written_bytes`) put in: one with an id held replaces it, a new one takes its place,
    /// and the newest `limit` by place are kept. That is the newest `limit` of the task's
    /// artifacts as the later snapshot `seq` has them: an artifact not held is older than
    /// every held one, and no row is removed without a cut.
    pub fn with(&self, written: Vec<(i64, Shared<Artifact>)>, written_bytes: usize, seq: i64) -> Self {
        let added = written.len();
        let mut artifacts = self.artifacts.clone();
        for artifact in written {
            match artifacts.iter_mut().find(|(_, held)| held.artifact_id == artifact.1.artifact_id) {
                Some(held) => *held = artifact,
                None => artifacts.push(artifact),
            }
        }
        artifacts.sort_by_key(|(place, _)| *place);
        let had = self.artifacts.len() + added;
        let over = artifacts.len().saturating_sub(usize::try_from(self.limit).unwrap_or(usize::MAX));
        artifacts.drain(..over);
        // The bytes in proportion to what is kept of what was held and written.
        let bytes = (self.bytes + written_bytes) * artifacts.len() / had.max(1);
        Self { seq, limit: self.limit, artifacts, bytes, reads: self.reads + 1 }
    }

    /// The artifacts as an answer carries them (shared, not copied).
    pub fn answer(&self) -> Vec<Shared<Artifact>> {
        self.artifacts.iter().map(|(_, a)| Shared::clone(a)).collect()
    }
}

impl Tail {
    /// What the budget counts of this tail: its messages' and artifacts' JSON, in bytes.
    fn size(&self) -> usize {
        self.bytes + self.artifacts.as_ref().map_or(0, |a| a.bytes)
    }

    /// The history index of the newest message held (`first - 1` when none is).
    pub fn last(&self) -> i64 {
        self.first + self.messages.len() as i64 - 1
    }

    /// This tail extended by `added` (the messages after [`Tail::last`], in order, beginning
    /// at `last + 1`, of `added_bytes`), and the JSON's bytes of what it holds: the newest
    /// messages, at least `n` of them (all there are when the tail begins the history) and
    /// no more than the larger of `n` and what the tail held. `None` when the two do not
    /// hold the newest `n` (the caller reads them all).
    pub fn extended(
        &self,
        added: Vec<Shared<Message>>,
        added_bytes: usize,
        n: usize,
    ) -> Option<(Vec<Shared<Message>>, usize)> {
        let held = self.messages.len();
        if held + added.len() < n && self.first != 0 {
            return None;
        }
        let keep = n.max(held);
        let (from_tail, from_added) = match keep.checked_sub(added.len()) {
            Some(rest) => (rest.min(held), added.len()),
            None => (0, keep),
        };
        // Each part's bytes in proportion to what of it is kept.
        let share = |bytes: usize, of: usize, kept: usize| bytes * kept / of.max(1);
        let carried_bytes = share(self.bytes, held, from_tail);
        let added_bytes = share(added_bytes, added.len(), from_added);
        let skip = added.len() - from_added;
        let mut kept: Vec<Shared<Message>> = self.messages[held - from_tail..].to_vec();
        kept.extend(added.into_iter().skip(skip));
        Some((kept, carried_bytes + added_bytes))
    }
}

/// The tails kept, by task id, within [`MOST_TASKS`] and [`MOST_BYTES`].
#[derive(Default)]
pub(crate) struct Tails {
    inner: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    by_task: HashMap<String, Arc<Tail>>,
    bytes: usize,
}

impl Tails {
    pub fn get(&self, task_id: &str) -> Option<Arc<Tail>> {
        self.lock().by_task.get(task_id).cloned()
    }

    /// Keeps `tail` as the task's (a larger one than a tenth of the budget is not kept;
    /// without its artifacts when those make it so).
    pub fn put(&self, task_id: &str, mut tail: Tail) {
        if tail.size() > MOST_BYTES / 10 {
            tail.artifacts = None;
        }
        if tail.size() > MOST_BYTES / 10 {
            self.forget(task_id);
            return;
        }
        let mut kept = self.lock();
        kept.bytes += tail.size();
        if let Some(old) = kept.by_task.insert(task_id.to_string(), Arc::new(tail)) {
            kept.bytes -= old.size();
        }
        while kept.bytes > MOST_BYTES || kept.by_task.len() > MOST_TASKS {
            let Some(other) = kept.by_task.keys().find(|k| *k != task_id).cloned() else { break };
            if let Some(gone) = kept.by_task.remove(&other) {
                kept.bytes -= gone.size();
            }
        }
    }

    pub fn forget(&self, task_id: &str) {
        let mut kept = self.lock();
        if let Some(gone) = kept.by_task.remove(task_id) {
            kept.bytes -= gone.size();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::artifact;

    fn held(from: i64, to: i64) -> Vec<Shared<Message>> {
        (from..=to).map(|i| Shared::new(Message::agent_text(format!("m{i}"), "x"))).collect()
    }

    fn ids(newest: Option<(Vec<Shared<Message>>, usize)>) -> Vec<String> {
        newest.expect("held").0.iter().map(|m| m.message_id.clone()).collect()
    }

    #[test]
    fn a_tail_extended_holds_the_newest_messages_and_no_fewer_than_before() {
        let tail = Tail { rewrites: 0, first: 5, messages: held(5, 9), bytes: 50, artifacts: None };
        assert_eq!(tail.last(), 9);
        // Two added, four wanted: the tail's five are kept, the oldest two let go.
        let extended = tail.extended(held(10, 11), 7, 4);
        assert_eq!(extended.as_ref().unwrap().1, 30 + 7);
        assert_eq!(ids(extended), ["m7", "m8", "m9", "m10", "m11"]);
        // More added than the tail held and wanted: the newest of them.
        assert_eq!(ids(tail.extended(held(10, 17), 8, 3)), ["m13", "m14", "m15", "m16", "m17"]);
        // Nothing added, fewer wanted: the tail as it is.
        assert_eq!(ids(tail.extended(vec![], 0, 2)), ["m5", "m6", "m7", "m8", "m9"]);
        // More wanted than the tail and what was added hold (the tail does not begin the
        // history): read them all.
        assert!(tail.extended(held(10, 10), 1, 7).is_none());
        // Enough with what was added.
        assert_eq!(ids(tail.extended(held(10, 11), 2, 7)), held_ids(5, 11));
        // A tail that begins the history holds all there is.
        let whole = Tail { rewrites: 0, first: 0, messages: held(0, 1), bytes: 10, artifacts: None };
        assert_eq!(ids(whole.extended(held(2, 2), 5, 50)), ["m0", "m1", "m2"]);
        let empty = Tail { rewrites: 0, first: 0, messages: vec![], bytes: 0, artifacts: None };
        assert_eq!(empty.last(), -1);
        assert_eq!(ids(empty.extended(held(0, 0), 5, 50)), ["m0"]);
    }

    fn placed(held: &PlacedArtifacts) -> Vec<(i64, String, String)> {
        held.artifacts
            .iter()
            .map(|(p, a)| (*p, a.artifact_id.clone(), a.parts[0].text.clone().unwrap_or_default()))
            .collect()
    }

    #[test]
    fn artifacts_written_after_a_tail_replace_theirs_or_take_the_newest_places() {
        let held =
            |from: i64, to: i64| (from..=to).map(|i| (i, Shared::new(artifact(&format!("a{i}"), "old")))).collect();
        let tail = PlacedArtifacts { seq: 9, limit: 3, artifacts: held(4, 6), bytes: 30, reads: 0 };
        // One held written again, one new: the new takes the newest place, the oldest goes.
        let next = tail.with(vec![(7, artifact("a7", "new").into()), (5, artifact("a5", "again").into())], 20, 12);
        let want =
            |v: &[(i64, &str, &str)]| v.iter().map(|(p, a, t)| (*p, a.to_string(), t.to_string())).collect::<Vec<_>>();
        assert_eq!(placed(&next), want(&[(5, "a5", "again"), (6, "a6", "old"), (7, "a7", "new")]));
        assert_eq!((next.seq, next.limit, next.bytes, next.reads), (12, 3, 30, 1));
        assert_eq!(next.answer().len(), 3);
        // One older than every held one written again: not among the newest three.
        let next = next.with(vec![(1, artifact("a1", "again").into())], 10, 13);
        assert_eq!(placed(&next), want(&[(5, "a5", "again"), (6, "a6", "old"), (7, "a7", "new")]));
        // Fewer than the limit held: they are all there is, and grow to it.
        let few = PlacedArtifacts { seq: 2, limit: 3, artifacts: held(0, 0), bytes: 10, reads: 0 };
        assert_eq!(
            placed(&few.with(vec![(1, artifact("a1", "new").into())], 10, 3)),
            want(&[(0, "a0", "old"), (1, "a1", "new")])
        );
        assert!(placed(&few.with(vec![], 0, 3)).len() == 1, "nothing written: the same artifacts");
    }

    fn held_ids(from: i64, to: i64) -> Vec<String> {
        (from..=to).map(|i| format!("m{i}")).collect()
    }

    #[test]
    fn the_tails_stay_within_their_budget() {
        let tails = Tails::default();
        for i in 0..(MOST_TASKS + 10) {
            tails.put(&format!("t{i}"), Tail { rewrites: 0, first: 0, messages: vec![], bytes: 1, artifacts: None });
        }
        assert_eq!(tails.lock().by_task.len(), MOST_TASKS);
        assert!(tails.get(&format!("t{}", MOST_TASKS + 9)).is_some(), "the newest put is kept");
        // Bytes: a few large tails push the others out; one over a tenth is not kept.
        for i in 0..12 {
            tails.put(
                &format!("big{i}"),
                Tail { rewrites: 0, first: 0, messages: vec![], bytes: MOST_BYTES / 11, artifacts: None },
            );
        }
        assert!(tails.lock().bytes <= MOST_BYTES);
        tails.put("huge", Tail { rewrites: 0, first: 0, messages: vec![], bytes: MOST_BYTES / 9, artifacts: None });
        assert!(tails.get("huge").is_none());
        let kept = tails.lock();
        assert_eq!(kept.bytes, kept.by_task.values().map(|t| t.size()).sum::<usize>());
    }
}
