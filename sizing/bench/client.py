"""The load generator: streaming OpenAI-compatible requests over httpx/asyncio.

Closed loop (`concurrency`): N workers, each sends its next request when the last one finishes.
Open loop (`rate`): Poisson arrivals at R requests/s from a seeded generator, each its own task.
Both stop issuing new requests after `duration_s` and wait for those in flight (each bounded by
`request_timeout_s` from send to last token); `max_requests` caps the count. A request that fails is
recorded with its error kind, never raised. Connection problems found before the run raise
BenchConnectionError (one line).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sizing.bench.metrics import RequestRecord
from sizing.bench.workload import RequestFactory
from sizing.errors import LlmcapError, SpecError

ERROR_BODY_CHARS = 200


class BenchConnectionError(LlmcapError):
    """The endpoint cannot be reached or refuses us before any load is sent (exit 2)."""


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
        h = {"Content-Type": "application/json", "Accept": "text/event-stream"}
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
    """GET /v1/models: proves the server answers; returns the model ids it lists (maybe none)."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            r = await client.get(f"{base_url}/v1/models", headers=headers)
    except httpx.HTTPError as e:
        raise BenchConnectionError(
            f"cannot reach {base_url}: {_describe(e)}; is the server up and the port right? "
            "(kubectl port-forward or the router's address)") from None
    if r.status_code in (401, 403):
        raise BenchConnectionError(f"{base_url} refused the request (HTTP {r.status_code}); "
                                   "pass the API key with --api-key-env VAR")
    if r.status_code != 200:
        return []
    try:
        return [str(m["id"]) for m in r.json().get("data") or []]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []


def preflight(base_url: str, api_key: str | None, timeout_s: float = 10.0) -> list[str]:
    return asyncio.run(_discover(base_url, api_key, timeout_s))


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
                body = (await resp.aread())[:ERROR_BODY_CHARS].decode("utf-8", "replace")
                rec.error = f"http-{resp.status_code}: {body}"
                rec.e2e_s = time.perf_counter() - st
                return rec
            done = False
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                chunk = line[5:].strip()
                if chunk == "[DONE]":
                    done = True
                    break
                data = json.loads(chunk)
                if data.get("error"):
                    rec.error = f"stream-error: {str(data['error'])[:ERROR_BODY_CHARS]}"
                    break
                if data.get("choices"):
                    now = time.perf_counter()
                    if rec.chunks == 0:
                        rec.ttft_s = now - st
                    else:
                        rec.itls_s.append(now - last)
                    last = now
                    rec.chunks += 1
                usage = data.get("usage")
                if usage:
                    if usage.get("completion_tokens") is not None:
                        rec.output_tokens_server = int(usage["completion_tokens"])
                    if usage.get("prompt_tokens") is not None:
                        rec.prompt_tokens_server = int(usage["prompt_tokens"])
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
    except (ValueError, UnicodeDecodeError) as e:
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
            rec = await _one(client, target, shape.prompt, shape.prompt_tokens, shape.max_tokens, t0,
                             limits.request_timeout_s)
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
