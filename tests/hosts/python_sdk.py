"""`dsh-refs mcp` through the official MCP Python SDK (issue 36 item 3), in both protocol eras,
over stdio and over `--http`. Not run by `cargo test`; see README.md in this folder.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install "mcp==2.3.0"
    /tmp/venv/bin/python tests/hosts/python_sdk.py target/debug/dsh-refs

It copies the demo home to a temporary directory and, for each of stdio and HTTP and each of
the SDK's `legacy` (initialize, 2025-11-25) and `auto` (server/discover, 2026-07-28) modes,
lists, reads, lists and gets the prompt, completes its argument and reads an unknown session;
in `auto` it also opens a `subscriptions/listen` stream. Exits 1 at the first difference.
"""

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import PromptReference

REFERENCED = "f382e8f5"
UNKNOWN = "dsh-session:Im5vcGUi"  # the URI of session id "nope"


def check(ok, what):
    if not ok:
        print(f"FAILED: {what}")
        sys.exit(1)


async def exercise(client, label, modern):
    version = client.protocol_version
    check(version == ("2026-07-28" if modern else "2025-11-25"), f"{label}: version {version}")
    resources = (await client.list_resources()).resources
    check(len(resources) == 8, f"{label}: {len(resources)} resources")
    text = (await client.read_resource(resources[0].uri)).contents[0].text
    check(text.startswith("## Referenced sessions"), f"{label}: read {text[:40]!r}")
    prompts = [p.name for p in (await client.list_prompts()).prompts]
    check(prompts == ["reference"], f"{label}: prompts {prompts}")
    got = await client.get_prompt("reference", {"session": REFERENCED})
    check(got.messages[0].content.text.startswith("## Referenced sessions"), f"{label}: prompt")
    values = (
        await client.complete(
            PromptReference(type="ref/prompt", name="reference"),
            {"name": "session", "value": REFERENCED[:3]},
        )
    ).completion.values
    check(values == [REFERENCED], f"{label}: completion {values}")
    try:
        await client.read_resource(UNKNOWN)
        check(False, f"{label}: an unknown session was read")
    except Exception as e:  # the SDK's MCPError
        error = getattr(e, "error", None)
        code, data = getattr(error, "code", None), getattr(error, "data", None) or {}
        check(code == (-32602 if modern else -32002), f"{label}: unknown session code {code}")
        check((data.get("uri") == UNKNOWN) == modern, f"{label}: unknown session data {data}")
    if modern:
        async with client.listen(resources_list_changed=True, prompts_list_changed=True) as sub:
            honored = sub.honored
            check(honored.resources_list_changed and not honored.prompts_list_changed,
                  f"{label}: listen honored {honored}")
    print(f"ok  {label}: {version}, {len(resources)} resources, read, prompt, completion, errors")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def main(binary):
    home = Path(tempfile.mkdtemp()) / "home"
    shutil.copytree(Path(__file__).resolve().parents[2] / "assets" / "demo-home", home)
    args = ["--home", str(home), "--sources", "dsh", "mcp"]
    for mode in ["legacy", "auto"]:
        async with Client(StdioServerParameters(command=binary, args=args), mode=mode) as client:
            await exercise(client, f"stdio {mode}", mode == "auto")
    token, port = "t" * 40, free_port()
    server = subprocess.Popen(
        [binary, *args, "--http", f"127.0.0.1:{port}"],
        env=dict(os.environ, DSH_REFS_MCP_TOKEN=token),
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.5)
        for mode in ["legacy", "auto"]:
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
                transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
                async with Client(transport, mode=mode) as client:
                    await exercise(client, f"http {mode}", mode == "auto")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    asyncio.run(main(sys.argv[1]))
