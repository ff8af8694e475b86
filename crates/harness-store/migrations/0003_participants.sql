-- Participants of each task (S13, D4): who may see and act on it, and in which role.
CREATE TABLE task_participants (
    task_id        TEXT NOT NULL,
    participant_id TEXT NOT NULL,
    role           TEXT NOT NULL,
    PRIMARY KEY (task_id, participant_id)
);
CREATE INDEX task_participants_by_participant ON task_participants (participant_id, task_id);
