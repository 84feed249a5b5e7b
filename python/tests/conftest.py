"""Shared by the twinpipe module's tests: where the sources and the program
are, and running the program (the reference every test compares with).

The tests skip, with a message, when the module was not built (no
pybind11-dev at configure time) or the program is missing."""
import os
import pathlib
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("TWINPIPE_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BINARY = pathlib.Path(os.environ.get("TWINPIPE_BINARY", SOURCE_DIR / "build" / "twinpipe"))


def import_twinpipe():
    """The twinpipe package with its C++ extension, or a module-level skip."""
    try:
        import twinpipe
    except ImportError as e:
        pytest.skip(f"twinpipe package not importable (build the project; PYTHONPATH=build/python): {e}",
                    allow_module_level=True)
    if not twinpipe.available():
        pytest.skip("twinpipe's C++ extension was not built (configure with Debian's pybind11-dev installed)",
                    allow_module_level=True)
    return twinpipe


@pytest.fixture
def cli():
    """cli(*args) -> CompletedProcess of build/twinpipe (text)."""
    if not BINARY.exists():
        pytest.skip(f"the twinpipe program is not built at {BINARY}")

    def run(*args):
        return subprocess.run([str(BINARY), *map(str, args)], capture_output=True, text=True, timeout=300)

    return run


def cli_notes(process, command):
    """The notes a run printed on stderr, each after "twinpipe <command>: note: "."""
    prefix = f"twinpipe {command}: note: "
    return [line[len(prefix):] for line in process.stderr.splitlines() if line.startswith(prefix)]


def cli_error(process, command):
    """The message after "twinpipe <command>: " of a failed run."""
    prefix = f"twinpipe {command}: "
    lines = [line for line in process.stderr.splitlines() if line.startswith(prefix)]
    assert lines, f"no '{prefix}' line in stderr: {process.stderr!r}"
    return lines[-1][len(prefix):]
