"""Reading the ferry lab's results (``results.json``) into pandas DataFrames.

The document is described by docs/results.schema.json in ferry's repository::

    {"schema": 1, "ferry_version", "suite": {"level", "command", "seconds", "started_unix_s"},
     "runs": [{"step", "experiment", "status", "note", "seconds", "results"}]}

where each run's ``results`` is one experiment's results, ``{"schema", "ferry_version",
"experiment", "machine", "request", "config", "rows"}`` -- the same document that
``ferry lab EXPERIMENT --json FILE`` writes alone, which ``load`` reads too.

pandas is imported only by ``load`` (``pip install pandas``); ``read`` needs nothing.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Union

#: The version of the results format this module reads (ferry's ``SCHEMA_VERSION``).
SCHEMA_VERSION = 1

#: The largest document read, as ``ferry lab report`` allows.
MAX_BYTES = 256 << 20

#: The file name of the document in a report directory.
FILE = "results.json"

PathLike = Union[str, "os.PathLike[str]"]


class SchemaError(ValueError):
    """The file is not a results document this version of ferry reads."""


class Results(Dict[str, Any]):
    """One DataFrame per step that ran (``results["latency"]``), keyed by step name.

    Attributes: ``suite`` (how the suite was run: level, command, seconds, started_unix_s; None
    for a single experiment's document), ``machine`` (what it was measured on), ``runs`` (a
    DataFrame of every step with its experiment, status, note and seconds, including those that
    failed or were left out), ``ferry_version``, ``schema``, ``path``, and per step
    ``experiments``, ``requests`` and ``configs``. Each DataFrame's ``attrs`` also holds its
    step's ``experiment``, ``request``, ``config`` and ``machine``.
    """

    suite: Optional[Dict[str, Any]]
    machine: Optional[Dict[str, Any]]
    runs: Any
    ferry_version: str
    schema: int
    path: str
    experiments: Dict[str, str]
    requests: Dict[str, Any]
    configs: Dict[str, Any]

    def __repr__(self) -> str:
        steps = ", ".join(f"{k}: {len(v)} rows" for k, v in self.items())
        host = (self.machine or {}).get("hostname", "unknown")
        return f"<ferry.lab.Results {self.path} on {host}: {steps}>"


def _document_path(path: PathLike) -> str:
    p = os.fspath(path)
    return os.path.join(p, FILE) if os.path.isdir(p) else p


def _check_schema(value: Any, where: str) -> None:
    if isinstance(value, list):
        raise SchemaError(
            f"{where} is in the format of ferry before results documents had a schema; "
            "measure again with this ferry"
        )
    if not isinstance(value, dict) or "schema" not in value:
        raise SchemaError(f'{where} is not a ferry lab results document (no "schema")')
    version = value["schema"]
    if version != SCHEMA_VERSION:
        raise SchemaError(
            f"{where} is in version {version} of the results format; "
            f"this ferry reads version {SCHEMA_VERSION}"
        )


def read(path: PathLike) -> Dict[str, Any]:
    """The document as plain Python values, its schema version checked.

    ``path`` is a results.json, a report directory holding one, or one experiment's JSON
    (``ferry lab latency --json FILE``).
    """
    file = _document_path(path)
    if os.path.exists(file) and not os.path.isfile(file):
        raise SchemaError(f"{file} is not a regular file")
    # No more bytes than a document holds are read, whatever its size says (a device has none).
    with open(file, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise SchemaError(f"{file} is more than a results document holds ({MAX_BYTES} bytes)")
    try:
        value = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SchemaError(f"{file} is not JSON: {e}") from None
    _check_schema(value, file)
    return value


def _runs(document: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The suite's runs; a single experiment's document as one run named after it."""
    if "runs" in document:
        return list(document["runs"])
    if "experiment" in document and "rows" in document:
        name = document["experiment"]
        return [
            {"step": name, "experiment": name, "status": "ok", "seconds": None,
             "results": document}
        ]
    raise SchemaError("the document has neither runs (a suite) nor rows (an experiment)")


def load(path: PathLike) -> Results:
    """Reads results into pandas DataFrames: one per step that ran, rows flattened with
    ``pandas.json_normalize`` (nested fields become ``a.b`` columns), with the suite and the
    machine beside them. See ``Results``.

    Raises ``SchemaError`` (a ``ValueError``) for a file of an unknown schema version or that
    is not a results document, and ``ImportError`` without pandas.
    """
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(f"ferry.lab.load needs pandas (pip install pandas): {e}") from None

    file = _document_path(path)
    document = read(file)
    out = Results()
    out.path = file
    out.schema = document["schema"]
    out.ferry_version = document.get("ferry_version", "")
    out.suite = document.get("suite")
    out.machine = None
    out.experiments, out.requests, out.configs = {}, {}, {}
    table = []
    for run in _runs(document):
        step = run["step"]
        results = run.get("results")
        table.append({k: run.get(k) for k in ("step", "experiment", "status", "note", "seconds")})
        if results is None:
            continue
        _check_schema(results, f"{file}, step {step}")
        frame = pd.json_normalize(results.get("rows", []))
        frame.attrs.update(
            experiment=results.get("experiment"),
            request=results.get("request"),
            config=results.get("config"),
            machine=results.get("machine"),
        )
        out[step] = frame
        out.experiments[step] = results.get("experiment", run.get("experiment"))
        out.requests[step] = results.get("request")
        out.configs[step] = results.get("config")
        if out.machine is None:
            out.machine = results.get("machine")
    out.runs = pd.DataFrame(table, columns=["step", "experiment", "status", "note", "seconds"])
    return out
