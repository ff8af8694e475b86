//! Proto enums: serialized as their full proto names, parsed from names or integers.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! proto_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $num:literal => $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub enum $name {
            #[default]
            $($variant),+
        }

        impl $name {
            /// The proto name, e.g. `TASK_STATE_COMPLETED`.
            pub fn as_str(&self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }
            /// The proto number.
            pub fn number(&self) -> i32 {
                match self { $(Self::$variant => $num),+ }
            }
            /// Parses a proto name; `None` when unknown.
            pub fn from_name(s: &str) -> Option<Self> {
                match s { $($text => Some(Self::$variant),)+ _ => None }
            }
            /// Parses a proto number; `None` when unknown.
            pub fn from_number(n: i64) -> Option<Self> {
                match n { $($num => Some(Self::$variant),)+ _ => None }
            }
            /// Every value, in proto order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                Self::from_name(s)
                    .or_else(|| s.parse::<i64>().ok().and_then(Self::from_number))
                    .ok_or_else(|| format!("unknown {} value `{}`", stringify!($name), s))
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                match serde_json::Value::deserialize(d)? {
                    serde_json::Value::String(s) => s.parse().map_err(serde::de::Error::custom),
                    serde_json::Value::Number(n) => n
                        .as_i64()
                        .and_then(Self::from_number)
                        .ok_or_else(|| serde::de::Error::custom(format!("unknown {} number {}", stringify!($name), n))),
                    other => Err(serde::de::Error::custom(format!(
                        "{} must be a string or an integer, got {}", stringify!($name), other
                    ))),
                }
            }
        }
    };
}

proto_enum!(
    /// The state of a task (`TaskState`).
    TaskState {
        Unspecified = 0 => "TASK_STATE_UNSPECIFIED",
        Submitted = 1 => "TASK_STATE_SUBMITTED",
        Working = 2 => "TASK_STATE_WORKING",
        Completed = 3 => "TASK_STATE_COMPLETED",
        Failed = 4 => "TASK_STATE_FAILED",
        Canceled = 5 => "TASK_STATE_CANCELED",
        InputRequired = 6 => "TASK_STATE_INPUT_REQUIRED",
        Rejected = 7 => "TASK_STATE_REJECTED",
        AuthRequired = 8 => "TASK_STATE_AUTH_REQUIRED",
    }
);

proto_enum!(
    /// Who sent a message (`Role`).
    Role {
        Unspecified = 0 => "ROLE_UNSPECIFIED",
        User = 1 => "ROLE_USER",
        Agent = 2 => "ROLE_AGENT",
    }
);

impl TaskState {
    /// The terminal states, the one list of them (the store's SQL is made from it).
    pub const TERMINAL: [TaskState; 4] = [Self::Completed, Self::Failed, Self::Canceled, Self::Rejected];

    /// Completed, failed, canceled or rejected: nothing more happens to the task.
    pub fn is_terminal(&self) -> bool {
        Self::TERMINAL.contains(self)
    }
    /// The task waits for its client (input or auth required).
    pub fn is_interrupted(&self) -> bool {
        matches!(self, Self::InputRequired | Self::AuthRequired)
    }
    /// Terminal or interrupted: a stream of a SendMessage closes here (CHEATSHEET §4).
    pub fn is_final(&self) -> bool {
        self.is_terminal() || self.is_interrupted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_accept_names_and_numbers_and_write_names() {
        let s: TaskState = serde_json::from_str("\"TASK_STATE_COMPLETED\"").unwrap();
        assert_eq!(s, TaskState::Completed);
        let n: TaskState = serde_json::from_str("6").unwrap();
        assert_eq!(n, TaskState::InputRequired);
        assert_eq!(serde_json::to_string(&Role::Agent).unwrap(), "\"ROLE_AGENT\"");
        let err = serde_json::from_str::<TaskState>("\"TASK_STATE_RUNNING\"").unwrap_err();
        assert!(err.to_string().contains("TASK_STATE_RUNNING"), "{err}");
    }
}
