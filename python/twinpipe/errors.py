"""The errors twinpipe raises: bad input as ValueError subclasses, carrying
the message the `twinpipe` program prints after "twinpipe <command>: " (it
names the file and the JSON path or line) and that JSON path on its own.

    try:
        twinpipe.load_config({"model": {"layers": -1}})
    except twinpipe.ConfigError as e:
        e.json_path  # "/model/layers"
"""
import re

# "<source>: /model/layers: ..." or "runs.jsonl:3: /config/...: ..." (the
# source itself may be an absolute path: the JSON path follows ": ")
_JSON_PATH = re.compile(r": (/[^\s:]*):")


class _Located:
    def _locate(self, message):
        self.message = message
        found = _JSON_PATH.search(message)
        self.json_path = found.group(1) if found else None


class ConfigError(ValueError, _Located):
    """A config, calibration or table of runs that cannot be read (the
    program's exit code 2)."""

    def __init__(self, message):
        super().__init__(message)
        self._locate(message)


class ScheduleError(ValueError, _Located):
    """A schedule that cannot be built, read, exported or run (exit code 2)."""

    def __init__(self, message):
        super().__init__(message)
        self._locate(message)


class RuntimeFailure(RuntimeError):
    """A runtime failure (the program's exit code 1): a builder that fails,
    a model that does not fit."""

    def __init__(self, message):
        super().__init__(message)
        self.message = message
