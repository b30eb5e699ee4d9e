"""The Kubeflow MCP server (``kubeflow-mcp`` 0.1.1) asked about Trainer's controller as an
AI agent asks it: the server is started over MCP's stdio transport (``python -m
kubeflow_mcp serve``) and its ``inspect_controller`` tool is called through fastmcp's
client, for each view given.

Usage: ``python -m tests.mcp.inspect_controller VIEW [VIEW...]`` in the MCP virtualenv,
with ``KUBECONFIG`` (and, to name the operator's namespace, the server's own setting
``KUBEFLOW_MCP_CONTROLLER_NAMESPACE``) in the environment; prints one JSON document: each
view's tool result.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

#: The persona that may call the platform tools (``inspect_controller``, ``inspect_crd``);
#: the default, ``readonly``, does not list them.
PERSONA = "platform-admin"


async def inspect(views: list[str]) -> dict[str, Any]:
    env = {**os.environ, "KUBEFLOW_MCP_PERSONA": PERSONA}
    server = [sys.executable, "-m", "kubeflow_mcp", "serve", "--transport", "stdio"]
    transport = StdioTransport(command=server[0], args=server[1:], env=env)
    results: dict[str, Any] = {}
    async with Client(transport) as client:
        tools = {tool.name for tool in await client.list_tools()}
        if "inspect_controller" not in tools:
            raise SystemExit(f"the server lists no inspect_controller tool: {sorted(tools)}")
        for view in views:
            result = await client.call_tool(
                "inspect_controller", {"view": view}, raise_on_error=False
            )
            results[view] = result.structured_content or json.loads(result.content[0].text)
    return results


def main(argv: list[str]) -> int:
    if not argv:
        raise SystemExit("usage: python -m tests.mcp.inspect_controller VIEW [VIEW...]")
    print(json.dumps(asyncio.run(inspect(argv)), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
