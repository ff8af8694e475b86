-- Issue 15: an answer reads a long task's newest artifacts by their place, without sorting
-- every artifact the task ever had.
CREATE INDEX task_artifacts_by_place ON task_artifacts (task_id, idx);
