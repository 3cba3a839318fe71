"""Load a script from tools/ or benchmarks/ as a module (neither is a package: their scripts run as
`python tools/X.py`, `python benchmarks/X.py`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools"


def load_tool(name: str, folder: str = "tools") -> ModuleType:
    """<folder>/<name>.py (tools/ unless named) as a fresh module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / folder / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
