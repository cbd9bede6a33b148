"""A visitor without a browser: one Streamlit session over its websocket, as a page sends it.

Used by the storm test (tests/test_storm.py) and the soak bench (bench/bench_soak.py): connect,
ask for one run of a page with its query string, read the run to its end. The server sees the
same messages a browser's page sends.
"""

from __future__ import annotations

import asyncio

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg


async def run_page(port: int, page: str, query: str, go: asyncio.Event | None = None,
                   open_timeout: float = 60) -> dict:
    """One session on 127.0.0.1:`port`: connect, wait for `go` if given (so that many sessions
    can be released at once), run `page` with `query`, read it to the end, close (the
    connection may take `open_timeout` s to open on a busy server). Returns
    {"page", "exceptions" (the types of exception elements drawn), "elements", "status" (the
    ScriptFinishedStatus name, None if the run never finished)}."""
    result = {"page": f"/{page}" + (f"?{query}" if query else ""), "exceptions": [],
              "elements": 0, "status": None}
    async with websockets.connect(f"ws://127.0.0.1:{port}/_stcore/stream",
                                  subprotocols=["streamlit"], max_size=None,
                                  open_timeout=open_timeout) as ws:
        rerun = BackMsg()
        rerun.rerun_script.page_name = page
        rerun.rerun_script.query_string = query
        if go is not None:
            await go.wait()
        await ws.send(rerun.SerializeToString())
        async for frame in ws:
            msg = ForwardMsg()
            msg.ParseFromString(frame)
            kind = msg.WhichOneof("type")
            if kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                element = msg.delta.new_element
                result["elements"] += 1
                if element.WhichOneof("type") == "exception":  # the message is redacted
                    result["exceptions"].append(element.exception.type)
            elif kind == "script_finished":
                if msg.script_finished == ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                    continue  # the page asked for a rerun: read that one too
                result["status"] = ForwardMsg.ScriptFinishedStatus.Name(msg.script_finished)
                return result
    return result
