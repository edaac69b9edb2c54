"""Natural images for the zoo: the photographs bundled in scikit-image's wheel.

Random weights fed white noise give outputs that hardly depend on their
input (a global average pool averages the noise away), so a check against
ONNX Runtime could not tell a right answer from a wrong one. The zoo feeds
photographs instead, and calibrates its networks on them (calibrate.py).

The photographs come from scikit-image's own data folder, which its wheel
carries (no download). They are cut to a centred square and resized to
SIDE x SIDE here, with numpy alone, and kept in a cache file, so that a
machine without scikit-image (the lent GPU machine) uses a carried copy:

  OPC_PHOTOS=FILE        the cache (default ~/.cache/opc/photos-v1.npz)
  photos.py --write      makes the cache (needs scikit-image)
  photos.py --check      exits 0 when the cache is there

Every model input is then cut from those squares by image_batch(): resized
to the input's height and width and normalised with ImageNet's mean and
standard deviation, as torchvision's models expect.
"""

import os
import sys

import numpy as np

SIDE = 320
CACHE_VERSION = 1
# Colour photographs first, then grey ones (made RGB). The first
# CALIBRATION of them calibrate the zoo's networks; a test draws its
# inputs from all of them.
FILES = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png",
         "hubble_deep_field.jpg", "retina.jpg", "ihc.png", "camera.png", "coins.png", "moon.png",
         "brick.png", "grass.png", "gravel.png", "clock_motion.png", "cell.png", "page.png",
         "text.png"]
CALIBRATION = 8
MEAN = np.array([0.485, 0.456, 0.406], np.float64)
STD = np.array([0.229, 0.224, 0.225], np.float64)


def cache_path():
    return os.environ.get("OPC_PHOTOS") or os.path.join(
        os.path.expanduser("~"), ".cache", "opc", "photos-v%d.npz" % CACHE_VERSION)


def _resize_matrix(n_in, n_out):
    """(n_out, n_in) weights of a triangle filter whose support grows with
    the reduction (an antialiased linear resize), each row summing to 1."""
    scale = n_in / n_out
    support = max(scale, 1.0)
    centres = (np.arange(n_out) + 0.5) * scale - 0.5
    taps = np.arange(n_in)[None, :] - centres[:, None]
    w = np.clip(1.0 - np.abs(taps) / support, 0.0, None)
    return w / w.sum(axis=1, keepdims=True)


def resize(image, h, w):
    """image (H, W, C) float64 -> (h, w, C), separable, numpy only."""
    rows = _resize_matrix(image.shape[0], h)
    cols = _resize_matrix(image.shape[1], w)
    out = np.tensordot(rows, image, axes=(1, 0))            # (h, W, C)
    return np.tensordot(cols, out, axes=(1, 1)).transpose(1, 0, 2)   # (h, w, C)


def _square(image):
    h, w = image.shape[:2]
    s = min(h, w)
    top, left = (h - s) // 2, (w - s) // 2
    return image[top:top + s, left:left + s]


def write_cache(path):
    """Reads scikit-image's bundled photographs and writes the cache."""
    try:
        import skimage
        from skimage import io
    except ImportError:
        sys.exit("photos.py: scikit-image is needed to make %s (pip install scikit-image), "
                 "or set OPC_PHOTOS to a copy of that file" % path)
    folder = os.path.join(os.path.dirname(skimage.__file__), "data")
    squares = []
    for name in FILES:
        image = io.imread(os.path.join(folder, name))
        if image.ndim == 2:
            image = np.stack([image] * 3, axis=-1)
        image = _square(image[..., :3].astype(np.float64))
        squares.append(np.clip(np.rint(resize(image, SIDE, SIDE)), 0, 255).astype(np.uint8))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp.npz"
    np.savez_compressed(tmp, photos=np.stack(squares), names=np.array(FILES))
    os.replace(tmp, path)


_photos = None


def photos():
    """(len(FILES), SIDE, SIDE, 3) uint8, made on first use."""
    global _photos
    if _photos is None:
        path = cache_path()
        if not os.path.exists(path):
            write_cache(path)
        with np.load(path) as f:
            _photos = f["photos"]
        if _photos.shape != (len(FILES), SIDE, SIDE, 3):
            sys.exit("photos.py: %s holds %s, not %d photographs of %dx%d; remove it to remake it"
                     % (path, _photos.shape, len(FILES), SIDE, SIDE))
    return _photos


def count():
    return len(FILES)


def image(k, h, w, channels=3):
    """Photograph k as a normalised (channels, h, w) float32 array; a
    one-channel input gets the photograph's luminance."""
    x = (resize(photos()[k].astype(np.float64) / 255.0, h, w) - MEAN) / STD
    if channels == 1:
        x = x @ np.array([0.299, 0.587, 0.114]) / 1.0
        x = x[..., None]
    elif channels != 3:
        raise ValueError("an image input has 1 or 3 channels, not %d" % channels)
    return np.ascontiguousarray(x.transpose(2, 0, 1), dtype=np.float32)


def image_batch(indices, shape):
    """A (N, C, H, W) batch of the photographs `indices` (one per item)."""
    n, c, h, w = shape
    assert len(indices) == n
    return np.stack([image(k, h, w, c) for k in indices])


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_cache(cache_path())
        print("photos: %d photographs of %dx%d in %s" % (len(FILES), SIDE, SIDE, cache_path()))
    elif sys.argv[1:] == ["--check"]:
        # exit 0 when the cache is there and whole
        sys.exit(0 if os.path.exists(cache_path()) and photos() is not None else 1)
    else:
        sys.exit("usage: photos.py --write | --check")
