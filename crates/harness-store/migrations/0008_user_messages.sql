-- Issue 15: how many messages a task's senders sent (the turns `/_monitor` shows), kept on
-- the task's row as history rows are written, instead of counted over the whole history at
-- every refresh.
ALTER TABLE tasks ADD COLUMN user_messages BIGINT NOT NULL DEFAULT 0;
UPDATE tasks SET user_messages = (
    SELECT COUNT(*) FROM task_history h
    WHERE h.task_id = tasks.task_id AND h.message LIKE '%"role":"ROLE_USER"%'
);
