"""What twinpipe's calls return: the program's JSON as a dict that keeps its
text (`.json`, byte for byte what `twinpipe <command> --json` prints), and a
simulation's result that also holds its timeline, draws itself as the SVG
timeline in a notebook and becomes a pandas DataFrame of ops.

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


class SimulationResult(JsonResult):
    """`simulate --json`'s figures; `.timeline`: the predicted trace's events
    (id, device, stream, kind, stage, microbatch, start_s, end_s, bytes);
    `.overflow`: the predicted out-of-memory message, or None."""

    def __init__(self, simulation):
        super().__init__(simulation.json())
        self._simulation = simulation
        self._trace = None
        self.overflow = simulation.overflow()

    @property
    def trace(self):
        """The native trace (`simulate --trace`), as a dict."""
        if self._trace is None:
            self._trace = json.loads(self._simulation.trace_json())
        return self._trace

    @property
    def timeline(self):
        return self.trace["events"]

    @property
    def schedule(self):
        """The schedule simulated (a twinpipe.Schedule)."""
        return self._simulation.schedule

    def trace_json(self):
        return self._simulation.trace_json()

    def chrome_json(self):
        """The Chrome / Perfetto trace (`simulate --chrome`)."""
        return self._simulation.chrome_json()

    def svg(self):
        """The SVG timeline `twinpipe render` draws of this trace."""
        return self._simulation.svg()

    def _repr_svg_(self):
        return self.svg()

    def to_dataframe(self):
        """The timeline's ops as a pandas DataFrame (pandas must be installed)."""
        try:
            import pandas
        except ImportError:
            raise ImportError("SimulationResult.to_dataframe needs pandas (pip install pandas, or "
                              "apt-get install python3-pandas)") from None
        return pandas.DataFrame(self.timeline)
