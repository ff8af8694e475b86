"""The official Python A2A client (a2a-sdk 1.3.0) against a running tiny-harness (issue 3).

Run by `crates/contract-tests/tests/interop.rs`, which starts the harness with the
`conformance` model (tasks run one-shot), a push key and an extended card, and passes its
URL in HARNESS_URL. Every scenario runs over both bindings (JSON-RPC and HTTP+JSON).
"""

import asyncio
import base64
import http.server
import json
import os
import threading
import uuid

import pytest
from a2a.client import ClientCallContext, ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver
from a2a.types import (
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict

BASE = os.environ.get("HARNESS_URL", "http://127.0.0.1:8080")
EXT = "https://madarauchiha-314.github.io/tiny-harness/a2a/ext"
BINDINGS = ["JSONRPC", "HTTP+JSON"]
TIMEOUT = 30


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


async def client(binding, streaming=False, polling=False):
    config = ClientConfig(supported_protocol_bindings=[binding], streaming=streaming, polling=polling)
    return await ClientFactory(config).create_from_url(BASE)


def message(prefix, text="hello", task_id="", context_id=""):
    return Message(
        message_id=f"{prefix}-{uuid.uuid4()}",
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


async def send(c, msg, **config):
    """Sends a message and returns the task of the last response."""
    request = SendMessageRequest(message=msg)
    if config:
        request.configuration.CopyFrom(SendMessageConfiguration(**config))
    last = None
    async for event in c.send_message(request):
        last = event
    assert last is not None and last.HasField("task"), f"expected a task, got {last}"
    return last.task


async def events_of(stream):
    return [e async for e in stream]


def kind(event):
    return event.WhichOneof("payload")


def status_text(task):
    return "".join(p.text for p in task.status.message.parts)


@pytest.fixture(params=BINDINGS)
def binding(request):
    return request.param


# ----- card ---------------------------------------------------------------------------


def test_card_resolves_with_both_interfaces_and_the_five_extensions():
    async def go():
        import httpx

        async with httpx.AsyncClient() as http:
            card = await A2ACardResolver(http, BASE).get_agent_card()
        bindings = {i.protocol_binding: i for i in card.supported_interfaces}
        assert set(bindings) == {"JSONRPC", "HTTP+JSON"}
        for i in card.supported_interfaces:
            assert i.url.startswith(BASE) and i.protocol_version == "1.0"
        uris = [e.uri for e in card.capabilities.extensions]
        assert uris == [
            f"{EXT}/task/v1",
            f"{EXT}/channel/v1",
            f"{EXT}/status/v1",
            f"{EXT}/commands/v1",
            "https://a2ui.org/a2a-extension/a2ui/v0.9.1",
        ]
        assert all(not e.required for e in card.capabilities.extensions)
        assert card.capabilities.streaming and card.capabilities.push_notifications
        assert card.capabilities.extended_agent_card
        assert not card.security_schemes

    run(go())


def test_extended_card_adds_the_configured_skill(binding):
    async def go():
        c = await client(binding)
        card = await c.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert "internal-skill" in [s.id for s in card.skills]
        await c.close()

    run(go())


# ----- send ---------------------------------------------------------------------------


def test_blocking_send_completes_with_the_tck_status_message(binding):
    async def go():
        c = await client(binding)
        task = await send(c, message("tck-complete-task"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert status_text(task) == "Hello from TCK"
        await c.close()

    run(go())


def test_an_unknown_message_id_is_echoed_and_completed(binding):
    async def go():
        c = await client(binding)
        task = await send(c, message("plain", "ping pong"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert [p.text for a in task.artifacts for p in a.parts] == ["ping pong"]
        await c.close()

    run(go())


def test_input_required_then_a_follow_up_on_the_same_task_completes_it(binding):
    async def go():
        c = await client(binding)
        first = await send(c, message("tck-input-required"))
        assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        second = await send(c, message("more", "the answer", task_id=first.id, context_id=first.context_id))
        assert second.id == first.id
        assert second.status.state == TaskState.TASK_STATE_COMPLETED
        assert [m.role for m in second.history].count(Role.ROLE_USER) == 2
        await c.close()

    run(go())


def test_a_rejected_task_is_rejected(binding):
    async def go():
        c = await client(binding)
        task = await send(c, message("tck-reject-task"))
        assert task.status.state == TaskState.TASK_STATE_REJECTED
        await c.close()

    run(go())


@pytest.mark.parametrize("streaming", [False, True])
def test_message_response_is_a_direct_message(binding, streaming):
    """tck-message-response: a Message, not a Task; streamed, that one Message (issue 16)."""

    async def go():
        c = await client(binding, streaming=streaming)
        events = await events_of(c.send_message(SendMessageRequest(message=message("tck-message-response"))))
        assert [kind(e) for e in events] == ["message"], events
        reply = events[0].message
        assert reply.role == Role.ROLE_AGENT
        assert [p.text for p in reply.parts] == ["Direct message response"]
        # The task that stores it: completed, the reply its last message.
        task = await c.get_task(GetTaskRequest(id=reply.task_id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.history[-1].message_id == reply.message_id
        await c.close()

    run(go())


def test_the_json_rpc_url_with_a_trailing_slash_serves_the_client(binding):
    """Issue 16 item 1: a client that calls the interface URLs with a trailing slash."""

    async def go():
        import httpx

        async with httpx.AsyncClient() as http:
            card = await A2ACardResolver(http, BASE).get_agent_card()
        for i in card.supported_interfaces:
            i.url = i.url.rstrip("/") + "/"
        config = ClientConfig(supported_protocol_bindings=[binding], streaming=False)
        c = ClientFactory(config).create(card)
        task = await send(c, message("tck-complete-task"))
        assert status_text(task) == "Hello from TCK"
        again = await c.get_task(GetTaskRequest(id=task.id))
        assert again.id == task.id
        await c.close()

    run(go())


@pytest.mark.parametrize(
    "prefix,check",
    [
        ("tck-artifact-text", lambda p: p.text == "Generated text content"),
        (
            "tck-artifact-file",
            lambda p: p.raw == b"Generated file content" and p.filename == "output.txt" and p.media_type == "text/plain",
        ),
        (
            "tck-artifact-file-url",
            lambda p: p.url == "https://example.com/output.txt" and p.filename == "output.txt",
        ),
        ("tck-artifact-data", lambda p: MessageToDict(p.data) == {"key": "value", "count": 42}),
    ],
)
def test_artifacts_of_each_part_kind_arrive_intact(binding, prefix, check):
    async def go():
        c = await client(binding)
        task = await send(c, message(prefix))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        parts = [p for a in task.artifacts for p in a.parts]
        assert len(parts) == 1 and check(parts[0]), parts
        await c.close()

    run(go())


def test_return_immediately_answers_before_the_task_ends(binding):
    async def go():
        c = await client(binding, polling=True)
        task = await send(c, message("test-resubscribe-message-id"))
        assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
        await c.cancel_task(CancelTaskRequest(id=task.id))
        await c.close()

    run(go())


def test_a_message_to_a_terminal_task_is_refused_naming_the_state(binding):
    async def go():
        c = await client(binding)
        task = await send(c, message("tck-complete-task"))
        with pytest.raises(UnsupportedOperationError) as err:
            await send(c, message("again", task_id=task.id))
        assert "TASK_STATE_COMPLETED" in str(err.value)
        await c.close()

    run(go())


def test_a_message_naming_an_unknown_task_is_task_not_found(binding):
    async def go():
        c = await client(binding)
        with pytest.raises(TaskNotFoundError):
            await send(c, message("plain", task_id=str(uuid.uuid4())))
        await c.close()

    run(go())


def test_an_extension_the_card_does_not_advertise_is_refused(binding):
    async def go():
        c = await client(binding)
        ctx = ClientCallContext(service_parameters={"A2A-Extensions": "https://example.com/ext/unknown/v1"})
        with pytest.raises(UnsupportedOperationError):
            async for _ in c.send_message(SendMessageRequest(message=message("plain")), context=ctx):
                pass
        await c.close()

    run(go())


# ----- stream -------------------------------------------------------------------------


def test_a_stream_is_task_working_artifact_completed_in_order(binding):
    async def go():
        c = await client(binding, streaming=True)
        events = await events_of(c.send_message(SendMessageRequest(message=message("tck-stream-001"))))
        kinds = [kind(e) for e in events]
        assert kinds[0] == "task" and events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
        assert kinds[1] == "status_update" and events[1].status_update.status.state == TaskState.TASK_STATE_WORKING
        assert "artifact_update" in kinds
        assert kinds[-1] == "status_update"
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        await c.close()

    run(go())


def test_stream_002_goes_from_the_task_to_completed_directly(binding):
    async def go():
        c = await client(binding, streaming=True)
        events = await events_of(c.send_message(SendMessageRequest(message=message("tck-stream-002"))))
        assert [kind(e) for e in events] == ["task", "status_update"]
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        await c.close()

    run(go())


def test_a_chunked_artifact_streams_as_a_first_chunk_then_a_last_appended_one(binding):
    async def go():
        c = await client(binding, streaming=True)
        events = await events_of(
            c.send_message(SendMessageRequest(message=message("tck-stream-artifact-chunked")))
        )
        chunks = [e.artifact_update for e in events if kind(e) == "artifact_update"]
        assert [(a.artifact.parts[0].text, a.append, a.last_chunk) for a in chunks] == [
            ("chunk-1 ", False, False),
            ("chunk-2", True, True),
        ]
        assert chunks[0].artifact.artifact_id == chunks[1].artifact.artifact_id
        await c.close()

    run(go())


def test_a_streamed_input_required_ends_the_stream_there(binding):
    async def go():
        c = await client(binding, streaming=True)
        events = await events_of(c.send_message(SendMessageRequest(message=message("tck-input-required"))))
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        await c.close()

    run(go())


# ----- get ----------------------------------------------------------------------------


def test_get_task_honours_history_length(binding):
    async def go():
        c = await client(binding)
        task = await send(c, message("plain", "one"))
        full = await c.get_task(GetTaskRequest(id=task.id))
        assert full.id == task.id and full.status.state == TaskState.TASK_STATE_COMPLETED
        assert len(full.history) == 2
        one = await c.get_task(GetTaskRequest(id=task.id, history_length=1))
        assert [m.role for m in one.history] == [Role.ROLE_AGENT]
        none = await c.get_task(GetTaskRequest(id=task.id, history_length=0))
        assert len(none.history) == 0
        await c.close()

    run(go())


def test_get_of_an_unknown_task_is_task_not_found(binding):
    async def go():
        c = await client(binding)
        with pytest.raises(TaskNotFoundError):
            await c.get_task(GetTaskRequest(id=str(uuid.uuid4())))
        await c.close()

    run(go())


def test_a_negative_history_length_is_invalid_params(binding):
    async def go():
        c = await client(binding)
        task = await send(c, message("plain"))
        with pytest.raises(InvalidParamsError):
            await c.get_task(GetTaskRequest(id=task.id, history_length=-1))
        await c.close()

    run(go())


# ----- list ---------------------------------------------------------------------------


def test_list_filters_by_context_pages_newest_first_and_counts(binding):
    async def go():
        c = await client(binding)
        context = str(uuid.uuid4())
        ids = [(await send(c, message("plain", f"n{i}", context_id=context))).id for i in range(3)]
        first = await c.list_tasks(ListTasksRequest(context_id=context, page_size=2))
        assert [t.id for t in first.tasks] == [ids[2], ids[1]]
        assert first.total_size == 3 and first.page_size == 2 and first.next_page_token
        second = await c.list_tasks(ListTasksRequest(context_id=context, page_size=2, page_token=first.next_page_token))
        assert [t.id for t in second.tasks] == [ids[0]]
        assert second.next_page_token == ""
        await c.close()

    run(go())


def test_list_filters_by_status_and_leaves_artifacts_out_unless_asked(binding):
    async def go():
        c = await client(binding)
        context = str(uuid.uuid4())
        done = await send(c, message("plain", "x", context_id=context))
        rejected = await send(c, message("tck-reject-task", context_id=context))
        only = await c.list_tasks(ListTasksRequest(context_id=context, status=TaskState.TASK_STATE_REJECTED))
        assert [t.id for t in only.tasks] == [rejected.id]
        plain = await c.list_tasks(ListTasksRequest(context_id=context, status=TaskState.TASK_STATE_COMPLETED))
        assert [t.id for t in plain.tasks] == [done.id] and len(plain.tasks[0].artifacts) == 0
        full = await c.list_tasks(
            ListTasksRequest(context_id=context, status=TaskState.TASK_STATE_COMPLETED, include_artifacts=True)
        )
        assert len(full.tasks[0].artifacts) == 1
        await c.close()

    run(go())


def test_list_with_a_page_size_over_100_is_invalid_params(binding):
    async def go():
        c = await client(binding)
        with pytest.raises(InvalidParamsError):
            await c.list_tasks(ListTasksRequest(page_size=150))
        await c.close()

    run(go())


# ----- cancel and subscribe -----------------------------------------------------------


def test_cancel_of_a_working_task_ends_it_canceled(binding):
    async def go():
        c = await client(binding, polling=True)
        task = await send(c, message("test-resubscribe-message-id"))
        canceled = await c.cancel_task(CancelTaskRequest(id=task.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        again = await c.get_task(GetTaskRequest(id=task.id))
        assert again.status.state == TaskState.TASK_STATE_CANCELED
        await c.close()

    run(go())


def test_cancel_of_a_completed_task_is_not_cancelable(binding):
    async def go():
        c = await client(binding)
        task = await send(c, message("tck-complete-task"))
        with pytest.raises(TaskNotCancelableError):
            await c.cancel_task(CancelTaskRequest(id=task.id))
        await c.close()

    run(go())


def test_subscribe_replays_from_the_task_then_follows_to_completion(binding):
    async def go():
        c = await client(binding, streaming=True, polling=True)
        polling = await client(binding, polling=True)
        task = await send(polling, message("test-resubscribe-message-id"))
        events = await events_of(c.subscribe(SubscribeToTaskRequest(id=task.id)))
        assert kind(events[0]) == "task" and events[0].task.id == task.id
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        await c.close()
        await polling.close()

    run(go())


def test_subscribe_to_a_terminal_task_is_unsupported(binding):
    async def go():
        c = await client(binding, streaming=True)
        plain = await client(binding)
        task = await send(plain, message("tck-complete-task"))
        with pytest.raises(UnsupportedOperationError):
            await events_of(c.subscribe(SubscribeToTaskRequest(id=task.id)))
        await c.close()
        await plain.close()

    run(go())


# ----- push configs -------------------------------------------------------------------


def test_push_config_create_get_list_delete_round_trip_with_write_only_secrets(binding):
    async def go():
        c = await client(binding)
        task = await send(c, message("tck-input-required"))
        created = await c.create_task_push_notification_config(
            TaskPushNotificationConfig(
                task_id=task.id,
                url="https://hooks.example.com/a2a",
                token="tok-secret",
                authentication=AuthenticationInfo(scheme="Bearer", credentials="cred-secret"),
            )
        )
        assert created.id and created.task_id == task.id
        got = await c.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id=created.id)
        )
        # Issue 34: the token and credentials are write-only; the URL and scheme read back.
        assert (got.url, got.token, got.authentication.scheme, got.authentication.credentials) == (
            "https://hooks.example.com/a2a",
            "",
            "Bearer",
            "",
        )
        assert not created.token
        listed = await c.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task.id))
        assert [x.id for x in listed.configs] == [created.id]
        assert all(not x.token for x in listed.configs)
        delete = DeleteTaskPushNotificationConfigRequest(task_id=task.id, id=created.id)
        await c.delete_task_push_notification_config(delete)
        await c.delete_task_push_notification_config(delete)  # idempotent
        with pytest.raises(TaskNotFoundError):
            await c.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id=created.id)
            )
        await c.close()

    run(go())


def test_push_config_on_an_unknown_task_is_task_not_found(binding):
    async def go():
        c = await client(binding)
        with pytest.raises(TaskNotFoundError):
            await c.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=str(uuid.uuid4()), url="https://hooks.example.com/a2a")
            )
        await c.close()

    run(go())


def test_push_config_with_a_relative_url_is_invalid_params(binding):
    async def go():
        c = await client(binding)
        task = await send(c, message("tck-input-required"))
        with pytest.raises(InvalidParamsError):
            await c.create_task_push_notification_config(TaskPushNotificationConfig(task_id=task.id, url="/hook"))
        await c.close()

    run(go())


class _Receiver(http.server.BaseHTTPRequestHandler):
    received = []

    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        headers = {k.lower(): v for k, v in self.headers.items()}
        _Receiver.received.append((headers, json.loads(body)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_status_updates_are_pushed_to_a_config_given_at_send_time_with_its_token(binding):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook/{binding}"

    async def go():
        c = await client(binding)
        config = TaskPushNotificationConfig(url=url, token=f"tok-{binding}")
        # tck-stream-001 streams WORKING before COMPLETED (tck-complete-task goes straight on).
        task = await send(c, message("tck-stream-001"), task_push_notification_config=config)
        for _ in range(100):
            mine = [b for h, b in _Receiver.received if "statusUpdate" in b and b["statusUpdate"]["taskId"] == task.id]
            if any(b["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED" for b in mine):
                break
            await asyncio.sleep(0.1)
        mine = [(h, b) for h, b in _Receiver.received if json.dumps(b).find(task.id) >= 0]
        states = [b["statusUpdate"]["status"]["state"] for h, b in mine if "statusUpdate" in b]
        assert states == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"], states
        assert mine[0][1]["task"]["id"] == task.id, "the Task is pushed first"
        assert all(h.get("x-a2a-notification-token") == f"tok-{binding}" for h, b in mine)
        await c.close()

    try:
        run(go())
    finally:
        server.shutdown()


EVENT = "application/vnd.tiny-harness.event+json"
NS = "io.github.madarauchiha-314.tiny-harness"


def envelope(data):
    part = Part(media_type=EVENT)
    part.data.struct_value.update(data)
    return part


def from_participant(msg, who):
    msg.metadata.update({"participant_id": who})
    return msg


def test_a_brief_a_command_and_a_control_travel_as_data_parts_and_metadata(binding):
    """Issue 18: the official client's ordinary API (data parts, metadata) drives a brief
    (S21), a slash command (S9) and the control envelope (S8)."""

    async def go():
        c = await client(binding)
        brief = envelope({"kind": "task", "payload": {"name": "py brief", "goal": "ask and wait"}})
        opening = message("tck-input-required")
        opening.parts.insert(0, brief)
        task = await send(c, from_participant(opening, "py-alice"))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        data = MessageToDict(task.metadata)[f"{NS}/task"]
        assert (data["name"], data["goal"]) == ("py brief", "ask and wait")
        assert {"id": "py-alice", "kind": "human", "role": "reporter"} in data["participants"]
        assert [p.text for p in task.history[0].parts] == ["hello"], "the brief left the message"

        status = await send(c, from_participant(message("cmd", "/status", task.id, task.context_id), "py-alice"))
        assert status.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, "the unchanged state"
        assert "state: TASK_STATE_INPUT_REQUIRED" in status_text(status)
        assert "py-alice (reporter)" in status_text(status)

        control = Message(
            message_id=f"ctl-{uuid.uuid4()}",
            role=Role.ROLE_USER,
            parts=[envelope({"kind": "control", "action": "complete"})],
            task_id=task.id,
            context_id=task.context_id,
        )
        anonymous = Message()
        anonymous.CopyFrom(control)
        anonymous.message_id = f"anon-{uuid.uuid4()}"
        with pytest.raises(InvalidParamsError):
            await send(c, anonymous)
        done = await send(c, from_participant(control, "py-alice"))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        await c.close()

    run(go())


def test_raw_bytes_in_a_user_message_are_accepted(binding):
    async def go():
        c = await client(binding)
        msg = Message(
            message_id=f"plain-{uuid.uuid4()}",
            role=Role.ROLE_USER,
            parts=[Part(raw=b"\x00\x01binary", filename="b.bin", media_type="application/octet-stream")],
        )
        task = await send(c, msg)
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.history[0].parts[0].raw == b"\x00\x01binary"
        await c.close()

    run(go())


def test_base64_of_file_artifact_is_standard_base64_on_the_wire():
    """The raw bytes of an artifact travel as ProtoJSON bytes (standard base64)."""

    async def go():
        import httpx

        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": f"tck-artifact-file-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"text": "f"}]}
            },
        }
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{BASE}/a2a/jsonrpc", json=body, headers={"A2A-Version": "1.0"})
        raw = r.json()["result"]["task"]["artifacts"][0]["parts"][0]["raw"]
        assert base64.b64decode(raw) == b"Generated file content"

    run(go())
