"""Reads a streamed Messages API answer with the official Anthropic Python SDK (`anthropic`,
pinned in requirements.txt), so tests/anthropic.rs can show that the wire-format endpoint it
tests the `anthropic` provider against (`contract_tests::anthropic_mock`) streams what the
SDK reads: the SDK assembles the events into a message, or fails on what it does not take.

    python anthropic_stream.py BASE_URL KEY PROMPT

Prints the final message as JSON (content blocks, stop reason, usage).
"""

import json
import sys

import anthropic

base_url, key, prompt = sys.argv[1], sys.argv[2], sys.argv[3]
client = anthropic.Anthropic(base_url=base_url, api_key=key, max_retries=0)
tools = [
    {
        "name": "lookup",
        "description": "Where a thing is kept.",
        "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}},
    }
]
with client.messages.stream(
    model="claude-mock",
    max_tokens=256,
    messages=[{"role": "user", "content": prompt}],
    tools=tools,
) as stream:
    texts = list(stream.text_stream)
    message = stream.get_final_message()
print(json.dumps({"texts": texts, "message": message.model_dump(mode="json")}))
