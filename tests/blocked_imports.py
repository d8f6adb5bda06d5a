"""A prelude for a subprocess in which some packages are not importable, as after `pip install llmcap`
without an extra: a meta-path finder answers ModuleNotFoundError for the top-level names in argv[1]
(comma-separated; importlib.util.find_spec raises it too) and records each attempt in TRIED, so an import
tried and caught does not pass unseen. Used by tests/test_extras.py and tests/test_layering.py."""

BLOCKER = """
import sys
BLOCKED, TRIED = set(sys.argv[1].split(",")), []
class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            TRIED.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NotInstalled())
"""
