//! [`Json`]: a value that crosses Temporal as its JSON, parsed in one pass (issue 31).
//!
//! The SDK's default converter reads a serde type's payload into a `serde_json::Value` first
//! and then the type from that tree: every map and string of the payload is built, walked
//! and freed once more than the type needs. For the payloads of every message (the model
//! call's turn, the event appends, the `inbox` update and its receipt) that was about a tenth
//! of the harness's instructions per message. `Json<T>` implements the SDK's wrapper traits
//! itself, which the default converter tries before serde: the payload's bytes are parsed
//! straight into `T`. What it writes is the same payload, byte for byte (`json/plain`, the
//! value's own compact JSON), so recorded histories replay either way.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use temporalio_common::data_converters::{
    PayloadConversionError, SerializationContext, TemporalDeserializable, TemporalSerializable,
};
use temporalio_common::protos::temporal::api::common::v1::Payload;
use temporalio_common::protos::{ENCODING_PAYLOAD_KEY, JSON_ENCODING_VAL};

/// `T` as an activity's or an update's argument or result: written and read as JSON by
/// `T`'s own serde, without the converter's `serde_json::Value` in between.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Json<T>(pub T);

impl<T> Json<T> {
    /// The value.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::ops::Deref for Json<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> From<T> for Json<T> {
    fn from(value: T) -> Self {
        Self(value)
    }
}

impl<T: Serialize> TemporalSerializable for Json<T> {
    fn to_payload(&self, _: &SerializationContext<'_>) -> Result<Payload, PayloadConversionError> {
        let data = serde_json::to_vec(&self.0).map_err(|e| PayloadConversionError::EncodingError(e.into()))?;
        let metadata = HashMap::from([(ENCODING_PAYLOAD_KEY.to_string(), JSON_ENCODING_VAL.as_bytes().to_vec())]);
        Ok(Payload { metadata, data, external_payloads: vec![] })
    }
}

impl<T: DeserializeOwned> TemporalDeserializable for Json<T> {
    fn from_payload(_: &SerializationContext<'_>, payload: Payload) -> Result<Self, PayloadConversionError> {
        if payload.metadata.get(ENCODING_PAYLOAD_KEY).map(Vec::as_slice) != Some(JSON_ENCODING_VAL.as_bytes()) {
            return Err(PayloadConversionError::WrongEncoding);
        }
        serde_json::from_slice(&payload.data).map(Self).map_err(|e| PayloadConversionError::EncodingError(e.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::Json;
    use temporalio_common::data_converters::{
        GenericPayloadConverter, PayloadConverter, SerializationContext, SerializationContextData,
    };

    #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Sample {
        text: String,
        escaped: String,
        n: i64,
        list: Vec<Option<u32>>,
    }

    fn sample() -> Sample {
        Sample { text: "plain".into(), escaped: "a \"quote\"\n and é".into(), n: -3, list: vec![Some(1), None] }
    }

    /// What `Json` writes is the payload the SDK's own converter writes for the bare value,
    /// and each reads the other's: recorded histories replay across the change.
    #[test]
    fn json_payloads_are_the_sdks_own_both_ways() {
        let converter = PayloadConverter::default();
        let data = SerializationContextData::None;
        let ctx = SerializationContext::new(&data, &converter);
        let ours = converter.to_payload(&ctx, &Json(sample())).unwrap();
        let theirs = converter.to_payload(&ctx, &sample()).unwrap();
        assert_eq!(ours, theirs);
        let back: Json<Sample> = converter.from_payload(&ctx, theirs).unwrap();
        assert_eq!(back.0, sample());
        let plain: Sample = converter.from_payload(&ctx, ours).unwrap();
        assert_eq!(plain, sample());
    }

    /// A payload that is not JSON, or not this type, is an error that names what was wrong.
    #[test]
    fn a_payload_of_another_shape_or_encoding_is_refused() {
        let converter = PayloadConverter::default();
        let data = SerializationContextData::None;
        let ctx = SerializationContext::new(&data, &converter);
        let other = converter.to_payload(&ctx, &Json(vec![1, 2])).unwrap();
        let err = converter.from_payload::<Json<Sample>>(&ctx, other).unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
        let mut binary = converter.to_payload(&ctx, &Json(sample())).unwrap();
        binary.metadata.insert("encoding".into(), b"binary/plain".to_vec());
        assert!(converter.from_payload::<Json<Sample>>(&ctx, binary).is_err());
    }
}
