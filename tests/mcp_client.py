"""Drive `baton mcp` with the official Python MCP SDK's stdio client.

Usage: python3 mcp_client.py BATON WORKSPACE. Prints one JSON document: the tools listed
and, for each call, whether it was an error and its structured content (and text).
The Rust test (tests/handoff_cli.rs) runs this and asserts on the document.
"""
import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

BRIEF = """# Handoff

## Objective
Make the parser's golden test pass.

## Current State
The golden file predates the indentation change.

## Next Steps
1. Regenerate tests/golden/parser.txt.

## Risks / Watch Out
- The golden file seeds the fuzz corpus.
"""


def result(r):
    text = "".join(c.text for c in r.content if getattr(c, "type", "") == "text")
    return {"error": bool(r.is_error), "structured": r.structured_content, "text": text}


async def main(baton, workspace):
    params = StdioServerParameters(
        command=baton, args=["mcp", "--workspace", workspace], env=dict(os.environ), cwd=workspace
    )
    out = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out["server"] = init.server_info.name
            tools = await session.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)
            out["save"] = result(await session.call_tool(
                "save_handoff",
                {"brief": BRIEF, "from": "claude", "to": "codex",
                 "transcript": "claude-code:latest", "attachments": ["notes.txt"]},
            ))
            out["resume"] = result(await session.call_tool("resume", {"budget": 1500}))
            out["search"] = result(await session.call_tool(
                "search", {"rev": "current", "query": "golden", "kind": ["tool_result"]}))
            out["log"] = result(await session.call_tool("log", {}))
            out["same_repo"] = result(await session.call_tool(
                "resume", {"rev": "current~1", "require_same_repo": True}))
            out["bad_rev"] = result(await session.call_tool("resume", {"rev": "deadbeefdeadbeef"}))
            out["outside"] = result(await session.call_tool(
                "save_handoff", {"brief": BRIEF, "attachments": ["../outside.txt"]}))
            out["bad_kind"] = result(await session.call_tool(
                "search", {"rev": "current", "query": "", "kind": ["teleport"]}))
    print(json.dumps(out))


asyncio.run(main(sys.argv[1], sys.argv[2]))
