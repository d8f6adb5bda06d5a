"""`llmcap eval`: the quality gate against two fake OpenAI-compatible servers on loopback, one that answers
every GSM8K question right and one that answers one in ten wrong; the final-answer convention, the
statistics, resuming from the results file, and the vendored evaluation set."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.cli import app
from sizing.measure.evalset import BUNDLED_GSM8K, final_answer, load_evalset, normalise, paired_drop, wilson

ROOT = Path(__file__).resolve().parents[1]
# the project's shared material beside the checkout (../shared), or beside its worktrees folder
SHARED = next((p for p in (ROOT.parent / "shared" / "evalsets" / "gsm8k_test.jsonl",
                           ROOT.parent.parent / "shared" / "evalsets" / "gsm8k_test.jsonl") if p.exists()),
              ROOT.parent / "shared" / "evalsets" / "gsm8k_test.jsonl")
N = 60  # questions per test run: enough for a 10-point drop to be clear, quick on two cores


class FakeServer:
    """Answers chat completions with a worked answer ending in `#### N`; wrong (answer + 1) on every
    question whose position in the set is a multiple of `wrong_every` (0: never)."""

    def __init__(self, wrong_every: int = 0) -> None:
        items = load_evalset(limit=N)
        self.answers = {it.question: (it.answer, i) for i, it in enumerate(items)}
        self.wrong_every = wrong_every
        self.requests = 0
        self.bodies: list[dict] = []  # type: ignore[type-arg]
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def _send(self, doc: object) -> None:
                body = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._send({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

            def do_POST(self) -> None:
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests += 1
                outer.bodies.append(req)
                q = req["messages"][0]["content"].split("\n\n")[0]
                ans, i = outer.answers[q]
                if outer.wrong_every and i % outer.wrong_every == 0:
                    ans = str(int(ans) + 1)
                self._send({"choices": [{"message": {"role": "assistant",
                                                     "content": f"Let me think.\nSo it is {ans}.\n#### {ans}"}}]})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers() -> Iterator[tuple[FakeServer, FakeServer, FakeServer]]:
    right, right2, wrong = FakeServer(), FakeServer(), FakeServer(wrong_every=10)
    yield right, right2, wrong
    for s in (right, right2, wrong):
        s.close()


def cli(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return r.exit_code, r.stdout, r.stderr


def test_candidate_that_answers_right_passes(servers: tuple[FakeServer, FakeServer, FakeServer],
                                             tmp_path: Path) -> None:
    right, right2, _ = servers
    code, out, err = cli("eval", right2.url, "--reference", right.url, "--limit", str(N),
                         "--results", str(tmp_path / "r.jsonl"), "--format", "json")
    assert code == 0, out + err
    doc = json.loads(out)
    assert doc["passed"] and doc["drop"] == 0 and doc["reference"]["accuracy"] == 1.0
    body = right2.bodies[0]
    assert body["temperature"] == 0 and body["model"] == "fake-model"  # greedy, the model the server lists


def test_candidate_wrong_one_in_ten_fails_with_the_drop(servers: tuple[FakeServer, FakeServer, FakeServer],
                                                        tmp_path: Path) -> None:
    right, _, wrong = servers
    code, out, _ = cli("eval", wrong.url, "--reference", right.url, "--limit", str(N),
                       "--results", str(tmp_path / "r.jsonl"))
    assert code == 1
    assert "drop: 10.0 points" in out and "allowed 1" in out
    assert "eval: FAIL (candidate accuracy 10.0 points below the reference, more than 1)" in out
    assert "90.0%" in out and "100.0%" in out  # both accuracies, with their intervals beside them


def test_rerun_resumes_from_the_results_file(servers: tuple[FakeServer, FakeServer, FakeServer],
                                            tmp_path: Path) -> None:
    right, _, wrong = servers
    res = tmp_path / "r.jsonl"
    args = ["eval", wrong.url, "--reference", right.url, "--limit", "20", "--results", str(res), "--format", "json"]
    cli(*args)
    lines = res.read_text().splitlines()
    assert len(lines) == 40
    res.write_text("\n".join(lines[:25]) + "\n" + lines[25][:17])  # interrupted: a torn last line
    before = right.requests + wrong.requests
    code, out, _ = cli(*args)
    assert right.requests + wrong.requests - before == 15  # only what was missing (the torn one again)
    doc = json.loads(out)
    assert doc["complete"] and doc["judged"] == 20 and doc["drop"] == pytest.approx(0.10)


def test_the_drop_allowed_is_a_setting(servers: tuple[FakeServer, FakeServer, FakeServer], tmp_path: Path) -> None:
    right, _, wrong = servers
    code, out, _ = cli("eval", wrong.url, "--reference", right.url, "--limit", str(N), "--max-drop", "15",
                       "--results", str(tmp_path / "r.jsonl"))
    assert code == 0 and "eval: PASS" in out


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "set.jsonl"
    bad.write_text('{"question": "1+1?"}\n')
    code, _, err = cli("eval", "http://127.0.0.1:9", "--reference", "http://127.0.0.1:8", "--dataset", str(bad))
    assert code == 2 and err.count("\n") == 1 and "needs a string \"question\" and an \"answer\"" in err
    code, _, err = cli("eval", "http://127.0.0.1:9", "--reference", "http://127.0.0.1:9")
    assert code == 2 and "same server" in err


def test_final_answers_and_statistics() -> None:
    assert final_answer("so 3 + 4 = 7\n#### 1,200.00") == "1200"
    assert final_answer("The answer is $18.") == "18"
    assert final_answer("no number") is None
    assert normalise("-3.50") == "-3.5"
    lo, hi = wilson(90, 100)
    assert lo == pytest.approx(0.8256, abs=1e-3) and hi == pytest.approx(0.9448, abs=1e-3)
    drop, dlo, dhi = paired_drop([True] * 10, [True] * 9 + [False])
    assert drop == pytest.approx(0.1) and dlo < 0.1 < dhi


def test_bundled_gsm8k_is_the_published_test_set() -> None:
    items = load_evalset()
    assert len(items) == 1319 and items[0].answer == "18"
    digest = hashlib.sha256(BUNDLED_GSM8K.read_bytes()).hexdigest()
    readme = (BUNDLED_GSM8K.parent / "README.md").read_text()
    assert digest in readme and (BUNDLED_GSM8K.parent / "LICENSE-gsm8k").read_text().startswith("MIT")


def test_bundled_gsm8k_matches_shared_copy() -> None:
    if not SHARED.exists():
        pytest.skip(f"{SHARED} not present (only in the project's shared checkout)")
    assert SHARED.read_bytes() == BUNDLED_GSM8K.read_bytes()


def test_a_changed_set_never_reuses_an_answer(servers: tuple[FakeServer, FakeServer, FakeServer],
                                             tmp_path: Path) -> None:
    right, _, wrong = servers
    items = load_evalset(limit=10)
    res = tmp_path / "r.jsonl"
    for n, part in enumerate((items[:5], items[5:])):
        f = tmp_path / f"set{n}.jsonl"
        f.write_text("".join(json.dumps({"id": i, "question": it.question, "answer": it.answer}) + "\n"
                             for i, it in enumerate(part)))  # the same ids 0..4 in both sets
        before = right.requests + wrong.requests
        code, out, _ = cli("eval", wrong.url, "--reference", right.url, "--dataset", str(f), "--results", str(res),
                           "--format", "json")
        assert right.requests + wrong.requests - before == 10
        assert json.loads(out)["judged"] == 5
