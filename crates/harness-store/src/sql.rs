//! SQL the store's modules share.

use a2a_types::TaskState;
use std::sync::LazyLock;

/// The terminal states as an SQL list (`'TASK_STATE_COMPLETED', ...`), made from
/// [`TaskState::TERMINAL`], the one list of them.
pub(crate) static TERMINAL_STATES: LazyLock<String> =
    LazyLock::new(|| TaskState::TERMINAL.iter().map(|s| format!("'{}'", s.as_str())).collect::<Vec<_>>().join(", "));

/// `state` is none of the terminal states, as a chain of comparisons. SQLite codes
/// `NOT IN` over more than two constants as a temporary b-tree, built on every run of the
/// statement (an append's row update runs for every event, issue 31); these it does not.
pub(crate) static OPEN_STATE: LazyLock<String> = LazyLock::new(|| {
    TaskState::TERMINAL.iter().map(|s| format!("state <> '{}'", s.as_str())).collect::<Vec<_>>().join(" AND ")
});
