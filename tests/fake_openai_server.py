"""A tiny OpenAI-compatible streaming server for the bench tests: asyncio.start_server speaking
HTTP/1.1 with server-sent events, on 127.0.0.1 and a free port, in a child process (so the client's
event loop and the server's do not share a GIL: the measured latencies are the injected ones).
`GET /_stats` returns what it received; `requests` and `bodies` read it.

Latencies are injected: `ttft_s` before the first chunk, `itl_s` between chunks, one chunk per token,
`max_tokens` tokens (ignore_eos semantics). Every `error_every`-th request answers HTTP 500.

`hostile` makes it misbehave (on every `hostile_every`-th completion request, or on every
GET /v1/models), as a broken or malicious server would; `HOSTILE_MODES` says what each does.
A hostile answer that never ends stops after `HOSTILE_MAX_S` or when the client goes away.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import queue
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import httpx

HOSTILE_MAX_S = 60.0
MODELS_BOMB_BYTES = 64 * 2**20  # decompressed size of the /v1/models gzip bomb (64 KiB on the wire)
HOSTILE_MODES = {
    "data-number": "a stream whose first event is `data: 5` (valid JSON, not an object)",
    "choices-junk": 'a stream whose token chunks are `{"choices": [1]}` (a choice that is not an object)',
    "text-object": 'a stream whose token chunks carry an object as their text (`"text": {"a": 1}`)',
    "usage-string": 'a stream whose usage event is `"usage": "lots"`',
    "usage-inf": "a stream whose usage says completion_tokens 1e400 (JSON infinity)",
    "endless-line": "a stream that sends one `data:` line that never ends",
    "stream-gzip-bomb": "a gzip-encoded stream that inflates to one 64 MiB line",
    "error-endless-body": "HTTP 500 with a body that never ends",
    "models-trickle": "GET /v1/models answers one byte every 0.1 s",
    "models-gzip-bomb": "GET /v1/models: 64 KiB of gzip that inflate to 64 MiB",
}


def _gzip(parts: list[tuple[bytes, int]]) -> bytes:
    """gzip of each (piece, times) in turn, without building the inflated text."""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [z.compress(piece) for piece, times in parts for _ in range(times)]
    return b"".join(out) + z.flush()


@dataclass
class FakeServerConfig:
    ttft_s: float = 0.05
    itl_s: float = 0.01
    error_every: int = 0  # 0: never fail; 4: every 4th request answers 500
    model: str = "fake-model"
    api_key: str | None = None
    send_usage: bool = True
    hostile: str = ""  # one of HOSTILE_MODES
    hostile_every: int = 1  # which completion requests misbehave: every n-th


def _serve(cfg: FakeServerConfig, port_q: Any) -> None:
    state = _State(cfg)

    async def main() -> None:
        server = await asyncio.start_server(state.handle, "127.0.0.1", 0)
        port_q.put(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    asyncio.run(main())


@dataclass
class FakeServer:
    config: FakeServerConfig
    port: int = 0
    _proc: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeServer:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process with threads
        q = ctx.Queue()
        self._proc = ctx.Process(target=_serve, args=(self.config, q), daemon=True)
        self._proc.start()
        deadline = time.monotonic() + 60  # a loaded CI machine can take long to start Python
        while time.monotonic() < deadline:
            try:
                self.port = int(q.get(timeout=0.2))
                return self
            except queue.Empty:
                if not self._proc.is_alive():
                    raise RuntimeError(f"fake server exited with code {self._proc.exitcode}") from None
        self.stop()
        raise RuntimeError("fake server did not start within 60 s")

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.join(5)

    def _stats(self) -> dict[str, Any]:
        return dict(httpx.get(f"{self.url}/_stats", timeout=5).json())

    @property
    def requests(self) -> int:
        return int(self._stats()["requests"])

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return list(self._stats()["bodies"])


@dataclass
class _State:
    config: FakeServerConfig
    requests: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._handle(reader, writer)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            await self._route(method, path, headers, body, writer)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            try:
                writer.close()
                await writer.wait_closed()
            except ConnectionError:
                pass

    async def _send(self, writer: asyncio.StreamWriter, status: str, obj: Any) -> None:
        data = json.dumps(obj).encode()
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                     "Connection: close\r\n\r\n".encode() + data)
        await writer.drain()

    async def _route(self, method: str, path: str, headers: dict[str, str], body: bytes,
                     writer: asyncio.StreamWriter) -> None:
        cfg = self.config
        if cfg.api_key and headers.get("authorization") != f"Bearer {cfg.api_key}":
            await self._send(writer, "401 Unauthorized", {"error": {"message": "bad key"}})
            return
        if method == "GET" and path == "/_stats":
            await self._send(writer, "200 OK", {"requests": self.requests, "bodies": self.bodies})
            return
        if method == "GET" and path == "/v1/models":
            if cfg.hostile.startswith("models-"):
                await self._hostile_models(writer)
                return
            await self._send(writer, "200 OK", {"object": "list", "data": [{"id": cfg.model, "object": "model"}]})
            return
        if method != "POST" or path not in ("/v1/completions", "/v1/chat/completions"):
            await self._send(writer, "404 Not Found", {"error": {"message": f"no route {path}"}})
            return
        self.requests += 1
        n = self.requests
        req = json.loads(body)
        self.bodies.append(req)
        if cfg.error_every and n % cfg.error_every == 0:
            await self._send(writer, "500 Internal Server Error", {"error": {"message": "injected failure"}})
            return
        if req.get("model") != cfg.model:  # as vLLM does
            await self._send(writer, "404 Not Found", {"error": {"message": f"model {req.get('model')} not found"}})
            return
        hostile = cfg.hostile if cfg.hostile and not cfg.hostile.startswith("models-") \
            and n % max(cfg.hostile_every, 1) == 0 else ""
        if hostile in ("error-endless-body", "endless-line", "stream-gzip-bomb"):
            await self._hostile_stream(writer, hostile)
            return
        chat = path.endswith("chat/completions")
        prompt = req["messages"][0]["content"] if chat else req["prompt"]
        max_tokens = int(req["max_tokens"])
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                     b"Connection: close\r\n\r\n")

        async def event(obj: Any) -> None:
            data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()

        await asyncio.sleep(cfg.ttft_s)
        if hostile == "data-number":
            await event(b"5")
        for i in range(max_tokens):
            if i:
                await asyncio.sleep(cfg.itl_s)
            choice: Any = {"index": 0, "delta": {"content": " tok"}} if chat else {"index": 0, "text": " tok"}
            if hostile == "choices-junk":
                choice = 1
            elif hostile == "text-object":
                choice = {"index": 0, "delta": {"content": {"a": 1}}} if chat else {"index": 0, "text": {"a": 1}}
            await event({"id": f"r{n}", "object": "text_completion", "choices": [choice]})
        if hostile == "usage-string":
            await event({"id": f"r{n}", "choices": [], "usage": "lots"})
        elif hostile == "usage-inf":
            await event(b'{"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1e400}}')
        elif cfg.send_usage:
            await event({"id": f"r{n}", "choices": [], "usage": {
                "prompt_tokens": len(prompt.split()), "completion_tokens": max_tokens,
                "total_tokens": len(prompt.split()) + max_tokens}})
        await event(b"[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def _hostile_models(self, writer: asyncio.StreamWriter) -> None:
        cfg = self.config
        listing = json.dumps({"object": "list", "data": [{"id": cfg.model, "object": "model"}]}).encode()
        if cfg.hostile == "models-trickle":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
            end = time.monotonic() + HOSTILE_MAX_S
            while time.monotonic() < end:
                writer.write(b" ")
                await writer.drain()
                await asyncio.sleep(0.1)
        elif cfg.hostile == "models-gzip-bomb":
            body = _gzip([(listing[:-1], 1), (b" " * 2**20, MODELS_BOMB_BYTES // 2**20), (b"}", 1)])
            writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
        else:
            raise ValueError(f"unknown hostile mode {cfg.hostile!r}")

    async def _hostile_stream(self, writer: asyncio.StreamWriter, mode: str) -> None:
        """Answers that never end (or inflate to one endless line) until the client hangs up."""
        async def chunk(data: bytes) -> None:
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()

        status = "500 Internal Server Error" if mode == "error-endless-body" else "200 OK"
        encoding = "Content-Encoding: gzip\r\n" if mode == "stream-gzip-bomb" else ""
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: text/event-stream\r\n{encoding}"
                     "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n".encode())
        if mode == "stream-gzip-bomb":
            await chunk(_gzip([(b"data: ", 1), (b"a" * 2**20, 64)]))
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return
        await chunk(b"data: {\"text\": \"" if mode == "endless-line" else b"error: ")
        end = time.monotonic() + HOSTILE_MAX_S
        piece = b"x" * 65536
        while time.monotonic() < end:
            await chunk(piece)
            await asyncio.sleep(0)
