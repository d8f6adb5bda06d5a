"""The smoke check: one real `/v1/chat/completions` and one `/v1/completions` request per served model
through an OpenAI-compatible endpoint, with the API key; each must answer 200 with non-empty text.

One implementation, two runners: `llmcap verify --smoke ENDPOINT` imports `check`, and the deployment's
smoke Job (infra/kubernetes/smoke.py) runs this file's text as a script in the router's image (python:3.12-slim),
configured by environment variables (`main`). So it imports the standard library only
(tests/test_smoke.py runs it isolated), and every read is bounded: `MAX_ANSWER_BYTES` per answer, a
per-request timeout, and an overall deadline until which refused connections, 5xx answers and
unknown models (the router lists a model once it discovered an engine serving it) are retried.
It prints one line: `smoke: ok ...`, or `smoke: FAIL <reason>` (exit 1)."""

from __future__ import annotations

import functools
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

MAX_ANSWER_BYTES = 1 << 20  # a 16-token answer streams a few KiB; a larger body is not an answer
MAX_TOKENS = 16  # enough to tell an answer from an empty one
REQUEST_TIMEOUT_S = 120.0  # one request, first byte to last (a cold engine compiles its first batch)
RETRY_PAUSE_S = 10.0
PROMPT = "Say hello."
RETRIED_STATUSES = (404, 429, 500, 502, 503, 504)  # 404: the router has not discovered the model yet


class SmokeFailure(Exception):
    """A request that did not answer as it must; its text is the one-line reason."""


@dataclass(frozen=True)
class Answer:
    model: str
    path: str
    text: str
    seconds: float


def _request(base: str, path: str, api_key: str, model: str, timeout_s: float) -> Answer:
    chat = path.endswith("chat/completions")
    body: dict[str, object] = {"model": model, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": True}
    if chat:
        body["messages"] = [{"role": "user", "content": PROMPT}]
    else:
        body["prompt"] = PROMPT
    req = urllib.request.Request(
        base.rstrip("/") + path, data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
                 "Accept-Encoding": "identity"})
    start = time.monotonic()
    pieces: list[str] = []
    read = 0
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 (the endpoint is the caller's)
        while True:
            if time.monotonic() - start > timeout_s:
                raise SmokeFailure(f"{path} {model}: no end of the answer within {timeout_s:g} s")
            line = resp.readline(MAX_ANSWER_BYTES - read + 1)
            if not line:
                break
            read += len(line)
            if read > MAX_ANSWER_BYTES:
                raise SmokeFailure(f"{path} {model}: answer larger than {MAX_ANSWER_BYTES} bytes")
            text = line.decode("utf-8", "replace").strip()
            if not text.startswith("data:"):
                continue
            data = text[5:].strip()
            if data == "[DONE]":
                break
            pieces.append(_chunk_text(data, chat, path, model))
    answer = "".join(pieces).strip()
    if not answer:
        raise SmokeFailure(f"{path} {model}: HTTP 200 with an empty answer")
    return Answer(model, path, answer, time.monotonic() - start)


def _chunk_text(data: str, chat: bool, path: str, model: str) -> str:
    try:
        obj = json.loads(data)
    except ValueError:
        raise SmokeFailure(f"{path} {model}: a stream event that is not JSON") from None
    if not isinstance(obj, dict):
        raise SmokeFailure(f"{path} {model}: a stream event that is not an object")
    if obj.get("model") not in (None, model):
        raise SmokeFailure(f"{path} {model}: answered by model {obj.get('model')!r}")
    out = []
    for c in obj.get("choices") or []:
        if not isinstance(c, dict):
            continue
        piece = (c.get("delta") or {}).get("content") if chat else c.get("text")
        if isinstance(piece, str):
            out.append(piece)
    return "".join(out)


def check(base: str, api_key: str, models: list[str], wait_s: float,
          timeout_s: float = REQUEST_TIMEOUT_S, pause_s: float = RETRY_PAUSE_S) -> list[Answer]:
    """Both requests for every model; retries what may still be starting until `wait_s` has passed,
    then raises SmokeFailure with the last reason."""
    if not models:
        raise SmokeFailure("no served model to ask")
    deadline = time.monotonic() + wait_s
    answers: list[Answer] = []
    for model in models:
        for path in ("/v1/chat/completions", "/v1/completions"):
            answers.append(_until(deadline, functools.partial(_ask, base, path, api_key, model, deadline,
                                                             timeout_s), pause_s))
    return answers


def _ask(base: str, path: str, api_key: str, model: str, deadline: float, timeout_s: float) -> Answer:
    return _request(base, path, api_key, model, min(timeout_s, max(deadline - time.monotonic(), 1.0)))


def _until(deadline: float, call: Callable[[], Answer], pause_s: float) -> Answer:
    last = ""
    while True:
        try:
            return call()
        except urllib.error.HTTPError as e:
            body = e.read(200).decode("utf-8", "replace").replace("\n", " ")
            last = f"HTTP {e.code} from {e.url}: {body}"
            if e.code not in RETRIED_STATUSES:
                raise SmokeFailure(last) from None
        except (urllib.error.URLError, OSError) as e:
            last = f"no answer: {getattr(e, 'reason', e)}"
        if time.monotonic() + pause_s > deadline:
            raise SmokeFailure(f"not served before the deadline; last: {last}")
        time.sleep(pause_s)


def main() -> int:
    """The smoke Job's entry: SMOKE_URL, SMOKE_MODELS (JSON list), SMOKE_WAIT_S, VLLM_API_KEY."""
    try:
        answers = check(os.environ["SMOKE_URL"], os.environ["VLLM_API_KEY"],
                        json.loads(os.environ["SMOKE_MODELS"]), float(os.environ["SMOKE_WAIT_S"]))
    except SmokeFailure as e:
        line = f"smoke: FAIL {e}"
        print(line, flush=True)
        try:
            with open("/dev/termination-log", "w", encoding="utf-8") as f:  # kubectl describe shows it
                f.write(line)
        except OSError:
            pass
        return 1
    print("smoke: ok " + "; ".join(f"{a.model} {a.path} {a.seconds:.1f} s" for a in answers), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
