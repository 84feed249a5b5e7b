"""What twinpipe's calls return: the program's JSON as a dict that keeps its
text (`.json`, byte for byte what `twinpipe <command> --json` prints), and a
simulation's or an execution's result that also holds its trace, draws itself
as the SVG timeline in a notebook and becomes a pandas DataFrame of ops.

    r = twinpipe.simulate(config)
    r["step_time_s"]; r.timeline[0]["kind"]; r.to_dataframe()
"""
import json


class JsonResult(dict):
    """A JSON object as a dict; `.json` is its text as the program prints it."""

    def __init__(self, text):
        super().__init__(json.loads(text))
        self.json = text

    def save(self, path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.json)


class TracedResult(JsonResult):
    """A run's figures (`--json`) with its trace: `.trace` the native trace
    as a dict, `.timeline` its events (id, device, stream, kind, stage,
    microbatch, start_s, end_s, bytes); it draws itself in a notebook as the
    SVG timeline and becomes a pandas DataFrame of ops."""

    def __init__(self, native):
        super().__init__(native.json())
        self._native = native
        self._trace = None

    @property
    def trace(self):
        """The native trace (the command's --trace), as a dict."""
        if self._trace is None:
            self._trace = json.loads(self._native.trace_json())
        return self._trace

    @property
    def timeline(self):
        return self.trace["events"]

    @property
    def schedule(self):
        """The schedule run (a twinpipe.Schedule)."""
        return self._native.schedule

    def trace_json(self):
        return self._native.trace_json()

    def chrome_json(self):
        """The Chrome / Perfetto trace (the command's --chrome)."""
        return self._native.chrome_json()

    def svg(self):
        """The SVG timeline `twinpipe render` draws of this trace."""
        return self._native.svg()

    def _repr_svg_(self):
        return self.svg()

    def to_dataframe(self):
        """The timeline's ops as a pandas DataFrame (pandas must be installed)."""
        try:
            import pandas
        except ImportError:
            raise ImportError(f"{type(self).__name__}.to_dataframe needs pandas (pip install pandas, or "
                              "apt-get install python3-pandas)") from None
        return pandas.DataFrame(self.timeline)


class SimulationResult(TracedResult):
    """`simulate --json`'s figures and the predicted trace; `.overflow`: the
    predicted out-of-memory message, or None."""

    def __init__(self, simulation):
        super().__init__(simulation)
        self.overflow = simulation.overflow()


class ExecutionResult(TracedResult):
    """`execute --json`'s figures and the measured trace of the kept step;
    `.notes`: what the program notes before running; `.parameters`: every
    parameter after the last step, layer by layer."""

    def __init__(self, execution):
        super().__init__(execution)
        self.notes = list(execution.notes)
        self._parameters = None

    @property
    def parameters(self):
        if self._parameters is None:
            self._parameters = self._native.parameters
        return self._parameters
