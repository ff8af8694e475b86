//! ProtoJSON properties (S1): serialize -> parse is the identity for the stream types, and
//! arbitrary bytes never panic the request parsers.

use a2a_types::jsonrpc::RpcRequest;
use a2a_types::*;
use proptest::prelude::*;
use serde_json::{Value, json};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        "[a-z ]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..3).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn metadata() -> impl Strategy<Value = Option<Struct>> {
    prop::option::of(
        prop::collection::btree_map("[a-z]{1,6}", json_value(), 0..3).prop_map(|m| m.into_iter().collect()),
    )
}

fn part() -> impl Strategy<Value = Part> {
    let content = prop_oneof![
        ".{0,20}".prop_map(|t| Part { text: Some(t), ..Default::default() }),
        "[A-Za-z0-9+/]{0,16}".prop_map(|r| Part { raw: Some(r), ..Default::default() }),
        "https://[a-z]{1,8}\\.test/[a-z]{0,8}".prop_map(|u| Part { url: Some(u), ..Default::default() }),
        json_value()
            .prop_filter("null is absent", |v| !v.is_null())
            .prop_map(|d| Part { data: Some(d), ..Default::default() }),
    ];
    (content, metadata(), "[a-z.]{0,8}", "[a-z/+]{0,12}").prop_map(|(mut p, metadata, filename, media_type)| {
        p.metadata = metadata;
        p.filename = filename;
        p.media_type = media_type;
        p
    })
}

fn role() -> impl Strategy<Value = Role> {
    prop::sample::select(Role::ALL.to_vec())
}

fn state() -> impl Strategy<Value = TaskState> {
    prop::sample::select(TaskState::ALL.to_vec())
}

fn message() -> impl Strategy<Value = Message> {
    (
        "[a-z0-9-]{1,12}",
        "[a-z0-9-]{0,8}",
        "[a-z0-9-]{0,8}",
        role(),
        prop::collection::vec(part(), 1..4),
        metadata(),
        prop::collection::vec("[a-z:/.]{1,12}", 0..2),
        prop::collection::vec("[a-z0-9]{1,6}", 0..2),
    )
        .prop_map(|(message_id, context_id, task_id, role, parts, metadata, extensions, reference_task_ids)| {
            Message { message_id, context_id, task_id, role, parts, metadata, extensions, reference_task_ids }
        })
}

fn status() -> impl Strategy<Value = TaskStatus> {
    (state(), prop::option::of(message()), prop::option::of(Just("2026-11-30T10:30:00.000Z".to_string())))
        .prop_map(|(state, message, timestamp)| TaskStatus { state, message, timestamp })
}

fn artifact() -> impl Strategy<Value = Artifact> {
    ("[a-z0-9-]{1,10}", "[a-z ]{0,8}", prop::collection::vec(part(), 1..3), metadata()).prop_map(
        |(artifact_id, name, parts, metadata)| Artifact { artifact_id, name, parts, metadata, ..Default::default() },
    )
}

fn task() -> impl Strategy<Value = Task> {
    (
        "[a-z0-9-]{1,12}",
        "[a-z0-9-]{0,12}",
        status(),
        prop::collection::vec(artifact(), 0..2),
        prop::collection::vec(message(), 0..3),
        metadata(),
    )
        .prop_map(|(id, context_id, status, artifacts, history, metadata)| Task {
            id,
            context_id,
            status,
            artifacts: artifacts.into_iter().map(a2a_types::Shared::new).collect(),
            history: history.into_iter().map(a2a_types::Shared::new).collect(),
            metadata,
        })
}

fn stream_response() -> impl Strategy<Value = StreamResponse> {
    prop_oneof![
        task().prop_map(StreamResponse::Task),
        message().prop_map(StreamResponse::Message),
        ("[a-z0-9]{1,8}", "[a-z0-9]{1,8}", status(), metadata()).prop_map(|(task_id, context_id, status, metadata)| {
            StreamResponse::StatusUpdate(TaskStatusUpdateEvent { task_id, context_id, status, metadata })
        }),
        ("[a-z0-9]{1,8}", "[a-z0-9]{1,8}", artifact(), any::<bool>(), any::<bool>(), metadata()).prop_map(
            |(task_id, context_id, artifact, append, last_chunk, metadata)| {
                StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                    task_id,
                    context_id,
                    artifact,
                    append,
                    last_chunk,
                    metadata,
                })
            }
        ),
    ]
}

fn push_config() -> impl Strategy<Value = TaskPushNotificationConfig> {
    (
        "[a-z0-9-]{0,8}",
        "[a-z0-9-]{0,8}",
        "https://[a-z]{1,8}\\.example/[a-z]{0,6}",
        "[ -~]{0,12}",
        any::<bool>(),
        "[A-Za-z]{1,8}",
        "[ -~]{0,12}",
    )
        .prop_map(|(id, task_id, url, token, auth, scheme, credentials)| TaskPushNotificationConfig {
            id,
            task_id,
            url,
            token,
            authentication: auth.then_some(AuthenticationInfo { scheme, credentials }),
            ..Default::default()
        })
}

fn send_request() -> impl Strategy<Value = SendMessageRequest> {
    (
        message(),
        prop::option::of((prop::option::of(push_config()), prop::option::of(0i32..50), any::<bool>())),
        metadata(),
    )
        .prop_map(|(m, config, metadata)| SendMessageRequest {
            message: Some(m),
            configuration: config.map(|(push, history_length, return_immediately)| SendMessageConfiguration {
                task_push_notification_config: push,
                history_length,
                return_immediately,
                ..Default::default()
            }),
            metadata,
            ..Default::default()
        })
}

fn list_request() -> impl Strategy<Value = ListTasksRequest> {
    (
        "[a-z0-9-]{0,8}",
        prop::option::of(state()),
        prop::option::of(1i32..100),
        "[A-Za-z0-9_-]{0,12}",
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(context_id, status, page_size, page_token, include_artifacts)| ListTasksRequest {
            context_id,
            status,
            page_size,
            page_token,
            include_artifacts,
            ..Default::default()
        })
}

proptest! {
    /// A message's size checks (`agent.max_message_bytes`, a run's byte budget) count its
    /// JSON without writing it: the same count as the bytes written, escapes and
    /// multi-byte characters included.
    #[test]
    fn json_len_is_the_length_of_the_written_json(m in message(), text in "\\PC{0,40}") {
        prop_assert_eq!(json_len(&m).unwrap(), serde_json::to_vec(&m).unwrap().len());
        let quoted = json!({"text": text, "tab": "a\tb\u{1}\"é"});
        prop_assert_eq!(json_len(&quoted).unwrap(), serde_json::to_vec(&quoted).unwrap().len());
    }
}

proptest! {
    #[test]
    fn requests_and_responses_round_trip(
        send in send_request(),
        list in list_request(),
        config in push_config(),
        tasks in prop::collection::vec(task(), 0..3),
    ) {
        let back: SendMessageRequest = serde_json::from_str(&serde_json::to_string(&send).unwrap()).unwrap();
        prop_assert_eq!(back, send);
        let back: ListTasksRequest = serde_json::from_str(&serde_json::to_string(&list).unwrap()).unwrap();
        prop_assert_eq!(back, list);
        let back: TaskPushNotificationConfig = serde_json::from_str(&serde_json::to_string(&config).unwrap()).unwrap();
        prop_assert_eq!(back, config);
        let response = ListTasksResponse { tasks, next_page_token: String::new(), page_size: 50, total_size: 0 };
        let text = serde_json::to_string(&response).unwrap();
        prop_assert!(text.contains("\"nextPageToken\":\"\""), "nextPageToken is always present: {}", text);
        let back: ListTasksResponse = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(back, response);
    }

    #[test]
    fn serialize_then_parse_is_the_identity(event in stream_response()) {
        let text = serde_json::to_string(&event).unwrap();
        let back: StreamResponse = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(back, event);
    }

    #[test]
    fn defaults_are_omitted_and_names_are_camel_case(m in message()) {
        let v = serde_json::to_value(&m).unwrap();
        let obj = v.as_object().unwrap();
        prop_assert!(obj.keys().all(|k| !k.contains('_')), "{:?}", obj.keys());
        prop_assert_eq!(obj.contains_key("contextId"), !m.context_id.is_empty());
        prop_assert_eq!(obj.contains_key("extensions"), !m.extensions.is_empty());
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_request_parsers(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
            if let Ok(req) = RpcRequest::from_value(v.clone()) {
                let _ = serde_json::from_value::<SendMessageRequest>(req.params.clone()).map(|r| validate::send_message(&r).is_ok());
                let _ = serde_json::from_value::<GetTaskRequest>(req.params);
            }
            let _ = serde_json::from_value::<SendMessageRequest>(v);
        }
        let _ = serde_json::from_slice::<SendMessageRequest>(&bytes);
        let _ = serde_json::from_slice::<StreamResponse>(&bytes);
        if let Ok(r) = serde_json::from_slice::<ListTasksRequest>(&bytes) {
            let _ = validate::list_tasks(&r);
        }
        if let Ok(c) = serde_json::from_slice::<TaskPushNotificationConfig>(&bytes) {
            let _ = validate::push_config(&c);
        }
    }

    #[test]
    fn arbitrary_json_requests_never_panic(v in json_value()) {
        let wrapped = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": v.clone()}});
        if let Ok(req) = RpcRequest::from_value(wrapped)
            && let Ok(r) = serde_json::from_value::<SendMessageRequest>(req.params)
        {
            let _ = validate::send_message(&r);
        }
        let _ = RpcRequest::from_value(v);
    }
}

#[test]
fn snake_case_names_and_enum_numbers_are_accepted_on_input() {
    let m: Message = serde_json::from_value(json!({
        "message_id": "m1", "context_id": "c1", "role": 1, "parts": [{"text": "hi", "media_type": "text/plain"}],
        "unknownField": true
    }))
    .unwrap();
    assert_eq!((m.message_id.as_str(), m.context_id.as_str(), m.role), ("m1", "c1", Role::User));
    assert_eq!(m.parts[0].media_type, "text/plain");
}
