#!/usr/bin/env python3
"""The profile loop on the CPU runtime: compile, profile, compile again.

usage: test_profile_loop.py OPC [--work DIR]

1. `opc model.onnx --target cpu --emit-schedule a.json` builds the program;
2. `./net --profile prof.json` measures every schedule unit and stage, and
   names its target: "cpu", and "stand-in" for the GPU program on the CPU
   runtime;
3. `opc --cost-db prof.json --emit-schedule b.json` schedules with those
   times: units found in the profile cost what was measured (the median of
   the entries sharing their key), the others what the analytic model says.
The CPU runtime's times are those of this machine, nothing like the H100
model's, so the predicted latencies must change. Ill-formed files passed to
--cost-db are errors (exit 2, "opc: error:").
"""
import json
import os
import shutil
import statistics
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(11)
FAILURES = []


def fail(name, message):
    FAILURES.append(name)
    print("FAIL %s: %s" % (name, message), flush=True)


def ok(name):
    print("ok   %s" % name, flush=True)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def conv(nodes, inits, name, x, cin, cout, k, act=True):
    w = (RNG.standard_normal((cout, cin, k, k)) * 0.2).astype(np.float32)
    b = RNG.standard_normal(cout).astype(np.float32)
    inits += [numpy_helper.from_array(w, name + "_w"), numpy_helper.from_array(b, name + "_b")]
    out = name + ("_c" if act else "")
    nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [out], name=name,
                                  pads=[k // 2] * 4))
    if act:
        nodes.append(helper.make_node("Relu", [out], [name], name=name + "_relu"))
    return name


def inception_model():
    """A stem, then an Inception-style block of four branches, two of them
    alike (so that two units share one key), then a head."""
    nodes, inits = [], []
    x = conv(nodes, inits, "stem", "x", 3, 16, 3)
    b1 = conv(nodes, inits, "b1", x, 16, 8, 1)
    b2 = conv(nodes, inits, "b2", conv(nodes, inits, "b2a", x, 16, 8, 1), 8, 16, 3)
    b3 = conv(nodes, inits, "b3", conv(nodes, inits, "b3a", x, 16, 8, 1), 8, 16, 3)
    nodes.append(helper.make_node("MaxPool", [x], ["pool"], name="pool", kernel_shape=[3, 3],
                                  pads=[1, 1, 1, 1], strides=[1, 1]))
    b4 = conv(nodes, inits, "b4", "pool", 16, 8, 1)
    nodes.append(helper.make_node("Concat", [b1, b2, b3, b4], ["cat"], name="cat", axis=1))
    head = conv(nodes, inits, "head", "cat", 48, 8, 1, act=False)
    nodes.append(helper.make_node("GlobalAveragePool", [head], ["y"], name="gap"))
    graph = helper.make_graph(nodes, "inception", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 24, 24])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 1, 1])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def schedule_units(path):
    """name -> unit of an --emit-schedule file, with its stage index."""
    d = json.load(open(path))
    units = {}
    for stage in d["stages"]:
        for group in stage["groups"]:
            for u in group["units"]:
                units[u["name"]] = dict(u, stage=stage["index"])
    return d, units


def close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-9)


def compile_model(opc, model, out, *extra):
    return run([opc, model, "-o", out, "--target", "cpu"] + list(extra))


def check_profile(prof, sched, units):
    """The profile names every scheduled unit with a positive time and the
    compiler's key, every stage with a positive time, and the device."""
    if prof.get("format") != "opc-profile-1":
        return "format %r" % prof.get("format")
    if not isinstance(prof.get("device"), str) or not prof["device"]:
        return "no device name"
    for lib in ("cuda_runtime", "cudnn"):
        if not isinstance(prof.get(lib), int) or prof[lib] <= 0:
            return "no %s version: %r" % (lib, prof.get(lib))
    measured = {u["name"]: u for u in prof["units"]}
    if set(measured) != set(units) or len(prof["units"]) != len(units):
        return "units %s, schedule has %s" % (sorted(measured), sorted(units))
    for name, u in measured.items():
        if not u["us"] > 0:
            return "unit %s: %r us" % (name, u["us"])
        if u["key"] != units[name]["key"] or u["stage"] != units[name]["stage"]:
            return "unit %s: key/stage %r/%r, schedule says %r/%r" % (
                name, u["key"], u["stage"], units[name]["key"], units[name]["stage"])
    stages = prof["stages"]
    if [s["index"] for s in stages] != list(range(len(sched["stages"]))):
        return "stages %r, schedule has %d" % ([s["index"] for s in stages], len(sched["stages"]))
    for s, planned in zip(stages, sched["stages"]):
        if not s["us"] > 0 or abs(s["predicted_us"] - planned["predicted_us"]) > 1e-3:
            return "stage %r against %r" % (s, planned["predicted_us"])
    return None


def main():
    opc = os.path.abspath(sys.argv[1])
    work = os.path.abspath(sys.argv[sys.argv.index("--work") + 1]) if "--work" in sys.argv else "work-profile"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model = os.path.join(work, "model.onnx")
    onnx.save(inception_model(), model)
    a_json, b_json, prof_json = (os.path.join(work, f) for f in ("a.json", "b.json", "prof.json"))
    exe = os.path.join(work, "net")

    # 1. compile; 2. profile.
    p = compile_model(opc, model, exe, "--emit-schedule", a_json)
    if p.returncode != 0:
        fail("compile", p.stderr)
        return 1
    a, a_units = schedule_units(a_json)
    p = run([exe, "--profile", prof_json])
    if p.returncode != 0 or not os.path.exists(prof_json):
        fail("profile", "exit %d: %s" % (p.returncode, p.stderr))
        return 1
    prof = json.load(open(prof_json))
    problem = check_profile(prof, a, a_units)
    if problem:
        fail("profile_contents", problem)
        return 1
    ok("profile_contents")
    # The profile names the program it measured: the CPU program above, the
    # GPU program on the CPU runtime (--target stand-in) here.
    stand_in, stand_in_json = os.path.join(work, "net_stand_in"), os.path.join(work, "stand_in.json")
    p = run([opc, model, "-o", stand_in, "--target", "stand-in"])
    q = run([stand_in, "--profile", stand_in_json]) if p.returncode == 0 else p
    targets = (prof.get("target"), json.load(open(stand_in_json)).get("target")
               if q.returncode == 0 else q.stderr[-300:])
    if targets != ("cpu", "stand-in"):
        fail("profile_target", "targets %r, expected ('cpu', 'stand-in')" % (targets,))
        return 1
    ok("profile_target")
    by_key = {}
    for u in prof["units"]:
        by_key.setdefault(u["key"], []).append(u["us"])
    if not any(len(v) > 1 for v in by_key.values()):
        fail("profile_shared_key", "the two alike branches should share a key: %r" % sorted(by_key))
    else:
        ok("profile_shared_key")

    # 3. compile again with the measured costs.
    p = compile_model(opc, model, os.path.join(work, "net2"), "--cost-db", prof_json,
                      "--emit-schedule", b_json)
    if p.returncode != 0:
        fail("cost_db_compile", p.stderr)
        return 1
    b, b_units = schedule_units(b_json)
    if close(a["predicted_latency_us"], b["predicted_latency_us"], 0.01):
        fail("cost_db_changes_prediction", "%r and %r" % (a["predicted_latency_us"], b["predicted_latency_us"]))
    else:
        ok("cost_db_changes_prediction")
    a_by_key = {u["key"]: u["cost_us"] for u in a_units.values()}
    matched = distinct = 0
    for name, u in b_units.items():
        if u["key"] not in by_key:
            continue
        matched += 1
        want = statistics.median(by_key[u["key"]])
        if not close(u["cost_us"], want, 1e-6):
            fail("cost_db_unit_costs", "%s: %r us, measured %r" % (name, u["cost_us"], want))
            break
        # A measured time may by chance land within 1% of the analytic one;
        # such a unit proves nothing either way, so only the others count.
        if u["key"] in a_by_key and not close(a_by_key[u["key"]], want, 0.01):
            distinct += 1
    else:
        if matched < len(a_units) // 2:
            fail("cost_db_unit_costs", "only %d of %d units matched" % (matched, len(b_units)))
        elif distinct < matched // 2:
            fail("cost_db_unit_costs", "only %d of %d measured costs differ from the analytic ones"
                 % (distinct, matched))
        else:
            ok("cost_db_unit_costs")

    # A profile of one unit: that unit is measured, the rest stay analytic.
    one = dict(prof, units=[prof["units"][0]])
    one_json, c_json = os.path.join(work, "one.json"), os.path.join(work, "c.json")
    json.dump(one, open(one_json, "w"))
    p = compile_model(opc, model, os.path.join(work, "net3"), "--cost-db", one_json, "--no-merge",
                      "--emit-schedule", c_json)
    p2 = compile_model(opc, model, os.path.join(work, "net4"), "--no-merge", "--emit-schedule", a_json)
    if p.returncode != 0 or p2.returncode != 0:
        fail("cost_db_partial", p.stderr + p2.stderr)
    else:
        _, c_units = schedule_units(c_json)
        _, a_units = schedule_units(a_json)
        first = prof["units"][0]
        wrong = [n for n, u in c_units.items()
                 if not close(u["cost_us"], first["us"] if u["key"] == first["key"] else a_units[n]["cost_us"], 1e-6)]
        if wrong or set(c_units) != set(a_units):
            fail("cost_db_partial", "costs of %r" % wrong)
        else:
            ok("cost_db_partial")

    # Ill-formed files: exit 2, one error line, no program left behind.
    bad_cases = {
        "truncated": open(prof_json).read()[: len(open(prof_json).read()) // 2],
        "not_a_profile": open(b_json).read(),
        "negative_time": json.dumps(dict(prof, units=[dict(prof["units"][0], us=-1)])),
        "key_missing": json.dumps(dict(prof, units=[{"name": "x", "us": 1.0}])),
    }
    for name, text in bad_cases.items():
        bad = os.path.join(work, name + ".json")
        open(bad, "w").write(text)
        out = os.path.join(work, "bad_" + name)
        p = compile_model(opc, model, out, "--cost-db", bad)
        if p.returncode != 2 or not p.stderr.startswith("opc: error: " + bad) or os.path.exists(out + ".c"):
            fail("cost_db_" + name, "exit %d, stderr %r" % (p.returncode, p.stderr))
        else:
            ok("cost_db_" + name)
    p = compile_model(opc, model, os.path.join(work, "bad_missing"), "--cost-db", os.path.join(work, "nonexistent.json"))
    if p.returncode != 2 or "opc: error:" not in p.stderr:
        fail("cost_db_missing", "exit %d, stderr %r" % (p.returncode, p.stderr))
    else:
        ok("cost_db_missing")

    # TF32: tensor cores make the convolutions cheaper, nothing else.
    t_json = os.path.join(work, "t.json")
    p = compile_model(opc, model, os.path.join(work, "net5"), "--no-merge", "--precision", "tf32",
                      "--emit-schedule", t_json)
    if p.returncode != 0:
        fail("tf32_cost", p.stderr)
    else:
        _, t_units = schedule_units(t_json)
        wrong = [n for n, u in t_units.items()
                 if (u["op"] == "Conv") != (u["cost_us"] < a_units[n]["cost_us"] * 0.999)]
        if wrong:
            fail("tf32_cost", "units %r" % wrong)
        else:
            ok("tf32_cost")

    print("%d failed" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
