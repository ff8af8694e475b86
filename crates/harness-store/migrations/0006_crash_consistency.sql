-- Crash consistency (issue 13, docs/event-log.md "What a crash can leave, and how it is undone").
--
-- `rewrites` counts how often the task's log was cut back because the workflow re-emitted an
-- event with other content (the first writer's workflow task never committed), and
-- `rewrote_from` is the seq the newest cut started at: a reader whose cursor is at or past it
-- has delivered events the workflow never committed, and ends its stream instead of going on
-- with a hole.
ALTER TABLE tasks ADD COLUMN rewrites BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN rewrote_from BIGINT NOT NULL DEFAULT 0;

-- The idempotency of `messageId` (S5): `sender` is who sent the message ('' when anonymous);
-- `opens` is set only on the audit row of a message that opened a task
-- (`<sender>\n<messageId>`), unique, so a retried first message finds the task the first
-- attempt opened, even when both attempts race; `cursor` is the receipt's cursor of an
-- accepted message, so a retry is answered with the original outcome from the store.
ALTER TABLE inbox ADD COLUMN sender TEXT NOT NULL DEFAULT '';
ALTER TABLE inbox ADD COLUMN opens TEXT;
ALTER TABLE inbox ADD COLUMN receipt_cursor BIGINT;
CREATE UNIQUE INDEX inbox_opens ON inbox (opens);
CREATE INDEX inbox_by_task_message ON inbox (task_id, message_id);
