"""End-to-end zoo test: one model against ONNX Runtime under every configuration.

    zoo_test.py OPC NAME BATCH WORKDIR [CONFIG,...]

Builds the model once (tools/models/build.py: random weights calibrated on
photographs), or takes a real torch export as committed
(tests/zoo/exports/NAME.onnx, written by tools/models/torch_exports.py),
or, for PP-OCR's trained recogniser and detector (tools/models/ppocr.py),
takes the file as shipped and gives opc its input shape. ONNX Runtime then computes its outputs on the test input
(photographs, rendered lines of text, or token ids for a text model, chosen
by a recorded seed) and on other inputs (reference.py). The recogniser must
read the rendered line in ONNX Runtime's output, and in opc's float32
outputs read the same. Before any program runs, it checks that the
check can fail:

  sensitivity  each floating output's input-dependent part over the whole,
               ||ref - mean of the others|| / ||ref||, is at least
               compare.MIN_SENSITIVITY;
  strength     ONNX Runtime's output with a few output channels of a
               weight zeroed (three channels of three convolutions, three
               units of every LSTM/GRU/RNN; in a model with neither,
               three columns of three MatMuls) fails the strict float32 check.

Then for each configuration (every scheduler, -O0, direct launches instead of
a replayed CUDA graph, HIOS on 2 and 4 emulated GPUs, HOPE, 16-bit
precisions) it compiles the model with opc for the CPU runtime, runs it with
the runtime's race checker on (OPC_CHECK=1) and checks every output with
compare.check: exact shapes, types and integers, NaN and Inf only where the
reference has them, and the relative L2 and signal-relative bounds of the
configuration's precision (compare.PRECISIONS; in bfloat16 widened to
compare.FLOOR_FACTOR times the error ONNX Runtime itself gets when every
weight and stored value is rounded to bfloat16, where that is larger:
storage_floor.py).

The first configuration of each precision also runs on another input: its
output must pass against that input's reference, and must fail against the
test input's (the negative control; if it passed, the check would be too
weak to mean anything, and the test fails saying so).

Finally the same model's net.c, in both graph modes and every precision,
must compile and link with -Wall -Wextra -Werror against the real CUDA
toolkit, cuDNN and cuBLAS (there is no GPU here to run it). A list of
configurations (CONFIGS, FOLDED) runs those alone, without the CUDA builds
(and, with FOLDED ones, the strength check). Reproduce a failure with
OPC_ZOO_SEED.

Build speed: the emitted C is compiled with -O1 (opc's own default) for the
first configuration of each precision, with -O2 for the CUDA graph-fp32
build (gcc's warnings that only -O2's analyses find, for a user who builds
net.c by hand with -O2), and with -O0 (CFLAGS, which follow opc's -O1) for
the others, whose C differs in the schedule and the calls but not in the
helpers where optimisation-dependent warnings would show. The -O0
programs, CPU and CUDA alike, are compiled by OPC_TEST_CC (clang, which
meson finds: a second compiler's warnings, at half gcc's -O0 time) and the
optimised ones by cc, as users build.
Each step's time is printed.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tools" / "models"))
import compare  # noqa: E402
import photos  # noqa: E402
import ppocr  # noqa: E402

# Models that torch itself exported (tools/models/torch_exports.py), used as
# committed: tests/zoo/exports/NAME.onnx
EXPORTS = HERE / "exports"

CONFIGS = {
    "ios": ["--schedule", "ios"],
    "lios": ["--schedule", "lios"],
    "greedy": ["--schedule", "greedy"],
    "sequential": ["--schedule", "sequential"],
    "O0": ["-O0"],
    "no-cuda-graph": ["--no-cuda-graph"],
    "gpus2": ["--gpus", "2"],
    # every unit in turn on another GPU: a transfer on nearly every edge;
    # LIOS's streams within each GPU
    "gpus4": ["--gpus", "4", "--placement", "round-robin", "--schedule", "lios"],
    # the GPU and the host CPU (HOPE): every other unit on the CPU, a copy on
    # nearly every edge; then the ILP's own partition
    "hope-alternate": ["--devices", "gpu,cpu", "--partition", "alternate"],
    "hope-ilp": ["--devices", "gpu,cpu", "--partition", "ilp",
                 "--cpu-device", str(HERE / "cpu_as_fast.json")],
    # convolutions, GEMMs, pooling and the data between them in 16 bits
    # (stored channels-last around the convolutions: choose-layout)
    "fp16": ["--precision", "fp16"],
    "bf16": ["--precision", "bf16"],
    # and in ONNX's order throughout
    "fp16-nchw": ["--precision", "fp16", "--layout", "nchw"],
}

# Programs for several GPUs run on fewer (OPC_GPU_MAP): not in the default
# list, which keeps the race checker's one-GPU-per-device view; a test of
# their own names them.
FOLDED = {
    "gpus2-on-1": (CONFIGS["gpus2"], {"OPC_DEVICE_COUNT": "1", "OPC_GPU_MAP": "0,0"}),
    # peer copies between the two devices and copies within each
    "gpus4-on-2": (CONFIGS["gpus4"], {"OPC_DEVICE_COUNT": "2", "OPC_GPU_MAP": "0,1,1,0"}),
}


def precision_of(flags):
    """The compare.PRECISIONS entry a configuration's flags ask for."""
    if "--precision" in flags:
        return flags[flags.index("--precision") + 1]
    return "fp32"


CUDA_VARIANTS = {
    "graph-fp32": [],
    "graph-tf32": ["--precision", "tf32"],
    "direct-fp32": ["--no-cuda-graph"],
    "direct-tf32": ["--no-cuda-graph", "--precision", "tf32"],
    "graph-fp32-gpus2": ["--gpus", "2"],
    "graph-fp32-hope": ["--devices", "gpu,cpu", "--partition", "alternate"],
    "graph-fp16": ["--precision", "fp16"],
    "graph-bf16": ["--precision", "bf16"],
}
# The CUDA build compiled at -O2, whose flow-based warnings
# (-Wmaybe-uninitialized, and the value-range ones only -O2 has) need it;
# the others at -O0.
CUDA_OPTIMISED = "graph-fp32"

# HOPE's heuristic against its ILP (the paper's model, one unit at a time per
# processor), on the made-up CPU that makes the ILP split: the factor the
# README states.
HOPE_HEURISTIC_FACTOR = 1.5

# Convolutions whose first output channel the strength check zeroes.
STRENGTH_CONVS = 3


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)


class Clock:
    """Seconds spent per step, printed at the end."""

    def __init__(self):
        self.spent = {}

    def add(self, step, start):
        self.spent[step] = self.spent.get(step, 0.0) + time.time() - start

    def report(self, label):
        total = sum(self.spent.values())
        parts = ", ".join("%s %.1f" % kv for kv in sorted(self.spent.items(), key=lambda kv: -kv[1]))
        print("TIME %s: %.1f s: %s" % (label, total, parts))


def read_pairs(path):
    pairs = []
    for line in Path(path).read_text().splitlines():
        if line.strip():
            name, _, file = line.partition("=")
            pairs.append((name, file))
    return pairs


class Draw:
    """One input draw of reference.py: its input files and reference outputs."""

    def __init__(self, folder):
        self.inputs = read_pairs(folder / "inputs.txt")
        self.outputs = read_pairs(folder / "outputs.txt")
        self.refs = [np.load(f) for _, f in self.outputs]
        # precision -> output k -> its storage-rounding floor (draws 0 and 1)
        self.floors = {}
        for p in compare.FLOOR_PRECISIONS:
            files = [folder / f"floor_{p}_{k}.npy" for k in range(len(self.refs))]
            self.floors[p] = [np.load(f) if f.exists() else None for f in files]


def baselines(draws, d):
    """For each output, the mean of the references of every draw but d
    (None for non-floating outputs)."""
    result = []
    for k, ref in enumerate(draws[d].refs):
        if ref.dtype.kind != "f":
            result.append(None)
            continue
        result.append(np.mean([draws[e].refs[k].astype(np.float64)
                               for e in range(len(draws)) if e != d], axis=0))
    return result


def check_outputs(draws, d, outs, precision):
    """compare.check of every output of draw d's reference against `outs`;
    returns (ok, message)."""
    worst = {"rel_l2": 0.0, "signal_rel": 0.0}
    widened = []
    for k, (name, _) in enumerate(draws[d].outputs):
        ref = draws[d].refs[k]
        try:
            floor = draws[d].floors[precision][k] if precision in draws[d].floors else None
            ok, why, figures = compare.check(ref, outs[k], precision, baselines(draws, d)[k], floor)
        except compare.ReferenceError as e:
            return False, "output %s: %s" % (name, e)
        if not ok:
            return False, "output %s: %s" % (name, why)
        for key in worst:
            if figures[key] is not None:
                worst[key] = max(worst[key], figures[key])
        if figures["bounds"]:
            widened.append("%s %.3g, %.3g" % (name, *figures["bounds"]))
    text = "relative L2 %.2e, signal-relative %.2e" % (worst["rel_l2"], worst["signal_rel"])
    if widened:
        text += " (bounds from storage rounding: %s)" % "; ".join(widened)
    return True, text


def check_sensitivity(draws, label):
    """Every floating output's input sensitivity at least MIN_SENSITIVITY."""
    failures = 0
    for k, (name, _) in enumerate(draws[0].outputs):
        ref = draws[0].refs[k]
        if ref.dtype.kind != "f":
            continue
        s = compare.sensitivity(ref, baselines(draws, 0)[k])
        ok = s >= compare.MIN_SENSITIVITY
        failures += not ok
        print("%s %s sensitivity: output %s: %.3f of the output is decided by the input (at "
              "least %g)" % ("PASS" if ok else "FAIL", label, name, s, compare.MIN_SENSITIVITY))
    return failures


def strength_picks(m, values):
    """[(node, how)]: the weights the strength check zeroes output
    channels of: three convolutions (three channels each); every recurrent
    layer (in each direction, three units, every gate's row of them in W,
    R and B); in a model with neither, three MatMuls by a weight (three
    columns each)."""
    def pick3(nodes):
        if not nodes:
            return []
        return [nodes[i] for i in sorted({0, len(nodes) // 2, len(nodes) - 1})[:STRENGTH_CONVS]]
    weighted = [n for n in m.graph.node if len(n.input) > 1 and n.input[1] in values]
    convs = pick3([n for n in weighted if n.op_type == "Conv"])
    picks = [(n, "conv") for n in convs]
    picks += [(n, "rnn") for n in weighted if n.op_type in ("LSTM", "GRU", "RNN")]
    if not picks:
        picks = [(n, "matmul") for n in pick3([n for n in weighted if n.op_type == "MatMul"])]
    return picks


def zero_channel(w, node, how):
    """w with strength_picks' channel of `node` zeroed."""
    if how == "conv":
        # three output channels (the first, the middle, the last), as three
        # units of a recurrent layer: one channel may be idle on an input
        # (MobileNetV2's stem channel 0 under ReLU6, OPC_ZOO_SEED=103699652)
        w[sorted({0, w.shape[0] // 2, w.shape[0] - 1})] = 0
    elif how == "rnn":
        # W [directions, gates * hidden, input], R [.., hidden], B [.., 2 * gates * hidden]:
        # every gate's row of three units (the first, the middle, the last),
        # as three convolutions are picked: one unit may be idle on an input
        hidden = next(a.i for a in node.attribute if a.name == "hidden_size")
        for unit in sorted({0, hidden // 2, hidden - 1}):
            w[:, unit::hidden] = 0
    else:
        # three columns (the first, the middle, the last): column 0 alone of
        # BERT-tiny's first query projection left the output within the
        # check on one input (OPC_ZOO_SEED=94435066)
        w[..., sorted({0, w.shape[-1] // 2, w.shape[-1] - 1})] = 0
    return w


def materialise_rnn_weights(m, values, feeds, options):
    """The dynamo exporter computes a recurrent layer's W, R and B in the
    graph (Slice and Concat of torch's weight_ih, weight_hh and biases, in
    ONNX's gate order): each such input becomes an initializer of the value
    ONNX Runtime computes for it, so that check_strength can zero its units
    as in the other exports. Adds them to m and to values."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    computed = sorted({x for n in m.graph.node if n.op_type in ("LSTM", "GRU", "RNN")
                       for x in n.input[1:4] if x and x not in values})
    if not computed:
        return
    probe = onnx.ModelProto()
    probe.CopyFrom(m)
    probe.graph.output.extend(onnx.ValueInfoProto(name=x) for x in computed)
    sess = ort.InferenceSession(probe.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    got = sess.run(computed, feeds)
    renamed = {}
    for x, v in zip(computed, got):
        renamed[x] = x + ".materialised"
        t = numpy_helper.from_array(np.ascontiguousarray(v), renamed[x])
        m.graph.initializer.append(t)
        values[renamed[x]] = m.graph.initializer[-1]
    for n in m.graph.node:
        if n.op_type in ("LSTM", "GRU", "RNN"):
            for k in range(1, min(4, len(n.input))):
                n.input[k] = renamed.get(n.input[k], n.input[k])


def check_strength(model, draws, label):
    """ONNX Runtime's outputs with output channels of a weight zeroed
    (strength_picks, zero_channel) must fail the strict float32 check: otherwise a wrong
    channel in opc's program could pass it too."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    m = onnx.load(str(model))
    # weights are initializers, or Constant nodes (as PP-OCR's exporter writes)
    values = {t.name: t for t in m.graph.initializer}
    values.update({n.output[0]: n.attribute[0].t for n in m.graph.node
                   if n.op_type == "Constant" and n.attribute[0].name == "value"})
    feeds = {name: np.load(f) for name, f in draws[0].inputs}
    options = ort.SessionOptions()
    options.log_severity_level = 3
    materialise_rnn_weights(m, values, feeds, options)
    picks = strength_picks(m, values)
    if not picks:
        return 0
    failures = 0
    for node, how in picks:
        # Recurrent units are zeroed in W, R and B alike, every gate of them:
        # one gate's row of W for unit 0 left the output within the check's
        # bound on some inputs (crnn, OPC_ZOO_SEED=700472165).
        slots = [k for k in (1, 2, 3) if len(node.input) > k and node.input[k] in values] \
            if how == "rnn" else [1]
        saved = {}
        for k in slots:
            saved[k] = onnx.TensorProto()
            saved[k].CopyFrom(values[node.input[k]])
            w = zero_channel(numpy_helper.to_array(saved[k]).copy(), node, how)
            values[node.input[k]].CopyFrom(numpy_helper.from_array(w, node.input[k]))
        sess = ort.InferenceSession(m.SerializeToString(), options,
                                    providers=["CPUExecutionProvider"])
        for k in slots:
            values[node.input[k]].CopyFrom(saved[k])
        outs = [np.ascontiguousarray(v) for v in sess.run(None, feeds)]
        ok, why = check_outputs(draws, 0, outs, "fp32")
        failures += ok
        print("%s %s strength: %s of %s zeroed %s" % (
            "FAIL" if ok else "PASS", label,
            "three units" if how == "rnn" else "three channels" if how == "conv" else "three columns",
            node.name,
            "passes the float32 check: the check is too weak" if ok else
            "fails the float32 check, as it must (%s)" % why))
    return failures


def cuda_builds(opc, model, work, label, clock, model_flags):
    """Compiles and links net.c for CUDA in every variant; returns the failure count."""
    cflags = run([opc, "--cflags", "cuda"]).stdout.split()
    libs = run([opc, "--libs", "cuda"]).stdout.split()
    failures = 0
    for variant, flags in CUDA_VARIANTS.items():
        src = work / f"cuda-{variant}.c"
        start = time.time()
        r = run([opc, str(model), "-o", str(src)] + model_flags + flags)
        clock.add("opc", start)
        if r.returncode == 0:
            cc = os.environ.get("CC", "cc")
            level = "-O2"
            if variant != CUDA_OPTIMISED:
                cc, level = os.environ.get("OPC_TEST_CC", cc), "-O0"
            cc = cc.split()
            start = time.time()
            r = run(cc + [level, "-Wall", "-Wextra", "-Werror", str(src), "-o",
                          str(work / f"cuda-{variant}")] + cflags + libs)
            clock.add("cc (CUDA)", start)
        if r.returncode:
            print(f"FAIL {label} cuda {variant}: does not build\n{r.stdout}{r.stderr}")
            failures += 1
        else:
            print(f"PASS {label} cuda {variant}: compiles and links against CUDA")
        for f in work.glob(f"cuda-{variant}*"):
            f.unlink()
    return failures


def check_hope_heuristic(opc, model, work, label, model_flags):
    """The greedy partition's latency within HOPE_HEURISTIC_FACTOR of the ILP's."""
    latency = {}
    for partition in ("ilp", "heuristic"):
        out = work / f"hope-{partition}.json"
        r = run([opc, str(model), *model_flags, "--devices", "gpu,cpu", "--partition", partition,
                 "--cpu-device", str(HERE / "cpu_as_fast.json"), "--emit-schedule", str(out)])
        if r.returncode:
            print(f"FAIL {label} hope-heuristic: --partition {partition}: {r.stderr.strip()}")
            return 1
        latency[partition] = json.loads(out.read_text())["hope"]["model_latency_us"]
        out.unlink()
    ratio = latency["heuristic"] / latency["ilp"]
    verdict = "PASS" if ratio <= HOPE_HEURISTIC_FACTOR else "FAIL"
    print(f"{verdict} {label} hope-heuristic: {latency['heuristic']:.1f} us against the ILP's "
          f"{latency['ilp']:.1f} us, ratio {ratio:.3f} (at most {HOPE_HEURISTIC_FACTOR})")
    return 0 if verdict == "PASS" else 1


def check_folded(opc, model, label):
    """The operator types the model's metadata "opc.must_fold" names (a
    subgraph built from constants and shapes alone) must all be gone after
    opc's fold-constants pass."""
    import onnx
    props = {p.key: p.value for p in onnx.load(str(model), load_external_data=False).metadata_props}
    kinds = [k for k in props.get("opc.must_fold", "").split(",") if k]
    if not kinds:
        return 0
    r = run([opc, str(model), "-o", str(model.with_suffix(".c")), "--dump-after=fold-constants"])
    for f in [model.with_suffix(".c"), model.with_suffix(".h"), model.with_suffix(".weights")]:
        f.unlink(missing_ok=True)
    left = sorted({k for k in kinds for line in r.stdout.splitlines() if f"= {k}(" in line})
    if r.returncode or left:
        print(f"FAIL {label} fold: {'left after fold-constants: ' + ', '.join(left) if left else r.stderr}")
        return 1
    print(f"PASS {label} fold: no {', '.join(kinds)} left after fold-constants")
    return 0


def run_program(exe, draw, work, tag, env, clock):
    """Runs a compiled program on one draw's inputs; (outputs, error)."""
    cmd = [str(exe)]
    for n, f in draw.inputs:
        cmd += ["--input", f"{n}={f}"]
    files = []
    for k, (n, _) in enumerate(draw.outputs):
        files.append(work / f"got-{tag}-{k}.npy")
        cmd += ["--output", f"{n}={files[-1]}"]
    start = time.time()
    r = run(cmd, env=dict(os.environ, OPC_CHECK="1", **env))
    clock.add("program runs", start)
    if r.returncode:
        return None, f"program exited {r.returncode}\n{r.stderr}"
    outs = [np.load(f) for f in files]
    for f in files:
        f.unlink()
    return outs, None


def check_config(opc, model, draws, config, work, label, controlled, clock, model_flags):
    """Compiles and checks one configuration; returns the failure count."""
    exe = work / f"net-{config}"
    flags, env = FOLDED[config] if config in FOLDED else (CONFIGS[config], {})
    precision = precision_of(flags)
    control = precision not in controlled
    controlled.add(precision)
    # The first program of each precision is built as users build it (cc at
    # opc's -O1), the others at -O0 by the test compiler (OPC_TEST_CC: clang
    # where there is one, two to three times as fast as gcc at -O0).
    build_env = dict(os.environ)
    build_env.pop("CFLAGS", None)
    if not control:
        build_env["CFLAGS"] = "-O0"
        build_env["CC"] = os.environ.get("OPC_TEST_CC", build_env.get("CC", "cc"))
    start = time.time()
    r = run([opc, str(model), "-o", str(exe), "--target", "cpu", "--verify-each"] + model_flags +
            flags, env=build_env)
    clock.add("opc and cc", start)
    failures = 0
    if r.returncode:
        print(f"FAIL {label} {config}: opc exited {r.returncode}\n{r.stderr}")
        return 1
    outs, error = run_program(exe, draws[0], work, config, env, clock)
    if error:
        print(f"FAIL {label} {config}: {error}")
        failures += 1
    else:
        ok, why = check_outputs(draws, 0, outs, precision)
        print(f"{'PASS' if ok else 'FAIL'} {label} {config}: {why}")
        failures += not ok
        if ok and "reads" in draws[0].__dict__:
            failures += check_reading(draws[0], outs, model, precision, label, config)
    if control and not failures:
        failures += negative_control(exe, draws, work, config, env, precision, label, clock)
    for f in [exe, exe.with_suffix(".c"), exe.with_suffix(".weights")]:
        f.unlink(missing_ok=True)
    return failures


def check_reading(draw, outs, model, precision, label, config):
    """The text recogniser reads the same text from opc's output as from
    ONNX Runtime's: exact in float32; in 16 bits a near tie may read
    otherwise, which is reported."""
    text = ppocr.read(outs[0], str(model))
    same = text == draw.reads
    verdict = "PASS" if same else "FAIL" if precision in ("fp32", "tf32") else "NOTE"
    print(f"{verdict} {label} {config} reading: {text!r}"
          f"{'' if same else ', ONNX Runtime reads %r' % draw.reads}")
    return verdict == "FAIL"


def negative_control(exe, draws, work, config, env, precision, label, clock):
    """The program on another input: right against that input's reference,
    and wrong, as it must be, against the test input's."""
    outs, error = run_program(exe, draws[1], work, config + "-other", env, clock)
    if error:
        print(f"FAIL {label} {config} on another input: {error}")
        return 1
    ok, why = check_outputs(draws, 1, outs, precision)
    print(f"{'PASS' if ok else 'FAIL'} {label} {config} on another input: {why}")
    if not ok:
        return 1
    wrong, why = check_outputs(draws, 0, outs, precision)
    print(f"{'FAIL' if wrong else 'PASS'} {label} {precision} negative control: the output for "
          f"another input {'passes the check: the check is too weak' if wrong else 'fails it, as it must'}"
          f" ({why})")
    return 1 if wrong else 0


def main():
    opc, name, batch, workdir = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
    configs = sys.argv[5].split(",") if len(sys.argv) > 5 else list(CONFIGS)
    seed = int(os.environ.get("OPC_ZOO_SEED", random.randrange(1 << 30)))
    work = workdir / f"{name}-b{batch}"
    work.mkdir(parents=True, exist_ok=True)
    label = f"{name} b{batch}"
    clock = Clock()
    print(f"zoo {name} batch {batch}: input seed {seed} (reproduce with OPC_ZOO_SEED={seed})")

    model = work / "model.onnx"
    model_flags, ref_flags = [], []
    start = time.time()
    if (EXPORTS / f"{name}.onnx").exists():
        # a real torch export (tools/models/torch_exports.py), as committed
        if batch != "1":
            print(f"FAIL {label}: {name} is exported at batch 1")
            return 1
        shutil.copyfile(EXPORTS / f"{name}.onnx", model)
    elif name in ppocr.MODELS:
        # a trained model, used as shipped; its input shape is dynamic
        if batch != "1":
            print(f"FAIL {label}: {name} is tested at batch 1")
            return 1
        shutil.copyfile(ppocr.model_path(name), model)
        dims = "x".join(str(d) for d in ppocr.input_shape(name))
        model_flags = ["--input-shape", f"{ppocr.INPUT}={dims}"]
        ref_flags = ["--input-shape", f"{ppocr.INPUT}={dims}", "--input-kind", f"{ppocr.INPUT}=text"]
    else:
        r = run([sys.executable, str(ROOT / "tools/models/build.py"), name, "-o", str(model),
                 "--batch", batch])
        if r.returncode:
            print(r.stdout + r.stderr)
            return 1
    clock.add("build the model", start)
    # Other draws: as many as the photographs allow without repeating one.
    others = max(1, min(4, photos.count() // int(batch) - 1))
    ref_dir = work / "ref"
    start = time.time()
    r = run([sys.executable, str(HERE / "reference.py"), str(model), "--seed", str(seed),
             "--outdir", str(ref_dir), "--others", str(others)] + ref_flags)
    clock.add("reference", start)
    if r.returncode:
        print(f"FAIL {label} reference: {r.stdout}{r.stderr}")
        return 1
    draws = [Draw(ref_dir)] + [Draw(ref_dir / f"other{d}") for d in range(1, others + 1)]
    if name == "ppocr_rec":
        draws[0].reads = ppocr.read(draws[0].refs[0], str(model))
        shown = ppocr.draw_texts(seed, 0, 1)[0]
        ok = draws[0].reads.strip() == shown
        print(f"{'PASS' if ok else 'FAIL'} {label} input: ONNX Runtime reads "
              f"{draws[0].reads.strip()!r} in the line showing {shown!r}")
        if not ok:
            return 1

    full = configs == list(CONFIGS)
    failures = check_sensitivity(draws, label)
    # the strength check is about the model, whatever the configurations;
    # a list of FOLDED ones re-runs a model whose own test made it
    if full or not set(configs) & set(FOLDED):
        start = time.time()
        failures += check_strength(model, draws, label)
        clock.add("strength", start)
    failures += check_folded(opc, model, label)
    if "hope-ilp" in configs:
        failures += check_hope_heuristic(opc, model, work, label, model_flags)
    controlled = set()
    for config in configs:
        failures += check_config(opc, model, draws, config, work, label, controlled, clock,
                                 model_flags)
    if full:
        failures += cuda_builds(opc, model, work, label, clock, model_flags)
    clock.report(label)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
