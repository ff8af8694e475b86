-- Issue 31: each artifact row keeps the seq of the event that last wrote it, so an answer
-- reads only the artifacts written since the answer before it (tails.rs); rows written
-- before this migration count as written before any answer kept.
ALTER TABLE task_artifacts ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
CREATE INDEX task_artifacts_by_seq ON task_artifacts (task_id, seq);
