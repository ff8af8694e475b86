//! [`Shared`]: a message or artifact held by many tasks at once, written as JSON once.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

/// A value that the copies of a task share (issue 31): the answers to a long conversation's
/// messages carry mostly the same newest messages and artifacts, and a clone of this is a
/// reference count, not a copy.
///
/// The value's JSON is kept once it has been written, and written again as it is: a message
/// in fifty answers is serialized once. It is JSON that is kept: this type serializes its
/// value the same way into any serializer, but only serde_json writes the kept text as it is
/// (other formats see serde_json's raw value as a string). What is kept is what the value's
/// own `Serialize` wrote, so the output is the same as the value's, compact (a pretty printer
/// does not indent inside it). The value cannot change while shared; [`Shared::make_mut`]
/// copies it when it is, and forgets the JSON.
pub struct Shared<T>(Arc<Held<T>>);

struct Held<T> {
    value: T,
    json: OnceLock<Option<Box<RawValue>>>,
}

impl<T> Shared<T> {
    pub fn new(value: T) -> Self {
        Self(Arc::new(Held { value, json: OnceLock::new() }))
    }

    /// Whether two are the same value, not copies of it.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl<T: Clone> Shared<T> {
    /// The value, copied when another holder shares it.
    pub fn into_inner(self) -> T {
        match Arc::try_unwrap(self.0) {
            Ok(held) => held.value,
            Err(shared) => shared.value.clone(),
        }
    }

    /// The value to change: copied first when another holder shares it; its kept JSON is
    /// forgotten either way.
    pub fn make_mut(this: &mut Self) -> &mut T {
        if Arc::get_mut(&mut this.0).is_none() {
            *this = Self::new(this.0.value.clone());
        }
        let held = Arc::get_mut(&mut this.0).expect("not shared");
        held.json = OnceLock::new();
        &mut held.value
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0.value
    }
}

impl<T> AsRef<T> for Shared<T> {
    fn as_ref(&self) -> &T {
        &self.0.value
    }
}

impl<T> std::borrow::Borrow<T> for Shared<T> {
    fn borrow(&self) -> &T {
        &self.0.value
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T> From<T> for Shared<T> {
    fn from(value: T) -> Self {
        Self::new(value)
    }
}

impl<T: PartialEq> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Self::ptr_eq(self, other) || self.0.value == other.0.value
    }
}

impl<T: PartialEq> PartialEq<T> for Shared<T> {
    fn eq(&self, other: &T) -> bool {
        self.0.value == *other
    }
}

impl<T: fmt::Debug> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.value.fmt(f)
    }
}

impl<T: Default> Default for Shared<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T: Serialize> Serialize for Shared<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // A value that JSON cannot hold (a map with other keys than strings) is written
        // by its own `Serialize`, which reports the error.
        match self.0.json.get_or_init(|| serde_json::value::to_raw_value(&self.0.value).ok()) {
            Some(json) => json.serialize(serializer),
            None => self.0.value.serialize(serializer),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Shared<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Self::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, Task};

    #[test]
    fn a_shared_message_writes_the_json_its_value_writes_and_keeps_it() {
        let mut m = Message::agent_text("m1", "say \"hi\"\n");
        m.metadata = Some(crate::Struct::from_iter([("k".to_string(), serde_json::json!({"a": [1, 2]}))]));
        let shared = Shared::new(m.clone());
        let plain = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::to_string(&shared).unwrap(), plain);
        assert_eq!(serde_json::to_string(&shared.clone()).unwrap(), plain, "kept, written again");
        assert_eq!(serde_json::to_value(&shared).unwrap(), serde_json::to_value(&m).unwrap());
        let back: Shared<Message> = serde_json::from_str(&plain).unwrap();
        assert_eq!(back, m);

        // A task of shared messages reads back equal; within a pretty task, the same JSON.
        let task = Task { id: "t".into(), history: vec![shared.clone(), shared.clone()], ..Default::default() };
        let text = serde_json::to_string_pretty(&task).unwrap();
        assert_eq!(serde_json::from_str::<Task>(&text).unwrap(), task);
    }

    #[test]
    fn a_value_changed_through_make_mut_is_written_anew_and_its_sharers_keep_theirs() {
        let mut one = Shared::new(Message::agent_text("m1", "before"));
        let two = one.clone();
        let _ = serde_json::to_string(&one).unwrap();
        Shared::make_mut(&mut one).message_id = "m2".into();
        assert!(!Shared::ptr_eq(&one, &two));
        assert!(serde_json::to_string(&one).unwrap().contains("\"m2\""));
        assert!(serde_json::to_string(&two).unwrap().contains("\"m1\""));
        // Not shared: changed in place, and its kept JSON forgotten.
        let mut only = Shared::new(Message::agent_text("m3", "x"));
        let _ = serde_json::to_string(&only).unwrap();
        Shared::make_mut(&mut only).message_id = "m4".into();
        assert!(serde_json::to_string(&only).unwrap().contains("\"m4\""));
        assert_eq!(only.clone().into_inner().message_id, "m4");
    }
}
