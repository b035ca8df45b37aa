"""The lab's results as pandas DataFrames: one per step of the suite.

    ferry lab --out ferry-report              # or: ferry lab latency --json latency.json
    python examples/python/analyse.py ferry-report
"""

import sys

import pandas as pd

import ferry.lab


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "ferry-report"
    results = ferry.lab.load(path)
    m = results.machine or {}
    print(f"{path}: ferry {results.ferry_version} on {m.get('hostname')} "
          f"({m.get('cpu_model')}, {m.get('cpus')} CPUs)")
    print(results.runs.to_string(index=False), end="\n\n")
    pd.set_option("display.width", 120)
    for step, frame in results.items():
        print(f"== {step} ({len(frame)} rows)")
        if {"transport", "size_bytes", "p50_ns"} <= set(frame.columns):
            # Latency-like steps: p50 by transport (rows) and message size (columns).
            print(frame.pivot_table(index="transport", columns="size_bytes", values="p50_ns"))
        else:
            print(frame.head(10).to_string(index=False))
        print()


if __name__ == "__main__":
    main()
