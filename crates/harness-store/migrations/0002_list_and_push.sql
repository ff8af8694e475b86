-- ListTasks (S13) and push configs (S14).
-- `status` holds the latest TaskStatus JSON of every status event, so a listed task shows its
-- current status even between the snapshots, which are written at open and at final states.
ALTER TABLE tasks ADD COLUMN status TEXT NOT NULL DEFAULT '';

CREATE INDEX tasks_by_queue_ts ON tasks (task_queue, status_ts, task_id);

-- `sealed` is the token and authentication, encrypted by harness-push (AES-GCM); the store
-- never sees them in the clear.
CREATE TABLE push_configs (
    task_id    TEXT NOT NULL,
    config_id  TEXT NOT NULL,
    url        TEXT NOT NULL,
    sealed     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (task_id, config_id)
);
