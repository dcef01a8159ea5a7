"""``airlock serve``'s listening sockets: connections accepted on them have Nagle's algorithm off.
With it on, every answer written in two parts waited for the client's delayed ACK (40 ms a
request: a warm ``run_code`` through the E2B SDK took 44 ms instead of 6)."""

from __future__ import annotations

import asyncio
import socket

from engine.cli import _listener


def test_accepted_connections_send_small_writes_at_once() -> None:
    async def main() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        listener = _listener("127.0.0.1", 0)
        server = await asyncio.start_server(on_connect, sock=listener)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", listener.getsockname()[1])
            nodelay = await asyncio.wait_for(accepted, 10)
            writer.close()
        return nodelay

    assert asyncio.run(main()) == 1
