"""Sweep specifications: a TOML file or a dict -> validated :class:`Spec` -> list of cells.

A spec names workloads, clusters (presets and their variations), methods with parameters,
seeds and limits; the cartesian product of those, minus the ``exclude`` filters, gives the
cells. Everything is checked before any cell runs, and an error names the spec's line.

Keys of a spec (TOML top level, or dict keys)::

    name = "bandwidth"            # progress output; results/NAME (letters, digits, -_. only)
    workloads = ["transformer:300", "msr:op_bert3_inference", "path/to/graph.json"]
    seeds = [0]                   # each method runs once per seed
    time_limit = 10               # seconds given to each solver
    cell_timeout = 60             # hard wall-clock limit of a cell (default 2 x time_limit + 30)
    measure = false               # also run each plan on local TensorFlow devices
    congestion = true             # simulate with link congestion
    objective = "makespan_ms"     # the column the analysis ranks by

    [clusters]
    presets = ["4xV100-nvlink"]   # "own": the workload file's own cluster (MSR workloads)
    devices = [2, 4]              # device counts (first n devices, or the preset repeated)
    bandwidth_scale = [0.5, 1, 2] # every link's bandwidth times this
    latency_scale = [1]           # every link's latency times this
    memory_fraction = [0.5]       # device memory = this fraction of the model's live footprint

    [methods]                     # name = {parameters}; a label with method = "..." inside
    m_topo = {}
    pesto60 = {method = "pesto", n_vertices = 60}
    expert = {split = "msr:experts/bert24_inference_expert",
              workloads = ["msr:layer_bert24_inference"]}

    [[exclude]]                   # drop the cells that match every key given
    method = "pesto60"
    devices = [8]

Examples
--------
>>> from workbench.sweep import Spec
>>> s = Spec.from_dict({"workloads": ["diamond", "pesto_fig2"],
...                     "clusters": {"presets": ["2xV100-pcie"], "devices": [2, 3]},
...                     "methods": {"single": {}, "m_topo": {}},
...                     "exclude": [{"method": "single", "devices": 3}]})
>>> len(s.cells())
6
>>> c = s.cells()[0]
>>> (c.workload, c.preset, c.devices, c.method, c.seed)
('diamond', '2xV100-pcie', 2, 'single', 0)
>>> Spec.from_dict({"workloads": ["diamond"], "methods": {"nope": {}}})
Traceback (most recent call last):
...
workbench.errors.SweepError: spec <dict>, methods.nope: unknown method 'nope'; valid methods: ...
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import math
import re
import tomllib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import SweepError, WorkbenchError

__all__ = ["KEY_COLUMNS", "MAX_CELLS", "MAX_SECONDS", "Cell", "Spec", "check_name",
           "check_seconds", "default_cell_timeout", "load_spec"]

KEY_COLUMNS = ["workload", "preset", "devices", "bandwidth_scale", "latency_scale",
               "memory_fraction", "method", "solver", "params", "seed", "time_limit",
               "measure", "congestion"]
"""The columns that identify a cell (with the workbench version they make its ``key``)."""

MAX_CELLS = 100_000
"""Default largest grid :meth:`Spec.cells` builds (``--max-cells N`` raises it)."""

MAX_SECONDS = 7 * 24 * 3600.0
"""Largest ``time_limit`` and ``cell_timeout`` of a spec (a week): a cell's hard limit must be a
deadline the operating system can wait for (``1e12`` s overflowed it and failed every cell)."""


def check_seconds(value, what: str) -> float:
    """``value`` as seconds if it is a number in (0, :data:`MAX_SECONDS`], else a SweepError
    naming ``what`` (``true`` is not 1 s).

    >>> check_seconds(10, "time_limit")
    10.0
    >>> check_seconds(True, "time_limit")
    Traceback (most recent call last):
    ...
    workbench.errors.SweepError: time_limit must be a positive number of seconds (at most 604800, a week), got True
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not 0 < value <= MAX_SECONDS:
        raise SweepError(f"{what} must be a positive number of seconds (at most "
                         f"{MAX_SECONDS:g}, a week), got {value!r}")
    return float(value)

_TOP = {"name", "description", "workloads", "clusters", "methods", "seeds", "time_limit",
        "cell_timeout", "measure", "measure_options", "congestion", "objective", "exclude",
        "filter"}
_CLUSTER_KEYS = {"presets", "devices", "bandwidth_scale", "latency_scale", "memory_fraction"}
_RESERVED = {"method", "workloads"}  # keys of a [methods] entry that are not solver params


def _version() -> str:
    from .. import __version__

    return __version__


@dataclass(frozen=True)
class Cell:
    """One point of the grid: a workload on a cluster variation, one method, one seed.

    ``devices`` 0 keeps the preset's devices; ``memory_fraction`` NaN keeps its memory.
    ``method`` is the label used in tables, ``solver`` the registered method it runs.
    """

    workload: str
    preset: str
    devices: int
    bandwidth_scale: float
    latency_scale: float
    memory_fraction: float
    method: str
    solver: str
    params: str  # canonical JSON of the solver parameters
    seed: int
    time_limit: float
    measure: bool
    congestion: bool
    cell_timeout: float = field(default=math.inf, compare=False)
    measure_options: str = field(default="{}", compare=False)

    @property
    def key(self) -> str:
        """Hash of the cell's parameters and the workbench version (skips done cells on resume).

        >>> c = Cell("diamond", "2xV100-pcie", 0, 1.0, 1.0, math.nan, "single", "single",
        ...          "{}", 0, 10.0, False, True)
        >>> len(c.key), c.key == Cell(**{**asdict(c)}).key
        (16, True)
        """
        d = {k: getattr(self, k) for k in KEY_COLUMNS}
        d["memory_fraction"] = None if math.isnan(self.memory_fraction) else self.memory_fraction
        d["version"] = _version()
        blob = json.dumps(d, sort_keys=True, separators=(",", ":"))
        return hashlib.sha1(blob.encode()).hexdigest()[:16]

    def as_dict(self) -> dict:
        return asdict(self)


def _line(text: str | None, *needles: str) -> str:
    """`` line N`` of the first line holding every needle (empty when unknown)."""
    if not text:
        return ""
    for i, ln in enumerate(text.splitlines(), 1):
        code = ln.split("#", 1)[0]
        if all(n in code for n in needles):
            return f", line {i}"
    return ""


def _int(x) -> int:
    """An integer of a spec: ``true`` and ``1.7`` are not integers (int() took them as 1).

    >>> _int(3), _int(4.0)
    (3, 4)
    """
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(x)
    if not math.isfinite(x) or x != int(x):
        raise ValueError(x)
    return int(x)


def _float(x) -> float:
    """A number of a spec (not a bool, not a string)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(x)
    return float(x)


def _as_list(v) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


@dataclass
class Spec:
    """A validated sweep specification (see the module docstring for its keys)."""

    workloads: list
    presets: list
    devices: list
    bandwidth_scale: list
    latency_scale: list
    memory_fraction: list
    methods: dict  # label -> (solver, params, workloads or None)
    seeds: list
    time_limit: float
    cell_timeout: float
    measure: bool
    congestion: bool
    name: str = "sweep"
    description: str = ""
    objective: str = "makespan_ms"
    exclude: list = field(default_factory=list)
    filter: Callable | None = None
    measure_options: dict = field(default_factory=dict)
    source: str = "<dict>"

    # ------------------------------------------------------------------ building
    @classmethod
    def from_toml(cls, path) -> Spec:
        """Read and validate a TOML spec file."""
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as e:
            raise SweepError(f"cannot read sweep spec {str(p)!r}: {e.strerror or e}") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise SweepError(f"spec {p}: not valid TOML: {e}") from None
        return cls.from_dict(data, source=str(p), text=text)

    @classmethod
    def from_dict(cls, data: dict, *, source: str = "<dict>", text: str | None = None) -> Spec:
        """Validate a spec given as a dict (``text``: the TOML it came from, for line numbers)."""
        if not isinstance(data, dict):
            raise SweepError(f"spec {source}: expected a table of keys, got {type(data).__name__}")

        def err(what: str, msg: str, *needles: str) -> SweepError:
            return SweepError(f"spec {source}{_line(text, *needles)}, {what}: {msg}")

        for k in data:
            if k not in _TOP:
                raise err(k, f"unknown key {k!r}; valid keys: {', '.join(sorted(_TOP))}", k)
        workloads = [str(w) for w in _as_list(data.get("workloads", []))]
        if not workloads:
            raise err("workloads", "no workloads given", "workloads")
        clusters = data.get("clusters", {})
        if not isinstance(clusters, dict):
            raise err("clusters", "expected a table", "clusters")
        for k in clusters:
            if k not in _CLUSTER_KEYS:
                raise err(f"clusters.{k}", f"unknown key {k!r}; valid keys: "
                          f"{', '.join(sorted(_CLUSTER_KEYS))}", k)
        def nums(key, default, conv):
            try:
                return [conv(x) for x in _as_list(clusters.get(key, default))]
            except (TypeError, ValueError):
                raise err(f"clusters.{key}", f"expected {'integers' if conv is _int else 'numbers'}"
                          f", got {clusters.get(key)!r}", key) from None

        presets = [str(p) for p in _as_list(clusters.get("presets", ["4xV100-nvlink"]))]
        devices = nums("devices", [0], _int)
        bw = nums("bandwidth_scale", [1.0], _float)
        lat = nums("latency_scale", [1.0], _float)
        memf = nums("memory_fraction", [None],
                    lambda x: math.nan if x is None or (x == 0 and not isinstance(x, bool))
                    else _float(x))
        for name, vals in (("devices", devices), ("bandwidth_scale", bw),
                           ("latency_scale", lat)):
            for v in vals:
                if not (v >= 0 and math.isfinite(v)) or (name != "devices" and v == 0) \
                        or (name == "latency_scale" and v < 0):
                    raise err(f"clusters.{name}", f"bad value {v!r} (must be positive)", name)
        for v in memf:
            if not math.isnan(v) and not v > 0:
                raise err("clusters.memory_fraction", f"bad value {v!r} (must be > 0)",
                          "memory_fraction")
        methods_in = data.get("methods", {})
        if not isinstance(methods_in, dict) or not methods_in:
            raise err("methods", "expected a non-empty table of method = {parameters}",
                      "methods")
        methods = {}
        for label, params in methods_in.items():
            if not isinstance(params, dict):
                raise err(f"methods.{label}", "expected a table of parameters", label)
            params = dict(params)
            solver = str(params.pop("method", label))
            only = params.pop("workloads", None)
            methods[label] = (solver, params, None if only is None else
                              [str(w) for w in _as_list(only)])
        try:
            seeds = [_int(s) for s in _as_list(data.get("seeds", [0]))]
        except (TypeError, ValueError):
            raise err("seeds", f"expected integers, got {data.get('seeds')!r}", "seeds") from None
        if any(s < 0 for s in seeds):
            raise err("seeds", f"seeds must be >= 0, got {min(seeds)}", "seeds")
        tl, ct = data.get("time_limit", 30.0), data.get("cell_timeout")
        for key, val in (("time_limit", tl), ("cell_timeout", ct)):
            try:
                _ = val is None or check_seconds(val, key)
            except SweepError as e:
                raise err(key, str(e).removeprefix(f"{key} "), key) from None
        tl = None if tl is None else float(tl)
        ct = default_cell_timeout(tl) if ct is None else ct
        for key in ("measure", "congestion"):  # "no" and "false" are truthy strings
            if key in data and not isinstance(data[key], bool):
                raise err(key, f"must be true or false, got {data[key]!r}", key)
        exclude = data.get("exclude", [])
        if isinstance(exclude, dict):
            exclude = [exclude]
        valid_ex = set(KEY_COLUMNS)
        for ex in exclude:
            for k in ex:
                if k not in valid_ex:
                    raise err("exclude", f"unknown key {k!r}; valid keys: "
                              f"{', '.join(KEY_COLUMNS)}", k)
        filt = data.get("filter")
        if filt is not None and not callable(filt):
            raise err("filter", "must be a callable cell -> bool (dict specs only)", "filter")
        spec = cls(workloads=workloads, presets=presets, devices=devices, bandwidth_scale=bw,
                   latency_scale=lat, memory_fraction=memf, methods=methods, seeds=seeds,
                   time_limit=tl, cell_timeout=float(ct),
                   measure=bool(data.get("measure", False)),
                   congestion=bool(data.get("congestion", True)),
                   name=str(data.get("name", Path(source).stem if source != "<dict>"
                                     else "sweep")),
                   description=str(data.get("description", "")),
                   objective=str(data.get("objective", "makespan_ms")), exclude=list(exclude),
                   filter=filt, measure_options=dict(data.get("measure_options", {})),
                   source=source)
        spec._check(err)
        return spec

    def with_time_limit(self, seconds) -> None:
        """Set the solvers' ``time_limit`` (``--time-limit``), checked as the spec's is; a cell
        timeout left to its default follows it (else a longer limit would time every cell out).
        """
        tl = check_seconds(seconds, "time_limit")
        if self.cell_timeout == default_cell_timeout(self.time_limit):
            self.cell_timeout = default_cell_timeout(tl)
        self.time_limit = tl

    def _check(self, err) -> None:
        """Every name resolves and every parameter exists, before any cell runs."""
        from ..cluster import Cluster
        from ..solvers import SOLVERS
        from ..solvers.params import check as check_params
        from ..workloads import check as check_workload

        try:
            check_name(self.name)
        except SweepError as e:
            raise err("name", str(e), "name") from None
        if self.objective not in ("makespan_ms", "max_load_ms"):
            raise err("objective", f"must be 'makespan_ms' or 'max_load_ms', got "
                      f"{self.objective!r}", "objective")
        own = {}
        for w in self.workloads:
            try:
                own[w] = check_workload(w)
            except WorkbenchError as e:
                raise err("workloads", f"workload {w!r}: {e}", f'"{w}"') from None
        for p in self.presets:
            if p == "own":
                lacking = [w for w, has in own.items() if not has]
                if lacking:
                    raise err("clusters.presets", f"preset 'own' needs workloads that carry a "
                              f"cluster (MSR files); {lacking[0]!r} has none", '"own"')
                continue
            try:
                Cluster.preset(p)
            except WorkbenchError as e:
                raise err("clusters.presets", str(e), f'"{p}"') from None
        for label, (solver, params, only) in self.methods.items():
            if solver not in SOLVERS:
                raise err(f"methods.{label}", f"unknown method {solver!r}; valid methods: "
                          f"{', '.join(SOLVERS)}", label)
            func = SOLVERS[solver].func
            sig = inspect.signature(func)
            valid = [n for n, q in list(sig.parameters.items())[2:]
                     if q.kind is inspect.Parameter.KEYWORD_ONLY
                     and n not in ("time_limit", "seed", "progress")]
            if not any(q.kind is q.VAR_KEYWORD for q in sig.parameters.values()):
                for k in params:
                    if k not in valid:
                        raise err(f"methods.{label}", f"method {solver!r} has no parameter "
                                  f"{k!r}; its parameters: {', '.join(valid) or 'none'}",
                                  label, k)
            try:  # types and ranges, as workbench.solve checks them before running
                check_params(solver, SOLVERS[solver].parameters(), params)
            except WorkbenchError as e:
                bad = next((k for k in params if f"parameter {k} " in str(e)
                            or f"parameter {k}:" in str(e)), label)
                raise err(f"methods.{label}", str(e), label, bad) from None
            missing = [n for n in SOLVERS[solver].needs if n not in params]
            if missing:
                raise err(f"methods.{label}", f"method {solver!r} needs parameter "
                          f"{missing[0]!r}", label)
            for w in only or []:
                if w not in self.workloads:
                    raise err(f"methods.{label}", f"workloads names {w!r}, which is not in "
                              f"the spec's workloads", f'"{w}"')
            try:
                json.dumps(params)
            except TypeError as e:
                raise err(f"methods.{label}", f"parameters must be plain data: {e}",
                          label) from None

    # ------------------------------------------------------------------ cells
    def n_cells(self) -> int:
        """Cells of the grid before ``exclude`` and ``filter``, counted without building them.

        >>> Spec.from_dict({"workloads": ["diamond"], "seeds": list(range(100_000)),
        ...                 "clusters": {"bandwidth_scale": [1 + i for i in range(1000)]},
        ...                 "methods": {"single": {}}}).n_cells()
        100000000
        """
        rest = math.prod(len(x) for x in (self.presets, self.devices, self.bandwidth_scale,
                                          self.latency_scale, self.memory_fraction, self.seeds))
        return rest * sum(len(self.workloads) if only is None else
                          sum(w in only for w in self.workloads)
                          for _, _, only in self.methods.values())

    def results_path(self, root="results") -> Path:
        """``root/NAME``, the default results folder (the name checked by :func:`check_name`).

        >>> Spec.from_dict({"workloads": ["diamond"], "methods": {"single": {}},
        ...                 "name": "bw-1.5"}).results_path().as_posix()
        'results/bw-1.5'
        """
        return Path(root) / check_name(self.name)

    def cells(self, max_cells: int | None = None) -> list[Cell]:
        """The cartesian product of the grid, minus ``exclude`` matches and ``filter`` rejects.

        A grid of more than ``max_cells`` cells (default :data:`MAX_CELLS`; counted before it
        is built, see :meth:`n_cells`) is refused with its count.

        >>> Spec.from_dict({"workloads": ["diamond"], "seeds": list(range(1000)),
        ...                 "methods": {"single": {}}}).cells(max_cells=10)
        Traceback (most recent call last):
        ...
        workbench.errors.SweepError: spec <dict>: the grid has 1,000 cells (before exclude and filter), above the limit of 10; narrow the spec or raise the limit (--max-cells N, max_cells=N)
        """
        limit = MAX_CELLS if max_cells is None else max_cells
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise SweepError(f"max_cells must be an integer >= 1, got {max_cells!r}")
        n = self.n_cells()
        if n > limit:
            raise SweepError(f"spec {self.source}: the grid has {n:,} cells (before exclude and "
                             f"filter), above the limit of {limit:,}; narrow the spec or raise "
                             f"the limit (--max-cells N, max_cells=N)")
        out = []
        grid = itertools.product(self.workloads, self.presets, self.devices,
                                 self.bandwidth_scale, self.latency_scale, self.memory_fraction,
                                 self.methods.items(), self.seeds)
        mo = json.dumps(self.measure_options, sort_keys=True)
        for w, p, n, bw, lat, mf, (label, (solver, params, only)), seed in grid:
            if only is not None and w not in only:
                continue
            c = Cell(w, p, n, bw, lat, mf, label, solver, json.dumps(params, sort_keys=True),
                     seed, self.time_limit if self.time_limit is not None else math.inf,
                     self.measure, self.congestion, self.cell_timeout, mo)
            if any(_matches(c, ex) for ex in self.exclude):
                continue
            if self.filter is not None and not self.filter(c):
                continue
            out.append(c)
        return out


def default_cell_timeout(time_limit: float | None) -> float:
    """A cell's hard limit when the spec sets none: twice the solver's limit plus 30 s.

    >>> default_cell_timeout(10.0), default_cell_timeout(None)
    (50.0, 150.0)
    """
    return 2 * (time_limit or 60.0) + 30.0


def check_name(name) -> str:
    """``name`` if it is safe as one path component (letters, digits, ``-_.``; not empty, no
    ``..``, not ``.``), else a SweepError: a spec's name becomes its results folder.

    >>> check_name("bandwidth_v2.1")
    'bandwidth_v2.1'
    >>> check_name("../../../tmp/escaped")
    Traceback (most recent call last):
    ...
    workbench.errors.SweepError: spec name '../../../tmp/escaped' cannot name a results folder: use letters, digits and - _ . only (no '..', not empty)
    """
    if not (isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", name)
            and ".." not in name and name != "."):
        raise SweepError(f"spec name {name!r} cannot name a results folder: use letters, "
                         f"digits and - _ . only (no '..', not empty)")
    return name


def _matches(cell: Cell, ex: dict) -> bool:
    for k, v in ex.items():
        have = getattr(cell, k)
        if not any(have == x or (isinstance(have, float) and isinstance(x, (int, float))
                                 and math.isclose(have, x)) for x in _as_list(v)):
            return False
    return True


def load_spec(spec) -> Spec:
    """A :class:`Spec` from a Spec, a dict, a TOML path, or the name of a bundled spec.

    >>> load_spec("bandwidth").name
    'bandwidth'
    """
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, dict):
        return Spec.from_dict(spec)
    p = Path(spec)
    if p.exists():
        return Spec.from_toml(p)
    bundled = Path(__file__).resolve().parents[2] / "sweeps" / f"{spec}.toml"
    if re.fullmatch(r"[\w.-]+", str(spec)) and bundled.exists():
        return Spec.from_toml(bundled)
    known = sorted(q.stem for q in bundled.parent.glob("*.toml")) if bundled.parent.exists() \
        else []
    raise SweepError(f"no sweep spec {str(spec)!r}: not a file, nor a bundled spec "
                     f"({', '.join(known) or 'none found'})")
