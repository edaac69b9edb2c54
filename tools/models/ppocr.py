"""Trained third-party models for the zoo: PP-OCR from the rapidocr-onnxruntime
wheel on PyPI, run on rendered lines of text.

The zoo's own networks have random weights; these were trained (by
PaddleOCR) and exported by someone else, so they test opc on what a user
brings. The files are used as shipped: their input shapes are dynamic, and
opc is given the shape (--input-shape), as a user would.

  ppocr.py --fetch          downloads the pinned wheel with pip and keeps its
                            models in the cache (OPC_PPOCR, default
                            ~/.cache/opc/rapidocr-onnxruntime-VERSION)
  ppocr.py --check          exits 0 when the models are cached and checked
  ppocr.py --read TEXT      renders TEXT and prints what the recogniser reads

MODELS names each model's file, its SHA-256 and the input shape the zoo
gives it. text_image() renders the inputs: black text on white, normalised
as PP-OCR's preprocessing does, (x / 255 - 0.5) / 0.5.
"""

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

WHEEL = "rapidocr-onnxruntime"
VERSION = "1.4.4"
# zoo name -> (file in the wheel's models folder, its SHA-256, input shape)
MODELS = {
    "ppocr_rec": ("ch_PP-OCRv4_rec_infer.onnx",
                  "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
                  (1, 3, 48, 320)),
    "ppocr_det": ("ch_PP-OCRv4_det_infer.onnx",
                  "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
                  (1, 3, 96, 320)),
}
INPUT = "x"
# The lines the zoo renders; draw d of seed S shows TEXTS[(S + d) % len].
TEXTS = ["opc compiles ONNX", "Batch size one", "Hello, world 42", "CUDA graphs",
         "streams and events", "Inference at 7 ms", "QUICK BROWN FOX", "tensor cores"]
LINE_HEIGHT = 48


def cache_dir():
    return os.environ.get("OPC_PPOCR") or os.path.join(
        os.path.expanduser("~"), ".cache", "opc", "%s-%s" % (WHEEL, VERSION))


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch():
    """Downloads the pinned wheel and keeps its models, checked, in the cache."""
    folder = cache_dir()
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "%s==%s" % (WHEEL, VERSION), "-d", tmp], check=True)
        wheel = zipfile.ZipFile(os.path.join(tmp, next(f for f in os.listdir(tmp)
                                                       if f.endswith(".whl"))))
        for file, digest, _ in MODELS.values():
            data = wheel.read("rapidocr_onnxruntime/models/" + file)
            if hashlib.sha256(data).hexdigest() != digest:
                sys.exit("ppocr.py: %s in %s %s is not the pinned file (SHA-256 %s)"
                         % (file, WHEEL, VERSION, digest))
            with open(os.path.join(folder, file + ".tmp"), "wb") as f:
                f.write(data)
            os.replace(os.path.join(folder, file + ".tmp"), os.path.join(folder, file))


def model_path(name):
    """The cached file of zoo model `name`, fetched on first use and checked."""
    file, digest, _ = MODELS[name]
    path = os.path.join(cache_dir(), file)
    if not os.path.exists(path):
        fetch()
    if _sha256(path) != digest:
        sys.exit("ppocr.py: %s is not the pinned file; remove it to fetch it again" % path)
    return path


def input_shape(name):
    return MODELS[name][2]


def _line(text, height):
    """One line of text, black on white, `height` pixels high, as a PIL image."""
    from PIL import Image, ImageDraw, ImageFont
    font = ImageFont.load_default(size=int(height * 0.62))
    left, top, right, bottom = font.getbbox(text)
    image = Image.new("L", (right - left + height // 4, height), 255)
    ImageDraw.Draw(image).text((height // 8 - left, (height - (bottom - top)) // 2 - top), text,
                               fill=0, font=font)
    return image


def text_image(texts, shape):
    """A (1, 3, H, W) float32 input showing `texts`, one line per LINE_HEIGHT
    rows (at least one), each scaled to its line's height and at most W
    wide, the rest white."""
    from PIL import Image
    n, c, h, w = shape
    assert n == 1 and c == 3, shape
    page = np.full((h, w), 255.0)
    rows = max(1, h // LINE_HEIGHT)
    height = min(h, LINE_HEIGHT)
    for k in range(rows):
        line = _line(texts[k % len(texts)], height)
        width = min(w, int(round(line.width * height / line.height)))
        line = line.resize((width, height), Image.BILINEAR)
        page[k * height:(k + 1) * height, :width] = np.asarray(line, np.float64)
    x = (page / 255.0 - 0.5) / 0.5
    return np.ascontiguousarray(np.broadcast_to(x, (1, 3, h, w)), dtype=np.float32)


def draw_texts(seed, draw, count):
    return [TEXTS[(seed + draw + k) % len(TEXTS)] for k in range(count)]


def read(probabilities, model_file):
    """The recogniser's CTC output (1, T, classes) decoded greedily with the
    character list in the model's metadata."""
    import onnx
    meta = {p.key: p.value for p in onnx.load(model_file, load_external_data=False).metadata_props}
    chars = ["<blank>"] + meta["character"].splitlines() + [" "]
    text, previous = "", 0
    for k in probabilities[0].argmax(-1):
        if k != previous and k != 0:
            text += chars[k]
        previous = k
    return text


def main(argv):
    if argv == ["--check"]:
        # exit 0 when every model is cached and checked
        for name, (file, digest, _) in MODELS.items():
            path = os.path.join(cache_dir(), file)
            if not os.path.exists(path) or _sha256(path) != digest:
                return 1
        return 0
    if argv == ["--fetch"]:
        fetch()
        print("ppocr: %s %s's models in %s" % (WHEEL, VERSION, cache_dir()))
        return 0
    if len(argv) == 2 and argv[0] == "--read":
        import onnxruntime as ort
        path = model_path("ppocr_rec")
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        y = sess.run(None, {INPUT: text_image([argv[1]], input_shape("ppocr_rec"))})[0]
        print(read(y, path))
        return 0
    sys.exit("usage: ppocr.py --fetch | --check | --read TEXT")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
