"""Call one tool of `baton mcp` with the official Python MCP SDK's stdio client, within a
deadline.

Usage: python3 mcp_call.py BATON WORKSPACE TOOL ARGS_JSON SECONDS. Prints one JSON
document: the call's {"error", "structured", "text"}, or {"timeout": true} when it did not
answer within SECONDS (the server is then stopped with the client).
"""
import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(baton, workspace, tool, args, seconds):
    params = StdioServerParameters(
        command=baton, args=["mcp", "--workspace", workspace], env=dict(os.environ), cwd=workspace
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            try:
                r = await asyncio.wait_for(session.call_tool(tool, args), seconds)
            except asyncio.TimeoutError:
                return {"timeout": True}
            text = "".join(c.text for c in r.content if getattr(c, "type", "") == "text")
            return {"error": bool(r.is_error), "structured": r.structured_content, "text": text}


out = asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]),
                       float(sys.argv[5])))
print(json.dumps(out))
