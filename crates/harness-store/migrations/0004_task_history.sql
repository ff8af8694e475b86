-- Each task's history and artifacts, one row per message and per artifact (docs/event-log.md):
-- an event writes only what changed since the one before, so a turn costs the same in a
-- long conversation as in a short one, and the snapshot in `tasks` keeps only the rest
-- (id, context, status, metadata).
CREATE TABLE task_history (
    task_id TEXT NOT NULL,
    idx     BIGINT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (task_id, idx)
);

CREATE TABLE task_artifacts (
    task_id     TEXT NOT NULL,
    artifact_id TEXT NOT NULL,
    idx         BIGINT NOT NULL,
    body        TEXT NOT NULL,
    PRIMARY KEY (task_id, artifact_id)
);

-- Work the store does once, in Rust, after the migrations: 'split-snapshots' moves the
-- history and artifacts of snapshots written before this migration into the tables above.
CREATE TABLE store_chores (
    chore TEXT PRIMARY KEY
);
INSERT INTO store_chores (chore) VALUES ('split-snapshots');
