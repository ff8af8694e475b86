-- The durable event log (D1), the task snapshots it folds into, and the inbox audit (S5).
-- One schema for SQLite and Postgres (D2): TEXT and BIGINT only.

CREATE TABLE tasks (
    task_id     TEXT PRIMARY KEY,
    context_id  TEXT NOT NULL DEFAULT '',
    state       TEXT NOT NULL DEFAULT 'TASK_STATE_UNSPECIFIED',
    status_ts   TEXT NOT NULL DEFAULT '',
    task_queue  TEXT NOT NULL DEFAULT '',
    snapshot    TEXT NOT NULL DEFAULT '',
    last_seq    BIGINT NOT NULL DEFAULT 0,
    updated_at  TEXT NOT NULL DEFAULT ''
);

CREATE TABLE events (
    task_id    TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    event_key  TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (task_id, seq),
    UNIQUE (task_id, event_key)
);

CREATE TABLE inbox (
    request_id  TEXT PRIMARY KEY,
    task_id     TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    received_at TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    body        TEXT NOT NULL
);

CREATE INDEX inbox_by_task ON inbox (task_id);
