"""ferry.lab: the lab's results.json as pandas DataFrames, on a checked-in document made by
this ferry (tests/data: `ferry lab --smoke --skip` all but limits, latency and send-time, and
that run's latency.json) and on one `ferry lab --smoke` writes now."""

import json
import shutil
import subprocess

import pandas as pd
import pytest

import ferry.lab
from conftest import HERE, child_env

DATA = HERE / "data"
SKIP = "throughput,footprint,hubs,udp-rate,cycle,idle"


def test_a_suite_document_becomes_one_dataframe_per_step():
    r = ferry.lab.load(DATA / "results.json")
    assert isinstance(r, dict) and sorted(r) == ["latency", "limits", "send-time"]
    assert r.schema == 1 and r.suite["level"] == "smoke"
    assert r.machine["cpus"] >= 1 and "hostname" in r.machine
    latency = r["latency"]
    assert isinstance(latency, pd.DataFrame)
    assert {"transport", "size_bytes", "p50_ns", "p99_ns"} <= set(latency.columns)
    assert "shm-spin" in set(latency["transport"])
    assert latency.attrs["experiment"] == "latency" and "sizes" in latency.attrs["request"]
    assert r.configs["latency"] == latency.attrs["config"]
    runs = r.runs.set_index("step")
    assert runs.loc["latency", "status"] == "ok"
    assert runs.loc["throughput", "status"] == "left-out"
    assert "throughput" not in r


def test_a_report_directory_and_a_single_experiment(tmp_path):
    shutil.copy(DATA / "results.json", tmp_path / "results.json")
    assert sorted(ferry.lab.load(tmp_path)) == ["latency", "limits", "send-time"]
    one = ferry.lab.load(DATA / "latency.json")
    assert list(one) == ["latency"] and one.suite is None
    assert one["latency"].equals(ferry.lab.load(DATA / "results.json")["latency"])


def test_nested_rows_are_flattened(tmp_path):
    doc = json.loads((DATA / "latency.json").read_text())
    doc["rows"] = [{"transport": "x", "stats": {"p50_ns": 1, "p99_ns": 2}}]
    (tmp_path / "nested.json").write_text(json.dumps(doc))
    frame = ferry.lab.load(tmp_path / "nested.json")["latency"]
    assert list(frame.columns) == ["transport", "stats.p50_ns", "stats.p99_ns"]


@pytest.mark.parametrize(
    "content, message",
    [
        ({"schema": 2, "runs": []}, "version 2 of the results format; this ferry reads version 1"),
        ([], "before results documents had a schema"),
        ({"runs": []}, 'not a ferry lab results document \\(no "schema"\\)'),
    ],
)
def test_unknown_documents_are_refused_clearly(tmp_path, content, message):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(content))
    with pytest.raises(ferry.lab.SchemaError, match=message):
        ferry.lab.load(path)
    assert issubclass(ferry.lab.SchemaError, ValueError)


def test_a_device_is_not_read_as_results():
    # /dev/zero has no size and no end: it is refused, not read.
    with pytest.raises(ferry.lab.SchemaError, match="not a regular file"):
        ferry.lab.load("/dev/zero")


def test_an_experiment_of_an_unknown_version_inside_a_suite_is_refused(tmp_path):
    doc = json.loads((DATA / "results.json").read_text())
    doc["runs"][0]["results"]["schema"] = 7
    (tmp_path / "results.json").write_text(json.dumps(doc))
    with pytest.raises(ferry.lab.SchemaError, match="step limits.*version 7"):
        ferry.lab.load(tmp_path)


def test_what_ferry_lab_writes_now_loads(ferry_bin, tmp_path):
    out = tmp_path / "report"
    subprocess.run(
        [str(ferry_bin), "lab", "--smoke", "--out", str(out), "--skip", SKIP],
        env={**child_env(), "CI": "true"}, capture_output=True, timeout=180, check=True,
    )
    r = ferry.lab.load(out)
    assert {"latency", "limits", "send-time"} <= set(r)
    assert (r["latency"]["p50_ns"] > 0).all()

