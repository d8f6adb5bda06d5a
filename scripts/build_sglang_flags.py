"""Build infra/data/sglang_flags.yaml from the pinned SGLang release's own argument parser.

The only writer of infra/data/sglang_flags.yaml. SGLang's parser (`ServerArgs.add_cli_args`,
sglang/srt/server_args.py) cannot be imported on a machine without its GPU dependencies (torch,
triton, flashinfer, ...), so this script loads it from an unpacked wheel with every module outside
the argument definitions replaced by an inert stub, builds the real `argparse.ArgumentParser`
`python -m sglang.launch_server` uses (`prepare_server_args`: `argparse.ArgumentParser(prog="sglang
serve")`, allow_abbrev on), and writes every option string with its nargs, value type and choices.
Choice lists that come from a stubbed module (empty, or partial like `STUBBED + ["all"]`) are left
out and named under `choices_unread`. tests/test_sglang_args.py rebuilds an argparse parser from that file
and parses every rendered SGLang command line with it.

Needs `msgspec` importable (SGLang's config structs subclass msgspec.Struct):

    pip download sglang==0.5.23 --no-deps -d /tmp/sgl && unzip -q /tmp/sgl/sglang-*.whl -d /tmp/sgl/pkg
    pip install --target /tmp/sgl/deps msgspec
    PYTHONPATH=/tmp/sgl/deps python scripts/build_sglang_flags.py /tmp/sgl/pkg --version 0.5.23

With the same two folders, `LLMCAP_SGLANG_WHEEL_DIR=/tmp/sgl/pkg PYTHONPATH=/tmp/sgl/deps pytest
tests/test_sglang_args.py` also checks the committed file against the wheel (skipped otherwise).
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import os
import sys
import types
from datetime import date
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "infra" / "data" / "sglang_flags.yaml"
# the SGLang modules that define the arguments run for real; every other module is a stub
REAL_PREFIXES = ("sglang.srt.server_args", "sglang.srt.arg_groups", "sglang.srt.environ",
                 "sglang.srt.utils.network", "sglang.srt.runtime_context")


class _StubList(list):  # type: ignore[type-arg]
    """A list built from a stub (e.g. `STUBBED_CHOICES + ["all"]`): partial, so never written as choices."""


class _Stub:
    """Any attribute, call, decorator, base class or iteration of a stubbed module."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, *a: Any, **k: Any) -> Any:
        if len(a) == 1 and callable(a[0]) and not k:
            return a[0]  # used as a decorator
        return _Stub(self._name + "()")

    def __getattr__(self, n: str) -> Any:
        if n == "__version__":
            return "0.0.0"
        if n.startswith("__") and n.endswith("__"):
            raise AttributeError(n)
        return _Stub(f"{self._name}.{n}")

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)

    def __iter__(self) -> Any:
        return iter(())

    def __bool__(self) -> bool:
        return False

    def __or__(self, o: Any) -> Any:
        return self

    __ror__ = __or__

    def __getitem__(self, k: Any) -> Any:
        return self

    def __add__(self, o: Any) -> Any:
        return _StubList(o)

    __radd__ = __add__


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name == "__version__":
            return "0.0.0"
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Stub(f"{self.__name__}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, pkg: Path) -> None:
        self.pkg = pkg

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name.startswith(REAL_PREFIXES):
            return None
        if name != "sglang" and not name.startswith("sglang."):
            for f in sys.meta_path:
                if f is self:
                    continue
                try:
                    if f.find_spec(name, path, target) is not None:  # type: ignore[attr-defined]
                        return None
                except (ImportError, AttributeError, ValueError):
                    continue
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        m = _StubModule(spec.name)
        m.__path__ = [os.path.join(self.pkg, *spec.name.split("."))]
        return m

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def load_parser(pkg: Path) -> argparse.ArgumentParser:
    sys.path.insert(0, str(pkg))
    sys.meta_path.insert(0, _Finder(pkg))
    from sglang.srt.server_args import ServerArgs  # type: ignore[import-not-found]

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser


def describe(parser: argparse.ArgumentParser) -> tuple[dict[str, dict[str, Any]], list[str]]:
    flags: dict[str, dict[str, Any]] = {}
    unread: list[str] = []
    for a in parser._actions:
        if not a.option_strings or isinstance(a, argparse._HelpAction):
            continue
        entry: dict[str, Any] = {"dest": a.dest}
        if a.nargs == 0:
            entry["nargs"] = 0
        elif a.nargs is not None:
            entry["nargs"] = a.nargs
        if a.type in (int, float):
            entry["type"] = a.type.__name__
        if isinstance(a.choices, _StubList):
            unread.append(a.option_strings[0])
        elif a.choices is not None:
            try:
                choices = sorted(str(c) for c in a.choices)
            except TypeError:
                choices = []
            if choices:
                entry["choices"] = choices
            else:
                unread.append(a.option_strings[0])
        for opt in a.option_strings:
            flags[opt] = dict(entry)
    return dict(sorted(flags.items())), sorted(unread)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pkg", type=Path, help="an unpacked sglang wheel (the folder holding sglang/)")
    ap.add_argument("--version", required=True, help="the wheel's version, e.g. 0.5.23")
    ap.add_argument("--out", type=Path, default=OUT, help="where to write (default infra/data/sglang_flags.yaml)")
    ap.add_argument("--as-of", default=date.today().isoformat(), help="the date the wheel was read")
    args = ap.parse_args()
    flags, unread = describe(load_parser(args.pkg))
    doc = {
        "sglang_version": f"v{args.version}",
        "source": f"pypi.org/project/sglang/{args.version} (sglang-{args.version} wheel: "
                  "sglang/srt/server_args.py ServerArgs.add_cli_args, sglang/srt/arg_groups/fields/*.py; "
                  "built by scripts/build_sglang_flags.py)",
        "as_of": args.as_of,
        "allow_abbrev": True,
        "choices_unread": unread,
        "flags": flags,
    }
    header = ("# Every option of `python -m sglang.launch_server` in the pinned SGLang release (infra/data/\n"
              "# versions.yaml: sglang), read from that release's own argparse parser by\n"
              "# scripts/build_sglang_flags.py.\n"
              "# Do not edit by hand: rerun the script when the pin changes. tests/test_sglang_args.py parses every\n"
              "# rendered command with it.\n")
    args.out.write_text(header + yaml.safe_dump(doc, sort_keys=False, width=120, default_flow_style=None),
                        encoding="utf-8")
    print(f"wrote {args.out}: {len({e['dest'] for e in flags.values()})} options, "
          f"{len(flags)} option strings, {len(unread)} choice lists not read")


if __name__ == "__main__":
    main()
