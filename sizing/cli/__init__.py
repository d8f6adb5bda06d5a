"""The `llmcap` command line: `app` registers the commands, one module per command group. The console
script is `llmcap = "sizing.cli:main"`; `main` imports the app only when called, so importing a
command module (`sizing.cli.plan_cmd`) does not import every other command."""

from __future__ import annotations


def main() -> None:
    from sizing.cli.app import main as app_main

    app_main()
