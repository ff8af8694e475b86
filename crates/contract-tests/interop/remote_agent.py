"""A small A2A 1.0 agent on the official Python SDK (a2a-sdk), as a remote agent for
delegation tests (issue 19): the harness's stand-in is checked against an A2A server this
project did not write.

It answers every task after about two seconds: WORKING, an artifact, COMPLETED with the
answer as the status message. Usage: python remote_agent.py --port P [--no-push] [--rest] [--no-stream]
(`--rest`: its card offers HTTP+JSON only, instead of JSON-RPC only).
"""

import argparse
import asyncio

import httpx
import uvicorn
from starlette.applications import Starlette

from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import BasePushNotificationSender, InMemoryPushNotificationConfigStore, InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill

WORK_SECONDS = 2.0


class SlowAgent(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        await asyncio.sleep(WORK_SECONDS)
        answer = f"python agent did: {context.get_user_input()}"
        await updater.add_artifact([new_text_part(answer)], name="answer")
        await updater.complete(updater.new_agent_message([new_text_part(answer)]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--no-push", action="store_true")
    parser.add_argument("--rest", action="store_true")
    parser.add_argument("--no-stream", action="store_true")
    args = parser.parse_args()
    push = not args.no_push
    base = f"http://127.0.0.1:{args.port}"
    card = AgentCard(
        name="python-remote",
        description="An a2a-sdk agent that answers after two seconds",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"{base}/a2a/rest", protocol_binding="HTTP+JSON", protocol_version="1.0")
            if args.rest
            else AgentInterface(url=f"{base}/a2a/jsonrpc", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=not args.no_stream, push_notifications=push),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="work", name="work", description="does what it is asked", tags=["test"])],
    )
    config_store = InMemoryPushNotificationConfigStore() if push else None
    sender = BasePushNotificationSender(httpx.AsyncClient(), config_store) if push else None
    handler = DefaultRequestHandler(
        agent_executor=SlowAgent(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        push_config_store=config_store,
        push_sender=sender,
    )
    if args.rest:
        routes = create_agent_card_routes(card) + create_rest_routes(handler, path_prefix="/a2a/rest")
    else:
        routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/a2a/jsonrpc")
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
