"""An MCP server for tests/mcp.rs (issue 29), written with the official Python SDK (`mcp`,
pinned in requirements.txt).

    python mcp_server.py                 # stdio
    python mcp_server.py http PORT       # streamable HTTP at http://127.0.0.1:PORT/mcp

Every call appends a line to the file named by MCP_MARKS (when set), so a test can see which
calls started and how often: `start <tool> <arg>` and `end <tool> <arg>`.
"""

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("notes")
READ_ONLY = ToolAnnotations(read_only_hint=True)
SHELF = {"tea": "on the top shelf", "jam": "in the cellar"}


def mark(line: str) -> None:
    path = os.environ.get("MCP_MARKS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


@server.tool(annotations=READ_ONLY)
def lookup(key: str) -> str:
    """Where a thing is kept."""
    mark(f"start lookup {key}")
    return f"{key} is {SHELF.get(key, 'nowhere')}"


@server.tool()
def note(text: str) -> str:
    """Writes a note (not idempotent: each call adds one)."""
    mark(f"start note {text}")
    return f"noted: {text}"


@server.tool(annotations=READ_ONLY)
async def slow_lookup(key: str, seconds: float) -> str:
    """Where a thing is kept, slowly."""
    mark(f"start slow_lookup {key}")
    await anyio.sleep(seconds)
    mark(f"end slow_lookup {key}")
    return f"{key} is {SHELF.get(key, 'nowhere')}"


@server.tool()
async def slow_note(text: str, seconds: float) -> str:
    """Writes a note, slowly (not idempotent)."""
    mark(f"start slow_note {text}")
    await anyio.sleep(seconds)
    mark(f"end slow_note {text}")
    return f"noted: {text}"


@server.tool()
def token() -> str:
    """The token this server was started with (its environment's MCP_TOKEN)."""
    return f"my token is {os.environ.get('MCP_TOKEN', '(none)')}"


@server.tool()
def authorization(ctx: Context) -> str:
    """The Authorization header of the request that called it."""
    headers = ctx.headers or {}
    value = next((v for k, v in headers.items() if k.lower() == "authorization"), "(none)")
    return f"called with {value}"


@server.tool(annotations=READ_ONLY)
def traceparent(ctx: Context) -> str:
    """The W3C traceparent the call carried in its `_meta` (tests/traces.rs)."""
    meta = ctx.request_context.meta or {}
    return f"traceparent {meta.get('traceparent', '(none)')}"


@server.tool()
def broken() -> str:
    """Always fails."""
    raise ToolError("the shelf collapsed")


@server.tool()
def hidden() -> str:
    """A tool the harness's config leaves out."""
    return "you should not see this"


def added() -> str:
    """A tool that exists only after `grow`."""
    return "the added tool answers"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `added` and tells the client its tool list changed."""
    server.add_tool(added, name="added")
    await ctx.session.send_tool_list_changed()
    return "grew a tool"


@server.tool()
def crash() -> str:
    """Ends this server's process at once."""
    mark("start crash")
    os._exit(3)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
