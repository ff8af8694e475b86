-- Push deliveries not yet done (S14): one row per pushed event (the Task and every status
-- event) and config of its task, written in the append's transaction, deleted once posted
-- or given up. `claimed_until` (epoch ms) is the lease of the process delivering it; a
-- process takes over rows whose lease ran out (an SQLite store's only process takes them
-- all when it starts), so a delivery outlives the process that appended its event.
CREATE TABLE push_outbox (
    task_id       TEXT NOT NULL,
    config_id     TEXT NOT NULL,
    seq           BIGINT NOT NULL,
    claim         TEXT NOT NULL,
    claimed_until BIGINT NOT NULL,
    PRIMARY KEY (task_id, config_id, seq)
);
