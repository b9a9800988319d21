"""Drive `baton mcp` with the official Python MCP SDK's stdio client: a list of calls.

Usage: python3 mcp_calls.py BATON WORKSPACE < CALLS. CALLS is a JSON list of
{"tool": NAME, "args": {...}, "repeat": N (default 1), "seconds": S (optional)}; the
calls run in order on one session. Prints one JSON list: for each call (each
repetition), whether it was an error, its structured content and its text content; a
call with "seconds" that did not answer within them is {"timeout": true}, and ends the
session (the server is stopped with the client). The Rust tests (tests/cli/handoff_cli/)
run this and assert on the list.
"""
import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def result(r):
    text = "".join(c.text for c in r.content if getattr(c, "type", "") == "text")
    return {"error": bool(r.is_error), "structured": r.structured_content, "text": text}


async def main(baton, workspace, calls):
    params = StdioServerParameters(
        command=baton, args=["mcp", "--workspace", workspace], env=dict(os.environ), cwd=workspace
    )
    out = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for call in calls:
                for _ in range(call.get("repeat", 1)):
                    answer = session.call_tool(call["tool"], call["args"])
                    try:
                        out.append(result(await asyncio.wait_for(answer, call.get("seconds"))))
                    except asyncio.TimeoutError:
                        out.append({"timeout": True})
                        print(json.dumps(out))
                        return
    print(json.dumps(out))


asyncio.run(main(sys.argv[1], sys.argv[2], json.load(sys.stdin)))
