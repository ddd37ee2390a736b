#!/usr/bin/python3
"""Write the shared JPEG copy of CIFAR-10, decoded by libjpeg, as CIFAR-10's binary layout in
ldtorch's image order (scripts/trace/README.md).

    /usr/bin/python3 scripts/trace/cifar10_libjpeg_binary.py OUT/cifar10 [--data-dir ../shared/datasets]
    ldtorch distill --dataset cifar10 --data-dir OUT --allow-unknown-data ...

ldtorch decodes the archive with Go's JPEG decoder (labeldistill/data/imagefolder.go), whose
chroma upsampling is not libjpeg's; the authors' code sees torchvision's libjpeg decode
(scripts/trace/authors_cifar10.py). This writes cifar-10-batches-bin/ into the folder given
(OUT/cifar10, the folder `--data-dir OUT` reads CIFAR-10 from) with the libjpeg
pixels, train and test images each in ldtorch's order of the archive (class, then file name),
so a position in ldtorch's train file (`--base-indices`, an artifact's base_indices) names the
same image in both copies: the same run on both isolates the decoder. It also prints how far
the two decodes are apart when given --ldtorch-npz, an artifact's distilled.npz made from the
archive (its base images, normalised, against the same images decoded here).
Needs Debian's python3-torch and python3-torchvision.
"""
import argparse
import os
import sys

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from authors_cifar10 import decode, ldtorch_order  # noqa: E402  (the driver's libjpeg decode)

# CIFAR-10's normalisation in ldtorch (labeldistill/data/registry.go) and the authors' code
MEAN = np.array([125.3, 123.0, 113.9]) / 255.0
STD = np.array([63.0, 62.1, 66.7]) / 255.0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--data-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "..", "..", "shared", "datasets"))
    p.add_argument("--ldtorch-npz", help="an artifact's distilled.npz made from the archive")
    opts = p.parse_args()
    splits = decode(os.path.abspath(opts.data_dir))
    root = os.path.join(opts.out, "cifar-10-batches-bin")
    os.makedirs(root, exist_ok=True)
    ordered = {}
    for split, (x, y, names) in splits.items():
        order = ldtorch_order(y, names)
        ordered[split] = (x[order], y[order])
        rows = np.concatenate([y[order].astype(np.uint8)[:, None], x[order]], axis=1)
        if split == "train":
            for b in range(5):
                rows[b * 10000:(b + 1) * 10000].tofile(os.path.join(root, "data_batch_%d.bin" % (b + 1)))
        else:
            rows.tofile(os.path.join(root, "test_batch.bin"))
    print("wrote %s (train %d, test %d images)" % (root, len(ordered["train"][1]), len(ordered["test"][1])))
    if opts.ldtorch_npz:
        z = np.load(opts.ldtorch_npz)
        idx = z["base_indices"].astype(np.int64)
        go = z["images"].astype(np.float64)  # normalised, as the networks see them
        lj = ordered["train"][0][idx].reshape(len(idx), 3, 32, 32) / 255.0
        lj = (lj - MEAN[None, :, None, None]) / STD[None, :, None, None]
        levels = np.abs(go - lj) * STD[None, :, None, None] * 255.0
        print("ldtorch's decode against libjpeg's, %d base images: mean |difference| %.3f grey "
              "levels, max %.1f, %.1f %% of values differ by more than half a level"
              % (len(idx), levels.mean(), levels.max(), 100.0 * (levels > 0.5).mean()))


if __name__ == "__main__":
    main()
