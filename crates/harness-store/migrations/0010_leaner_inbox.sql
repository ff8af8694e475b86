-- Issue 31: an audit row touches fewer indexes. `inbox_by_task` is a prefix of
-- `inbox_by_task_message` (and of `inbox_by_task_cursor`), which serve every read by task;
-- `inbox_opens` keeps only the rows that claim a messageId (an identified sender's first
-- message), not a NULL entry for every other message.
DROP INDEX inbox_by_task;
DROP INDEX inbox_opens;
CREATE UNIQUE INDEX inbox_opens ON inbox (opens) WHERE opens IS NOT NULL;
