"""The quality gate's runner (`llmcap eval`): every question of an evaluation set sent to the candidate and
the reference endpoint (OpenAI-compatible, greedy: temperature 0), the final answers matched exactly,
each answer appended to a results file as it arrives, so an interrupted run resumes where it stopped.

Bounded: at most `concurrency` requests in flight per endpoint, each within `request_timeout_s` (send to
last byte) and `MAX_BODY_BYTES`; no new request after `time_limit_s`. A failed request counts as a wrong
answer and is recorded with its error kind, never raised.

Owns: the requests, the results file, the summary. httpx is imported by the CLI's check and here only.
Units: seconds; accuracies are shares 0..1.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from sizing.errors import SpecError
from sizing.measure.evalset import EvalItem, final_answer, paired_drop, wilson
from sizing.measure.verify import Criterion

MAX_BODY_BYTES = 2**20  # one completion's JSON (512 tokens are a few KiB)
INSTRUCTION = "Solve the problem step by step. End with the final answer on its own line as '#### <number>'."
ROLES = ("reference", "candidate")


@dataclass(frozen=True)
class Endpoint:
    role: str  # reference | candidate
    url: str  # base URL, e.g. http://127.0.0.1:8000
    model: str


@dataclass(frozen=True)
class Settings:
    api: str = "chat"  # chat | completions
    max_tokens: int = 512
    concurrency: int = 8
    request_timeout_s: float = 120.0
    time_limit_s: float = 3600.0
    api_key: str | None = None


class Answer(BaseModel):
    """One line of the results file."""

    model_config = ConfigDict(extra="forbid")

    role: str
    endpoint: str
    model: str
    id: str
    question_sha: str  # sha256 of the question (first 16 hex digits): a changed set never reuses an answer
    expected: str
    predicted: str | None
    correct: bool
    error: str = ""


class Accuracy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: str
    endpoint: str
    answered: int
    correct: int
    errors: int
    accuracy: float
    ci95: tuple[float, float]  # Wilson


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: int  # in the evaluation set (as limited)
    judged: int  # answered by both
    reference: Accuracy
    candidate: Accuracy
    drop: float  # reference − candidate accuracy on the judged items (share)
    drop_ci95: tuple[float, float]  # paired normal interval
    max_drop: float  # share
    complete: bool
    passed: bool


# ---------------------------------------------------------------- the results file


def read_results(path: Path) -> list[Answer]:
    """The answers recorded so far; a torn last line (an interrupted append) is ignored."""
    if not path.exists():
        return []
    out: list[Answer] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(Answer.model_validate_json(line))
        except ValueError:
            continue
    return out


class ResultsFile:
    """Appends one whole JSON line per answer (a single write on an O_APPEND descriptor, then fsync)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if path.stat().st_size:  # finish a torn line so the next record starts on its own line
            with path.open("rb") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    os.write(self.fd, b"\n")

    def append(self, a: Answer) -> None:
        os.write(self.fd, (a.model_dump_json() + "\n").encode())
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


# ---------------------------------------------------------------- requests


def _body(ep: Endpoint, item: EvalItem, s: Settings) -> tuple[str, dict[str, Any]]:
    common = {"model": ep.model, "max_tokens": s.max_tokens, "temperature": 0.0, "top_p": 1.0, "seed": 0}
    if s.api == "completions":
        return "/v1/completions", {**common, "prompt": f"{INSTRUCTION}\n\nQuestion: {item.question}\nAnswer:"}
    return "/v1/chat/completions", {**common, "messages": [
        {"role": "user", "content": f"{item.question}\n\n{INSTRUCTION}"}]}


def _text(doc: Any, api: str) -> str:
    choice = doc["choices"][0]
    text = choice["text"] if api == "completions" else choice["message"]["content"]
    if not isinstance(text, str):
        raise ValueError("no text in the answer")
    return text


def question_sha(item: EvalItem) -> str:
    return hashlib.sha256(item.question.encode()).hexdigest()[:16]


def _key(ep: Endpoint, item: EvalItem) -> dict[str, str]:
    """What identifies an answer in the results file: endpoint, role, served model, item id and question."""
    return {"role": ep.role, "endpoint": ep.url, "model": ep.model, "id": item.id, "question_sha": question_sha(item)}


def _done(a: Answer) -> tuple[str, str, str, str, str]:
    return (a.role, a.endpoint, a.model, a.id, a.question_sha)


async def _ask(client: Any, ep: Endpoint, item: EvalItem, s: Settings) -> Answer:
    path, body = _body(ep, item, s)
    headers = {"Authorization": f"Bearer {s.api_key}"} if s.api_key else {}

    async def call() -> str:
        async with client.stream("POST", ep.url.rstrip("/") + path, json=body, headers=headers) as r:
            data = b""
            async for chunk in r.aiter_bytes():
                data += chunk
                if len(data) > MAX_BODY_BYTES:
                    raise ValueError(f"answer over {MAX_BODY_BYTES:,} bytes")
            if r.status_code != 200:
                raise ValueError(f"http-{r.status_code}")
            return _text(json.loads(data), s.api)

    try:
        text = await asyncio.wait_for(call(), s.request_timeout_s)
    except TimeoutError:
        return Answer(**_key(ep, item), expected=item.answer, predicted=None, correct=False, error="timeout")
    except Exception as e:  # noqa: BLE001 - any failure of one request is that request's wrong answer
        kind = str(e) if isinstance(e, ValueError) and str(e).startswith("http-") else e.__class__.__name__
        return Answer(**_key(ep, item), expected=item.answer, predicted=None, correct=False, error=kind[:200])
    got = final_answer(text)
    return Answer(**_key(ep, item), expected=item.answer, predicted=got, correct=got == item.answer)


async def _run(endpoints: list[Endpoint], todo: list[tuple[Endpoint, EvalItem]], s: Settings,
               sink: ResultsFile, tick: Callable[[], None]) -> None:
    import httpx

    deadline = time.monotonic() + s.time_limit_s
    sems = {ep.role: asyncio.Semaphore(s.concurrency) for ep in endpoints}
    async with httpx.AsyncClient(timeout=httpx.Timeout(s.request_timeout_s),
                                 headers={"Accept-Encoding": "identity"}) as client:
        async def one(ep: Endpoint, item: EvalItem) -> None:
            async with sems[ep.role]:
                if time.monotonic() > deadline:
                    return
                sink.append(await _ask(client, ep, item, s))
                tick()

        await asyncio.gather(*(one(ep, it) for ep, it in todo))


def evaluate(endpoints: list[Endpoint], items: list[EvalItem], s: Settings, results: Path,
             tick: Callable[[], None] = lambda: None, on_todo: Callable[[int], None] = lambda n: None) -> list[Answer]:
    """Ask every endpoint every item not yet in `results` (same endpoint URL and role); the answers now there."""
    done = {_done(a) for a in read_results(results)}
    todo = [(ep, it) for it in items for ep in endpoints if _done(Answer(**_key(ep, it), expected="",
                                                                          predicted=None, correct=False)) not in done]
    on_todo(len(todo))
    sink = ResultsFile(results)
    try:
        if todo:
            asyncio.run(_run(endpoints, todo, s, sink, tick))
    finally:
        sink.close()
    return read_results(results)


# ---------------------------------------------------------------- the verdict


def _accuracy(ep: Endpoint, answers: dict[str, Answer]) -> Accuracy:
    n, c = len(answers), sum(a.correct for a in answers.values())
    return Accuracy(role=ep.role, endpoint=ep.url, answered=n, correct=c,
                    errors=sum(bool(a.error) for a in answers.values()), accuracy=c / n if n else 0.0,
                    ci95=wilson(c, n))


def verdict(reference: Endpoint, candidate: Endpoint, items: list[EvalItem], answers: list[Answer],
            max_drop: float) -> Verdict:
    """Both accuracies on the items both answered, the paired drop, and whether the candidate is within
    `max_drop` (a share) of the reference. An incomplete run never passes."""
    if not 0 <= max_drop < 1:
        raise SpecError(f"--max-drop: must be between 0 and 100 points (got {max_drop * 100:g})")
    want = {r: {_done(Answer(**_key(ep, it), expected="", predicted=None, correct=False)) for it in items}
            for r, ep in (("reference", reference), ("candidate", candidate))}
    by = {r: {a.id: a for a in answers if _done(a) in want[r]} for r in want}
    both = [i for i in (it.id for it in items) if i in by["reference"] and i in by["candidate"]]
    ref = {i: by["reference"][i] for i in both}
    cand = {i: by["candidate"][i] for i in both}
    drop, lo, hi = paired_drop([ref[i].correct for i in both], [cand[i].correct for i in both]) if both \
        else (0.0, 0.0, 0.0)
    complete = len(both) == len(items)
    return Verdict(items=len(items), judged=len(both), reference=_accuracy(reference, ref),
                   candidate=_accuracy(candidate, cand), drop=drop, drop_ci95=(lo, hi), max_drop=max_drop,
                   complete=complete, passed=complete and drop <= max_drop + 1e-12)


def quality_criterion(path: Path) -> Criterion:
    """The quality gate as a `llmcap verify` criterion, from `llmcap eval --format json` output."""
    from sizing.user_files import read_user_file

    text = read_user_file(path, "eval verdict", "write one with llmcap eval ... --format json > eval.json")
    try:
        doc = json.loads(text)
        doc.pop("results", None)
        v = Verdict.model_validate(doc)
    except ValueError:
        raise SpecError(f"{path}: not the JSON of llmcap eval --format json") from None
    return Criterion("quality: accuracy drop <= max drop", v.drop * 100.0, v.max_drop * 100.0, "points", v.passed,
                     detail=f"reference {v.reference.accuracy:.1%}, candidate {v.candidate.accuracy:.1%} on "
                            f"{v.judged:,} of {v.items:,} questions" + ("" if v.complete else ", incomplete"))
