"""Compares the results of tools/compare-builds/run.sh: every figure of each build (median over
the two runs), and the within-run ratios of latency and throughput (ferry against the baseline
of the same rounds), which do not move with the machine.

    python3 tools/compare-builds/compare.py OUT
"""
import json, glob, sys, statistics, collections
out = sys.argv[1]
# Names that changed for the same row: ferry over UDP is "udp4" in every experiment since the lab
# has one vocabulary of subjects (hubs, cycle, idle and footprint wrote "udp" before).
ALIASES = {"udp": "udp4"}
KEYS = ["kind", "transport", "size_bytes", "wait", "mode", "mss", "threads", "placement", "cycle_ms", "cpu"]
METRICS = {
    "limits": ["p50_ns", "gbytes_per_s"],
    "latency": ["p50_ns"],
    "send-time": ["p50_ns"],
    "throughput": ["delivered_gbps"],
    "idle": ["cpu_percent"],
    "hubs": ["lap_p50_ns", "completion_s"],
    "hubs-2hosts": ["lap_p50_ns", "completion_s"],
    "udp-rate": ["achieved_bps"],
    "udp-rate-auto": ["achieved_bps"],
    "cycle": ["max_multiplicity"],
}
def load(step, build):
    vals = collections.defaultdict(list)
    for f in sorted(glob.glob(f"{out}/{step}-{build}-*.json")):
        d = json.load(open(f))
        for r in d["rows"]:
            key = tuple((k, ALIASES.get(r.get(k), r.get(k))) for k in KEYS if r.get(k) is not None)
            for m in METRICS[step]:
                v = r.get(m)
                if isinstance(v, (int, float)) and v:
                    vals[(key, m)].append(v)
    return vals
print("| step | row | metric | before (median) | after (median) | after / before |")
print("|---|---|---|---:|---:|---:|")
summary = []
for step in METRICS:
    b, a = load(step, "before"), load(step, "after")
    for k in b:
        if k not in a: continue
        mb, ma = statistics.median(b[k]), statistics.median(a[k])
        ratio = ma / mb if mb else float("nan")
        summary.append((step, ratio))
        key, m = k
        label = ", ".join(f"{v}" for _, v in key)
        print(f"| {step} | {label} | {m} | {mb:.4g} | {ma:.4g} | {ratio:.2f} |")
print()
by = collections.defaultdict(list)
for s, r in summary: by[s].append(r)
for s, rs in by.items():
    print(f"{s}: {len(rs)} figures, median after/before {statistics.median(rs):.2f} (range {min(rs):.2f}–{max(rs):.2f})")
allr = [r for _, r in summary]
print(f"all: {len(allr)} figures, median {statistics.median(allr):.2f}")

# Within-run ratios: what each build's ferry figure is against the baseline of its own rounds.
print()
print("| experiment | row | ratio to baseline, before | after |")
print("|---|---|---:|---:|")
def ratios(step, build):
    vals = collections.defaultdict(list)
    for f in sorted(glob.glob(f"{out}/{step}-{build}-*.json")):
        d = json.load(open(f))
        for r in d["rows"]:
            if step == "latency" and r.get("p50_ratio") and r.get("baseline"):
                vals[(r["transport"], r["size_bytes"], "p50 / " + r["baseline"])].append(r["p50_ratio"])
            if step == "throughput":
                for k, v in (r.get("ratios") or {}).items():
                    if isinstance(v, (int, float)):
                        vals[(r["transport"], r["size_bytes"], "Gbit/s / " + k)].append(v)
    return vals
rr = []
for step in ["latency", "throughput"]:
    b, a = ratios(step, "before"), ratios(step, "after")
    for k in b:
        if k in a:
            mb, ma = statistics.median(b[k]), statistics.median(a[k])
            rr.append(ma / mb)
            print(f"| {step} | {k[0]} {k[1]} B | {k[2]}: {mb:.2f} | {ma:.2f} |")
print(f"within-run ratios: {len(rr)}, median after/before {statistics.median(rr):.2f} (range {min(rr):.2f}–{max(rr):.2f})")
