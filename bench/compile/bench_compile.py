"""Compile time against node count.

  bench_compile.py --opc build/opc [-o bench/results/compile-DATE.md]
                   [--sizes 1000,10000,100000] [--kinds chain,fanout,inception]
                   [--schedule lios]

Builds each synthetic graph of bench/compile/gen_graph.py at each size,
compiles it with `opc MODEL -o net.c` (the whole pipeline and the
emitter) and records the wall time, the CPU time (user + system, which
other work on the machine disturbs less) and the peak memory. The ratio
that matters is the CPU time per node at the largest size over that at
the one before: 1.0 is linear growth.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def compile_once(opc, model, out, schedule):
    start = time.monotonic()
    proc = subprocess.Popen([opc, model, "-o", out, "--schedule", schedule],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if status != 0:
        sys.exit(f"bench_compile: opc failed on {model}:\n{err}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_mb": usage.ru_maxrss / 1024.0, "c_bytes": os.path.getsize(out)}


def measure(opc, kind, nodes, schedule, work):
    model = os.path.join(work, f"{kind}-{nodes}.onnx")
    # In a child, so that this process stays small: a forked compiler's
    # peak memory starts from its parent's.
    subprocess.run([sys.executable, os.path.join(HERE, "gen_graph.py"), kind, str(nodes), model],
                   check=True)
    out = os.path.join(work, "net.c")
    # The best of a few runs at the small sizes, where noise is relatively large.
    runs = 3 if nodes <= 10000 else 1
    best = min((compile_once(opc, model, out, schedule) for _ in range(runs)),
               key=lambda r: r["cpu_s"])
    best.update(kind=kind, nodes=nodes, us_per_node=1e6 * best["cpu_s"] / nodes)
    for name in ("net.c", "net.h", "net.weights"):
        path = os.path.join(work, name)
        if os.path.exists(path):
            os.remove(path)
    os.remove(model)
    return best


def growth(rows, kind, sizes):
    per = {r["nodes"]: r["us_per_node"] for r in rows if r["kind"] == kind}
    if len(sizes) < 2 or sizes[-2] not in per or sizes[-1] not in per:
        return None
    return per[sizes[-1]] / per[sizes[-2]]


def markdown(rows, meta, sizes, kinds):
    lines = [f"# Compile time against node count ({meta['date']})", "",
             "| | |", "|---|---|"]
    for key in ("cpu", "cores", "load", "opc", "schedule", "repo"):
        lines.append(f"| {key} | {meta[key]} |")
    lines += ["", "`opc MODEL -o net.c`: import, every pass, the emitter. CPU time is user + "
              "system of the compiler process; wall time also counts waiting for the machine.",
              "", "| graph | nodes | CPU s | wall s | µs per node (CPU) | peak MB | net.c MB |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['kind']} | {r['nodes']} | {r['cpu_s']:.3f} | {r['wall_s']:.3f} | "
                     f"{r['us_per_node']:.1f} | {r['peak_mb']:.0f} | {r['c_bytes'] / 1e6:.1f} |")
    lines += ["", f"Growth of the CPU time per node from {sizes[-2]} to {sizes[-1]} nodes "
              "(1.0 is linear):", ""]
    for k in kinds:
        g = growth(rows, k, sizes)
        if g is not None:
            lines.append(f"- {k}: {g:.2f}x")
    lines += ["", f"Command: `{meta['command']}`", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--opc", required=True)
    ap.add_argument("-o", "--output", help="write Markdown here and JSON beside it")
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--kinds", default="chain,fanout,inception")
    ap.add_argument("--schedule", default="lios")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    kinds = args.kinds.split(",")
    rows = []
    with tempfile.TemporaryDirectory(prefix="opc-compile-") as work:
        for kind in kinds:
            for n in sizes:
                r = measure(os.path.abspath(args.opc), kind, n, args.schedule, work)
                print(f"{kind:10s} {n:7d} nodes  cpu {r['cpu_s']:7.3f} s  wall {r['wall_s']:7.3f} s  "
                      f"{r['us_per_node']:6.1f} us/node  {r['peak_mb']:6.0f} MB", flush=True)
                rows.append(r)
    repo = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    meta = {"date": datetime.date.today().isoformat(), "cpu": cpu_model(),
            "cores": os.cpu_count(), "load": "%.2f %.2f %.2f" % os.getloadavg(),
            "opc": args.opc, "schedule": args.schedule, "repo": repo,
            "command": " ".join(["bench/compile/bench_compile.py"] + sys.argv[1:])}
    for k in kinds:
        g = growth(rows, k, sizes)
        if g is not None:
            print(f"growth per node {sizes[-2]} -> {sizes[-1]}: {k} {g:.2f}x")
    if args.output:
        with open(args.output, "w") as f:
            f.write(markdown(rows, meta, sizes, kinds))
        with open(os.path.splitext(args.output)[0] + ".json", "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
