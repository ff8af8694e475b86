-- Issue 20: the metadata of a task's newest status event, beside its status, so a read
-- answered from the store alone (GetTask, `/_monitor`, on any instance) shows what that
-- status says between snapshots (a stand-in's remote task on its mirrored WORKING status).
ALTER TABLE tasks ADD COLUMN status_md TEXT NOT NULL DEFAULT '';

-- The accepted messages of a task's newest events (Store::unstored_messages, at every such
-- read) without reading all of a long conversation's audit rows.
CREATE INDEX inbox_by_task_cursor ON inbox (task_id, receipt_cursor);
