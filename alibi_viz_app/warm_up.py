"""Run the app's landing page once in a fresh replica, so no student pays its first run.

    python -m alibi_viz_app.warm_up PORT [PAGE [QUERY]]   # deploy/run.sh: PORT "" then PORT model

A replica's first script run imports torch and the plotting stack and fills the caches: a
few CPU-seconds, ten times a later run's; the Model heads page also loads the shipped model
(st.cache_resource: once per replica). This opens one session over Streamlit's websocket (as
a browser would, without one), asks for a run of PAGE (its URL path: "" is the landing page)
with QUERY as its URL query string, waits for the run to finish, and leaves. Exit status 0 when the run finished
without an exception; the caller only warns otherwise.
"""

from __future__ import annotations

import asyncio
import sys

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

TIMEOUT_S = 120


async def warm_up(port: int, page: str, query: str) -> bool:
    async with websockets.connect(f"ws://127.0.0.1:{port}/_stcore/stream",
                                  subprotocols=["streamlit"], max_size=None) as ws:
        rerun = BackMsg()
        rerun.rerun_script.page_name = page
        rerun.rerun_script.query_string = query
        await ws.send(rerun.SerializeToString())
        failed = False
        async for frame in ws:
            msg = ForwardMsg()
            msg.ParseFromString(frame)
            kind = msg.WhichOneof("type")
            if kind == "delta" and msg.delta.new_element.WhichOneof("type") == "exception":
                failed = True
            if kind == "script_finished":
                return not failed and msg.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY
    return False


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
