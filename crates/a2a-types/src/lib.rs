//! A2A 1.0 protocol types as ProtoJSON (`../shared/a2a-spec/a2a.proto` is normative).
//!
//! Owns: the wire types a server or a client needs, the JSON-RPC envelopes and the error
//! model (codes, HTTP status, `google.rpc.ErrorInfo`). Depends on serde, chrono (timestamps)
//! and thiserror; no I/O.
//!
//! ProtoJSON rules followed here: lowerCamelCase names (snake_case accepted on input),
//! enums as their proto names (integers accepted on input), default values omitted,
//! oneof members as the discriminator, unknown fields ignored.

pub mod card;
mod enums;
pub mod error;
pub mod events;
pub mod jsonrpc;
pub mod message;
pub mod requests;
mod shared;
pub mod task;
pub mod validate;

pub use card::*;
pub use enums::{Role, TaskState};
pub use error::{A2AError, ErrorKind};
pub use events::*;
pub use message::*;
pub use requests::*;
pub use shared::Shared;
pub use task::*;

/// A `google.protobuf.Struct`: a plain JSON object.
pub type Struct = serde_json::Map<String, serde_json::Value>;

/// The current time as a ProtoJSON timestamp (RFC 3339, UTC, `Z`, milliseconds).
pub fn now_timestamp() -> String {
    format_timestamp(std::time::SystemTime::now())
}

/// Formats a time as a ProtoJSON timestamp (RFC 3339, UTC, `Z`, milliseconds).
pub fn format_timestamp(t: std::time::SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The length in bytes of `value`'s compact JSON, as `serde_json::to_vec(value)?.len()`,
/// counted as it is written instead of kept: a size check (a limit, a run's byte budget)
/// needs no copy of what it measures.
pub fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<usize> {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value)?;
    Ok(count.0)
}

pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}
