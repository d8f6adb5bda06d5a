"""The load generator: streaming OpenAI-compatible requests over httpx/asyncio.

Closed loop (`concurrency`): N workers, each sends its next request when the last one finishes.
Open loop (`rate`): Poisson arrivals at R requests/s from a seeded generator, each its own task.
Both stop issuing new requests after `duration_s` and wait for those in flight (each bounded by
`request_timeout_s` from send to last token); `max_requests` caps the count. A request that fails is
recorded with its error kind, never raised. Connection problems found before the run raise
BenchConnectionError (one line).

Against a broken or hostile server every answer is bounded: a whole-request deadline (not httpx's
per-read timeout, which a server sending one byte a second never trips), at most MAX_LINE_BYTES per
stream line, MAX_STREAM_BYTES per stream, MODELS_BODY_BYTES for GET /v1/models and ERROR_BODY_BYTES
read of an error body. Bodies are asked for uncompressed (`Accept-Encoding: identity`) and, if a
server compresses anyway, inflated here in pieces, never beyond those caps. A chunk that is valid
JSON of the wrong shape (`data: 5`, `"usage": "lots"`) fails its request as `bad-stream`.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sizing.errors import LlmcapError, SpecError
from sizing.measure.metrics import RequestRecord

if TYPE_CHECKING:
    from sizing.measure.workload import RequestFactory

ERROR_BODY_CHARS = 200  # of an error body or a stream error, kept in the record
ERROR_BODY_BYTES = 4096  # read of an error body at most
MAX_LINE_BYTES = 2**20  # one server-sent-events line (a chunk of a few tokens is ~300 bytes)
MAX_STREAM_BYTES = 256 * 2**20  # one streamed response, inflated (~300 bytes a token: ~800k tokens)
MODELS_BODY_BYTES = 2**20  # GET /v1/models (some 10,000 model entries)
INFLATE_PIECE_BYTES = 65536  # a compressed body is inflated this much at a time
MODELS_DEADLINE_S = 10.0  # GET /v1/models, whole answer, unless --request-timeout is shorter
IDENTITY = {"Accept-Encoding": "identity"}
_MIB = 2**20


class BenchConnectionError(LlmcapError):
    """The endpoint cannot be reached or refuses us before any load is sent (exit 2)."""


class BadResponse(ValueError):
    """An answer over a cap, in an encoding we did not ask for, or of the wrong shape."""


def _size(n: int) -> str:
    return f"{n // _MIB} MiB" if n >= _MIB and n % _MIB == 0 else f"{n:,} bytes"


class _Inflater:
    """Content-Encoding of a response body: identity, gzip or deflate, inflated in bounded pieces."""

    def __init__(self, encoding: str) -> None:
        enc = encoding.strip().lower()
        if enc in ("", "identity"):
            self._z: Any = None
        elif enc in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif enc == "deflate":
            self._z = zlib.decompressobj()
        else:
            raise BadResponse(f"Content-Encoding {encoding!r}, not the identity we asked for")

    def feed(self, raw: bytes) -> Iterator[bytes]:
        if self._z is None:
            yield raw
            return
        data = raw
        while data:
            try:
                out = self._z.decompress(data, INFLATE_PIECE_BYTES)
            except zlib.error as e:
                raise BadResponse(f"body does not inflate: {e}") from None
            rest = self._z.unconsumed_tail
            if out:
                yield out
            elif rest == data:
                break
            data = rest


async def _body_pieces(resp: Any, cap: int, what: str) -> AsyncIterator[bytes]:
    """The body of an httpx streaming response, inflated here; BadResponse past `cap` bytes."""
    inflater = _Inflater(resp.headers.get("content-encoding", ""))
    seen = 0
    async for raw in resp.aiter_raw():
        for piece in inflater.feed(raw):
            seen += len(piece)
            if seen > cap:
                raise BadResponse(f"{what} of more than {_size(cap)}")
            yield piece


async def read_capped(resp: Any, cap: int, what: str, truncate: bool = False) -> bytes:
    """At most `cap` bytes of the body: the first `cap` bytes (truncate) or BadResponse past them."""
    out = bytearray()
    async for piece in _body_pieces(resp, cap if not truncate else 2**62, what):
        out += piece
        if len(out) > cap:
            if truncate:
                return bytes(out[:cap])
            raise BadResponse(f"{what} of more than {_size(cap)}")
    return bytes(out)


async def stream_lines(resp: Any, max_line: int = MAX_LINE_BYTES,
                       max_total: int = MAX_STREAM_BYTES) -> AsyncIterator[str]:
    """The lines of a streamed body (`\n`, `\r\n`), each at most `max_line` bytes, UTF-8."""
    buf = bytearray()
    async for piece in _body_pieces(resp, max_total, "a stream"):
        buf += piece
        start = 0
        while (i := buf.find(b"\n", start)) >= 0:
            if i - start > max_line:
                raise BadResponse(f"a line of more than {_size(max_line)}")
            yield bytes(buf[start:i]).rstrip(b"\r").decode("utf-8")
            start = i + 1
        del buf[:start]
        if len(buf) > max_line:
            raise BadResponse(f"a line of more than {_size(max_line)}")
    if buf:
        yield bytes(buf).rstrip(b"\r").decode("utf-8")


def _token_count(v: Any, field: str) -> int | None:
    """A usage count from the server: a non-negative whole number, or BadResponse."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0 or v != int(v) \
            or v > 10**12:
        raise BadResponse(f"usage.{field} is {str(v)[:40]!r}, not a token count")
    return int(v)


@dataclass(frozen=True)
class Target:
    base_url: str  # scheme://host:port[/prefix], without a trailing /v1
    model: str
    api: str = "completions"  # completions | chat
    api_key: str | None = None
    ignore_eos: bool = True

    @property
    def url(self) -> str:
        return f"{self.base_url}/v1/{'chat/completions' if self.api == 'chat' else 'completions'}"

    def headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "text/event-stream", **IDENTITY}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def payload(self, prompt: str, max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "stream": True,
                                "stream_options": {"include_usage": True}, "temperature": 0.0}
        if self.ignore_eos:
            body["ignore_eos"] = True  # vLLM and SGLang extension: generate exactly max_tokens
        if self.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        return body


def normalize_endpoint(endpoint: str) -> str:
    """`http://host:8000`, `http://host:8000/` and `http://host:8000/v1` all mean the same server."""
    parts = urlsplit(endpoint.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SpecError(f"ENDPOINT: {endpoint!r} is not an http(s) URL such as http://127.0.0.1:8000")
    path = parts.path.rstrip("/")
    path = path.removesuffix("/v1")
    return f"{parts.scheme}://{parts.netloc}{path}"


def _describe(e: BaseException) -> str:
    msg = str(e) or e.__class__.__name__
    return f"{e.__class__.__name__}: {msg}"


async def _discover(base_url: str, api_key: str | None, timeout_s: float) -> list[str]:
    """GET /v1/models: proves the server answers; returns the model ids it lists (maybe none).
    The whole answer within `timeout_s` seconds and MODELS_BODY_BYTES, or BenchConnectionError."""
    import httpx

    headers = {**IDENTITY, **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    url = f"{base_url}/v1/models"
    body = b""
    try:
        async with asyncio.timeout(timeout_s), httpx.AsyncClient(timeout=timeout_s) as client, \
                client.stream("GET", url, headers=headers) as r:
            status = r.status_code
            if status == 200:
                body = await read_capped(r, MODELS_BODY_BYTES, "an answer")
    except TimeoutError:
        raise BenchConnectionError(f"{url} did not answer within {timeout_s:g} s; is it an OpenAI-compatible "
                                   "server? (a longer --request-timeout waits longer)") from None
    except httpx.HTTPError as e:
        raise BenchConnectionError(
            f"cannot reach {base_url}: {_describe(e)}; is the server up and the port right? "
            "(kubectl port-forward or the router's address)") from None
    except BadResponse as e:
        raise BenchConnectionError(f"{url} sent {e}; is it an OpenAI-compatible server?") from None
    if status in (401, 403):
        raise BenchConnectionError(f"{base_url} refused the request (HTTP {status}); "
                                   "pass the API key with --api-key-env VAR")
    if status != 200:
        return []
    try:
        doc = json.loads(body)
        return [str(m["id"]) for m in doc.get("data") or []]
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return []


def preflight(base_url: str, api_key: str | None, timeout_s: float = MODELS_DEADLINE_S) -> list[str]:
    return asyncio.run(_discover(base_url, api_key, timeout_s))


def _choice_text(choice: object, api: str) -> str:
    """The text one streamed choice carries, checked against OpenAI's chunk schema (completions:
    `choices[].text` a string; chat: `choices[].delta` an object whose `content` is a string or null);
    anything else is a BadResponse, so a malformed chunk makes its request a `bad-stream` error, never a
    counted token. A role-only or empty delta carries "" (no token)."""
    if not isinstance(choice, dict):
        raise BadResponse(f"a choice that is not an object: {str(choice)[:40]!r}")
    if api == "chat":
        delta = choice.get("delta")
        if delta is None:
            return ""
        if not isinstance(delta, dict):
            raise BadResponse(f"delta is {str(delta)[:40]!r}, not an object")
        text = delta.get("content")
    else:
        text = choice.get("text")
    if text is not None and not isinstance(text, str):
        raise BadResponse(f"text is {str(text)[:40]!r}, not a string")
    return text or ""


async def _one(client: Any, target: Target, prompt: str, prompt_tokens: int, max_tokens: int,
               t0: float, request_timeout_s: float) -> RequestRecord:
    import httpx

    st = time.perf_counter()
    rec = RequestRecord(start_s=st - t0, prompt_tokens_target=prompt_tokens, output_tokens_target=max_tokens)
    last = st
    try:
        async with asyncio.timeout(request_timeout_s), client.stream(
                "POST", target.url, json=target.payload(prompt, max_tokens), headers=target.headers()) as resp:
            if resp.status_code != 200:
                raw = await read_capped(resp, ERROR_BODY_BYTES, "an error body", truncate=True)
                body = raw.decode("utf-8", "replace")[:ERROR_BODY_CHARS]
                rec.error = f"http-{resp.status_code}: {body}"
                rec.e2e_s = time.perf_counter() - st
                return rec
            done = False
            async for line in stream_lines(resp):
                if not line.startswith("data:"):
                    continue
                chunk = line[5:].strip()
                if chunk == "[DONE]":
                    done = True
                    break
                data = json.loads(chunk)
                if not isinstance(data, dict):
                    raise BadResponse(f"a chunk that is not a JSON object: {chunk[:40]!r}")
                if data.get("error"):
                    rec.error = f"stream-error: {str(data['error'])[:ERROR_BODY_CHARS]}"
                    break
                choices = data.get("choices")
                if choices is not None and not isinstance(choices, list):
                    raise BadResponse(f"choices is {str(choices)[:40]!r}, not a list")
                if choices and any(_choice_text(c, target.api) for c in choices):
                    now = time.perf_counter()
                    if rec.chunks == 0:
                        rec.ttft_s = now - st
                    else:
                        rec.itls_s.append(now - last)
                    last = now
                    rec.chunks += 1
                usage = data.get("usage")
                if usage is not None and not isinstance(usage, dict):
                    raise BadResponse(f"usage is {str(usage)[:40]!r}, not an object")
                if usage:
                    n_out = _token_count(usage.get("completion_tokens"), "completion_tokens")
                    n_in = _token_count(usage.get("prompt_tokens"), "prompt_tokens")
                    if n_out is not None:
                        rec.output_tokens_server = n_out
                    if n_in is not None:
                        rec.prompt_tokens_server = n_in
            if not rec.error:
                if rec.chunks == 0:
                    rec.error = "empty-stream: no tokens streamed"
                elif not done:
                    rec.error = "truncated: stream ended before [DONE]"
                else:
                    rec.success = True
    except httpx.TimeoutException as e:
        rec.error = f"timeout: {_describe(e)}"
    except TimeoutError:
        rec.success = False
        rec.error = f"timeout: no complete response within {request_timeout_s:g} s"
    except httpx.HTTPError as e:
        rec.error = f"connection: {_describe(e)}"
    except BadResponse as e:
        rec.error = f"bad-stream: {e}"
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        rec.error = f"bad-stream: {_describe(e)}"
    rec.e2e_s = (last if rec.success else time.perf_counter()) - st
    return rec


ProgressFn = Callable[[int, int, float], None]  # (finished, errors, elapsed_s)


@dataclass(frozen=True)
class RunLimits:
    duration_s: float
    request_timeout_s: float = 600.0
    max_requests: int = 100_000
    connect_timeout_s: float = 10.0


async def _run(target: Target, factory: RequestFactory, mode: str, load: float, limits: RunLimits,
               seed: int, progress: ProgressFn | None) -> list[RequestRecord]:
    import httpx

    records: list[RequestRecord] = []
    sent = 0
    n_conn = int(load) + 8 if mode == "concurrency" else 1000
    timeout = httpx.Timeout(limits.request_timeout_s, connect=limits.connect_timeout_s)
    limits_http = httpx.Limits(max_connections=n_conn, max_keepalive_connections=n_conn)

    async with httpx.AsyncClient(timeout=timeout, limits=limits_http) as client:
        # the clock starts once the client exists: building it (TLS context) is not load time
        t0 = time.perf_counter()
        deadline = t0 + limits.duration_s

        def report() -> None:
            if progress:
                progress(len(records), sum(1 for r in records if not r.success), time.perf_counter() - t0)

        async def send() -> None:
            shape = factory.next()
            try:
                rec = await _one(client, target, shape.prompt, shape.prompt_tokens, shape.max_tokens, t0,
                                 limits.request_timeout_s)
            except Exception as e:  # noqa: BLE001 - one answer we did not foresee is one failed request
                rec = RequestRecord(start_s=time.perf_counter() - t0, prompt_tokens_target=shape.prompt_tokens,
                                    output_tokens_target=shape.max_tokens, error=f"client: {_describe(e)}")
            records.append(rec)
            report()

        if mode == "concurrency":
            async def worker() -> None:
                nonlocal sent
                while time.perf_counter() < deadline and sent < limits.max_requests:
                    sent += 1
                    await send()

            await asyncio.gather(*(worker() for _ in range(int(load))))
        else:
            rng = random.Random(seed)
            tasks: list[asyncio.Task[None]] = []
            next_at = t0 + rng.expovariate(load)
            while next_at < deadline and sent < limits.max_requests:
                delay = next_at - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                sent += 1
                tasks.append(asyncio.create_task(send()))
                next_at += rng.expovariate(load)
            await asyncio.gather(*tasks)
    return records


def run_load(target: Target, factory: RequestFactory, mode: str, load: float, limits: RunLimits,
             seed: int = 0, progress: ProgressFn | None = None) -> list[RequestRecord]:
    """One load point; returns every request sent (successes and failures)."""
    if mode not in ("concurrency", "rate"):
        raise SpecError(f"unknown load mode {mode!r}")
    return asyncio.run(_run(target, factory, mode, load, limits, seed, progress))
