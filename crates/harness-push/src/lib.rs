//! Push delivery (S14) and push receipt (S15) will live here: decrypting a task's push
//! configs, posting each status update with `X-A2A-Notification-Token`, bounded retries with
//! backoff, and `POST /a2a/push/{task_id}` for remote tasks' pushes.
//!
//! Nothing is built yet: the durable core does not deliver pushes, and the card declares
//! `pushNotifications: false` until it does.
