"""Run the app's landing page once in a fresh replica, so no student pays its first run.

    python -m alibi_viz_app.warm_up PORT [PAGE [QUERY]]   # deploy/run.sh: PORT "" then PORT model

A replica's first script run imports torch and the plotting stack and fills the caches: a
few CPU-seconds, ten times a later run's; the Model heads page also loads the shipped model
(st.cache_resource: once per replica). This opens one session over Streamlit's websocket (as
a browser would, without one), asks for a run of PAGE (its URL path: "" is the landing page)
with QUERY as its URL query string, waits for the run to finish, and leaves. Exit status 0 when
the run finished without an exception; the caller only warns otherwise. `run_page` is that one
visit; the cold-server storm test and the soak benchmark send many of them.
"""

from __future__ import annotations

import asyncio
import sys

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

TIMEOUT_S = 120


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


async def warm_up(port: int, page: str, query: str) -> bool:
    """True when one run of `page` with `query` finished and drew no exception."""
    result = await run_page(port, page, query)
    return result["status"] == "FINISHED_SUCCESSFULLY" and not result["exceptions"]


def main() -> int:
    port, page, query = int(sys.argv[1]), *(sys.argv[2:] + ["", ""])[:2]
    try:
        if asyncio.run(asyncio.wait_for(warm_up(port, page, query), TIMEOUT_S)):
            return 0
        print(f"warm-up of 127.0.0.1:{port}/{page}: the run failed", file=sys.stderr)
    except (OSError, TimeoutError, websockets.WebSocketException) as exc:
        print(f"warm-up of 127.0.0.1:{port}/{page} failed: {exc!r}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
