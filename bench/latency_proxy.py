#!/usr/bin/env python3
"""A TCP proxy that adds a round trip of latency to every HTTP request.

Usage: latency_proxy.py LISTEN_PORT TARGET_HOST:TARGET_PORT DELAY_MS [STATS_FILE]

Models a network between an S3 client and server for bench/s3-latency.sh.
On each connection, whenever the server starts answering after the client
has sent something (a request and its body), the answer is held back for
DELAY_MS: one extra round trip per request, however large the request,
which is what a link with that round-trip time costs a request/response
protocol with connections kept alive. Bytes are forwarded unchanged.
Prints "ready" once listening; runs until killed. With STATS_FILE, keeps
"requests bytes_up bytes_down" (answers held back, bytes client to server,
bytes server to client) in it, rewritten twice a second. With the
environment variable PROXY_REQUEST_LOG set to a file, appends the request
line ("GET /bucket/key?query HTTP/1.1") of every request to it, to see
which requests a command makes.
"""

import asyncio
import os
import sys

STATS = {"requests": 0, "up": 0, "down": 0}
REQUEST_LOG = os.environ.get("PROXY_REQUEST_LOG")


async def pipe(reader, writer, on_data):
    try:
        while True:
            data = await reader.read(1 << 16)
            if not data:
                break
            await on_data(data)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def handle(client_r, client_w, target, delay):
    host, port = target
    try:
        server_r, server_w = await asyncio.open_connection(host, port)
    except OSError:
        client_w.close()
        return
    # True once the client sent bytes the server has not answered yet.
    state = {"awaiting_answer": False}

    async def from_client(data):
        STATS["up"] += len(data)
        if REQUEST_LOG and not state["awaiting_answer"]:
            line = data.split(b"\r\n", 1)[0].decode("latin-1")
            with open(REQUEST_LOG, "a") as f:
                f.write(line + "\n")
        state["awaiting_answer"] = True

    async def from_server(data):
        STATS["down"] += len(data)
        if state["awaiting_answer"]:
            state["awaiting_answer"] = False
            STATS["requests"] += 1
            await asyncio.sleep(delay)

    await asyncio.gather(
        pipe(client_r, server_w, from_client),
        pipe(server_r, client_w, from_server),
    )


async def write_stats(path):
    while True:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{STATS['requests']} {STATS['up']} {STATS['down']}\n")
        os.replace(tmp, path)
        await asyncio.sleep(0.5)


async def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    listen = int(sys.argv[1])
    host, port = sys.argv[2].rsplit(":", 1)
    delay = float(sys.argv[3]) / 1000.0
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, (host, int(port)), delay), "127.0.0.1", listen
    )
    if len(sys.argv) == 5:
        asyncio.ensure_future(write_stats(sys.argv[4]))
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
