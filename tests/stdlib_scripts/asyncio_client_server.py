"""asyncio (Python 3 only) over bitsnet: its self-pipe is bitsnet's in-memory socketpair, its
selector bitsnet's poll. Fetch "/" from the HTTP server at 127.0.0.1:PORT with open_connection,
and serve one upper-casing echo with start_server. Prints "STATUS <line>", "READY <port>",
"DONE"."""

import asyncio
import sys


async def handle(reader, writer):
    writer.write((await reader.readline()).upper())
    await writer.drain()
    writer.close()


async def main(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.0\r\n\r\n")
    print("STATUS %s" % (await reader.readline()).decode("ascii").strip())
    writer.close()
    done = asyncio.Event()

    async def handle_once(reader, writer):
        await handle(reader, writer)
        done.set()
    server = await asyncio.start_server(handle_once, "0.0.0.0", 0)
    print("READY %d" % server.sockets[0].getsockname()[1])
    sys.stdout.flush()
    await asyncio.wait_for(done.wait(), 30)
    server.close()
    await server.wait_closed()


loop = asyncio.new_event_loop()
loop.run_until_complete(main(int(sys.argv[1])))
loop.close()
print("DONE")
