#!/usr/bin/env python3
"""TCP proxy on loopback that adds a fixed one-way delay to every chunk, both directions.

A copy of the project's tools/delayproxy.py (see design-notes.md, section 1), kept here so
that bench/sync.sh runs from a checkout alone.

Usage: delayproxy.py LISTEN_PORT TARGET_PORT DELAY_MS
Simulates a WAN round trip (RTT = 2 * DELAY_MS) in front of a local sshd, so that the
number of round trips a push makes shows up as wall time. Order is preserved.
"""
import asyncio, sys, time

LISTEN, TARGET, DELAY = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000.0


async def pump(reader, writer):
    q = asyncio.Queue()

    async def rx():
        while True:
            data = await reader.read(1 << 16)
            await q.put((time.monotonic() + DELAY, data))
            if not data:
                return

    async def tx():
        while True:
            due, data = await q.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                try:
                    writer.write_eof()
                except Exception:
                    pass
                return
            writer.write(data)
            await writer.drain()

    await asyncio.gather(rx(), tx(), return_exceptions=True)


async def handle(cr, cw):
    sr, sw = await asyncio.open_connection("127.0.0.1", TARGET)
    await asyncio.gather(pump(cr, sw), pump(sr, cw), return_exceptions=True)
    for w in (cw, sw):
        w.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", LISTEN)
    async with server:
        await server.serve_forever()


asyncio.run(main())
