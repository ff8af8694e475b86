//! SQL the store's modules share.

use a2a_types::TaskState;
use std::sync::LazyLock;

/// The terminal states as an SQL list (`'TASK_STATE_COMPLETED', ...`), made from
/// [`TaskState::TERMINAL`], the one list of them.
pub(crate) static TERMINAL_STATES: LazyLock<String> =
    LazyLock::new(|| TaskState::TERMINAL.iter().map(|s| format!("'{}'", s.as_str())).collect::<Vec<_>>().join(", "));
