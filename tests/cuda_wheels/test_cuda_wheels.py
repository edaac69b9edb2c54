#!/usr/bin/env python3
"""GPU programs built against PyPI's CUDA wheels alone.

Usage: test_cuda_wheels.py OPC WORKDIR TOOLKIT

The wheels of tools/cuda-wheels.txt are fetched once (pip download, about
1 GB) into ~/.cache/opc/cuda-wheels (XDG_CACHE_HOME is honoured), keeping
only what a build reads: every header and the libraries the link opens
(cuDNN's front library, cuBLAS and cuBLASLt, the CUDA runtime, NVRTC). That
tree is not a runnable install: cuDNN's engines and NVRTC's builtins are
left out. The system toolkit TOOLKIT (meson's `cuda` option) is hidden by
OPC_CUDA_HOME, which points at the tree; then:
- SqueezeNet 1.1 (cuDNN) and BERT-tiny (opc's NVRTC kernels, so the driver
  API and opc's libcuda stand-in) compile and link with -Wall -Wextra
  -Werror, using opc --cflags/--libs cuda; the compiler's dependency list
  and the linker's trace show every CUDA header and library came from the
  tree (libcuda from opc's stand-in) and none from TOOLKIT;
- `opc -o net` builds the executable, whose RUNPATH is the tree's libraries
  and which needs the driver's libcuda.so.1;
- strength: with cublas_v2.h missing from a copy of the tree, the build
  fails or the checks above find it taken from elsewhere.
"""
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
REQUIREMENTS = os.path.join(ROOT, "tools", "cuda-wheels.txt")
# What the link opens: the libraries named by opc --libs cuda (cuBLASLt
# too: the int8 GEMMs call it).
LINKED = ["cu13/lib/libcudart.so.13", "cu13/lib/libcublas.so.13", "cu13/lib/libcublasLt.so.13",
          "cu13/lib/libnvrtc.so.13", "cudnn/lib/libcudnn.so.9"]
# The CUDA headers an emitted program includes.
HEADERS = ["cuda.h", "cuda_runtime.h", "cudnn.h", "cublas_v2.h", "cublasLt.h", "nvrtc.h",
           "nvToolsExt.h"]
MODELS = ["squeezenet1_1", "bert_tiny"]

failures = 0


def check(name, ok, detail=""):
    global failures
    print(("PASS " if ok else "FAIL ") + name)
    if not ok:
        failures += 1
        if detail:
            print(detail if isinstance(detail, str) else repr(detail))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def cache_root():
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = os.path.join(xdg, "opc") if xdg else os.path.expanduser("~/.cache/opc")
    return os.path.join(base, "cuda-wheels")


def wanted(name):
    """Whether a wheel member is part of the tree kept in the cache."""
    if not name.startswith("nvidia/"):
        return False
    inner = name[len("nvidia/"):]
    return "/include/" in inner or inner in LINKED


def fetch_wheels():
    """The cache's nvidia/ folder for tools/cuda-wheels.txt, fetched if missing."""
    # Named by the pinned versions alone: a comment changed fetches nothing.
    with open(REQUIREMENTS, encoding="utf-8") as f:
        pins = [line.split("#")[0].strip() for line in f]
    tag = hashlib.sha256("\n".join(p for p in pins if p).encode()).hexdigest()[:12]
    home = os.path.join(cache_root(), tag)
    if os.path.isdir(home):
        return os.path.join(home, "nvidia"), False
    os.makedirs(cache_root(), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_root()) as tmp:
        download = os.path.join(tmp, "download")
        r = run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                 "-r", REQUIREMENTS, "-d", download])
        if r.returncode:
            sys.exit("test_cuda_wheels: pip download -r tools/cuda-wheels.txt failed (PyPI "
                     "unreachable?)\n" + r.stdout + r.stderr)
        tree = os.path.join(tmp, "tree")
        for wheel in sorted(glob.glob(os.path.join(download, "*.whl"))):
            with zipfile.ZipFile(wheel) as z:
                z.extractall(tree, [m for m in z.namelist() if wanted(m)])
            os.remove(wheel)
        try:
            os.rename(tree, home)  # a concurrent run may have been first
        except OSError:
            if not os.path.isdir(home):
                raise
    return os.path.join(home, "nvidia"), True


def deps_of(path):
    """The files a compiler's -MD list names, resolved."""
    with open(path, encoding="utf-8") as f:
        text = f.read().replace("\\\n", " ")
    words = text.split(":", 1)[1].split()
    return [os.path.realpath(w) for w in words]


def inside(path, folder):
    return os.path.commonpath([path, os.path.realpath(folder)]) == os.path.realpath(folder)


def source_checks(deps, trace, tree, toolkit, stubs):
    """(name, ok, detail): every CUDA header and library came from the tree,
    none from the toolkit (which a machine may also reach through
    /usr/local/include, as the project's machines do)."""
    from_toolkit = [p for p in deps + trace if os.path.exists(toolkit) and inside(p, toolkit)]
    yield f"nothing from the system toolkit {toolkit}", not from_toolkit, from_toolkit
    for header in HEADERS:
        found = [p for p in deps if os.path.basename(p) == header]
        yield f"{header} from the wheels", len(found) == 1 and inside(found[0], tree), found
    for lib in LINKED:
        found = [p for p in trace if os.path.basename(p) == os.path.basename(lib)]
        yield (f"{os.path.basename(lib)} linked from the wheels",
               len(found) == 1 and inside(found[0], tree), found)
    found = [p for p in trace if os.path.basename(p).startswith("libcuda.so")]
    yield "libcuda linked from opc's stand-in", len(found) == 1 and inside(found[0], stubs), found


def build_checks(opc, model, work, home, tree, toolkit):
    """(name, ok, detail) of net.c for CUDA built by hand as the README says,
    with -Werror, with OPC_CUDA_HOME at `home`: the wheels in `tree`, or a
    copy of them made of links to it."""
    env = dict(os.environ, OPC_CUDA_HOME=home)
    src = os.path.join(work, model + ".c")
    r = run([opc, os.path.join(work, model + ".onnx"), "-o", src], env=env)
    yield "opc writes net.c for CUDA", r.returncode == 0, r.stderr
    cflags = run([opc, "--cflags", "cuda"], env=env)
    libs = run([opc, "--libs", "cuda"], env=env)
    flags = cflags.stdout + libs.stdout
    yield ("opc --cflags/--libs cuda name the wheels, not the toolkit",
           cflags.returncode == 0 and libs.returncode == 0 and home in cflags.stdout and
           home in libs.stdout and toolkit not in flags and os.path.realpath(toolkit) not in flags,
           (cflags, libs))
    deps, exe = src + ".d", os.path.join(work, model)
    start = time.time()
    r = run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-MD", "-MF", deps, src, "-o", exe,
             "-Wl,--trace"] + cflags.stdout.split() + libs.stdout.split())
    yield (f"compiles and links with -Wall -Wextra -Werror ({time.time() - start:.1f} s)",
           r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:])
    if r.returncode:
        return
    trace = [os.path.realpath(w) for w in r.stdout.split() if os.path.exists(w)]
    stubs = next(w[2:] for w in libs.stdout.split() if w.startswith("-L") and "stubs" in w)
    yield from source_checks(deps_of(deps), trace, tree, toolkit, stubs)


def build_executable(opc, env, work, tree):
    """opc -o net: the rpath to the wheels' libraries, the driver needed."""
    exe = os.path.join(work, "exe", "net")
    os.makedirs(os.path.dirname(exe), exist_ok=True)
    r = run([opc, os.path.join(work, "bert_tiny.onnx"), "-o", exe], env=dict(env, CFLAGS="-O0"))
    check("opc -o net builds against the wheels", r.returncode == 0, r.stderr)
    if r.returncode:
        return
    dyn = run(["readelf", "-d", exe]).stdout
    runpath = [line.split("[", 1)[1].rstrip("]") for line in dyn.splitlines()
               if "(RUNPATH)" in line or "(RPATH)" in line]
    want = f"{tree}/cu13/lib:{tree}/cudnn/lib"
    check("the executable's run path is the wheels' libraries", runpath == [want], runpath)
    needed = [line.split("[", 1)[1].rstrip("]") for line in dyn.splitlines() if "(NEEDED)" in line]
    check("the executable needs the driver's libcuda.so.1 and the wheels' libraries by soname",
          all(n in needed for n in ["libcuda.so.1", "libcudart.so.13", "libcublas.so.13",
                                    "libcudnn.so.9", "libnvrtc.so.13"]), needed)


def without(tree, work, missing):
    """A copy of the tree, of links, without the file `missing` (a path
    inside it): only the folders on the way to it are made, the rest linked."""
    copy = os.path.join(work, "without-" + os.path.basename(missing), "nvidia")
    shutil.rmtree(os.path.dirname(copy), ignore_errors=True)
    source, parts = tree, missing.split("/")
    for depth, part in enumerate(parts):
        here = os.path.join(copy, *parts[:depth])
        os.makedirs(here, exist_ok=True)
        for name in os.listdir(source):
            if name != part:
                os.symlink(os.path.join(source, name), os.path.join(here, name))
        source = os.path.join(source, part)
    return copy


def main():
    opc, work, toolkit = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    start = time.time()
    tree, fetched = fetch_wheels()
    print(f"wheels: {tree} ({'fetched' if fetched else 'cached'}, {time.time() - start:.1f} s)")
    for model in MODELS:
        onnx_path = os.path.join(work, model + ".onnx")
        if not os.path.exists(onnx_path):
            r = run([sys.executable, os.path.join(ROOT, "tools", "models", "build.py"), model,
                     "-o", onnx_path])
            if r.returncode:
                sys.exit(f"test_cuda_wheels: building {model} failed\n{r.stderr}")
    for model in MODELS:
        for name, ok, detail in build_checks(opc, model, work, tree, tree, toolkit):
            check(f"{model}: {name}", ok, detail)
    build_executable(opc, dict(os.environ, OPC_CUDA_HOME=tree), work, tree)

    # Strength: a header the build needs missing from the wheels is found
    # out, whether the compiler stops or takes it from elsewhere, and
    # nothing else fails.
    broken = without(tree, work, "cu13/include/cublas_v2.h")
    failed = [(name, str(detail)) for name, ok, detail in
              build_checks(opc, MODELS[0], work, broken, tree, toolkit) if not ok]
    check("strength: without cublas_v2.h in the wheels the checks fail, each over it: " +
          "; ".join(name for name, _ in failed),
          failed != [] and all("cublas_v2.h" in name + detail for name, detail in failed), failed)
    shutil.rmtree(os.path.dirname(broken))

    print(f"{failures} failed, {time.time() - start:.1f} s in all")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
