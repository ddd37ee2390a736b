#!/usr/bin/python3
"""Run one of the authors' scripts (ondrejbohdal/label-distillation) unchanged on CIFAR-10
from the shared JPEG copy, and print what it reports (scripts/trace/README.md).

    /usr/bin/python3 scripts/trace/authors_cifar10.py --authors DIR --script label_distillation_rr \
        [--data-dir ../shared/datasets] [--json out.json] [--base-indices-out FILE] -- \
        --source cifar10 --target cifar10 --baseline True --balanced_source True \
        --random_seed 1234 --num_base_examples 100

Their code reads CIFAR-10 through torchvision's `datasets.CIFAR10`, i.e. the python pickles
of the official release, which cannot be had here: ../shared/datasets/cifar10 holds the same
60,000 images re-encoded as JPEG (quality 75). This driver decodes that archive with
torchvision's `decode_jpeg` (libjpeg), writes the pickles torchvision expects into a
temporary folder (train images in one fixed shuffled order, seed 0: the archive lost the
original interleaving; test images in archive order) and lets torchvision skip its MD5 check
of the release files, which these are not. Nothing else of theirs is touched: the split,
the base examples, the training and the numbers are their code's. Everything after `--`
goes to their argument parser. Their results JSON is printed (and copied to --json), with
the mean and population std of their test accuracies. --base-indices-out writes the base
examples their code drew as positions in ldtorch's CIFAR-10 train file (class order, then file
name), for `ldtorch distill --base-indices`: the same 100 images through both.

Why: the CIFAR-10 baselines ldtorch measures on this copy sit 1.5-4.5 paper stds below the
paper. Their code on the same copy separates the copy from ldtorch (docs/RESULTS.md).
Needs Debian's python3-torch, python3-torchvision, python3-tqdm.
"""
import argparse
import importlib
import io
import json
import os
import pickle
import shutil
import sys
import tarfile
import tempfile

import numpy as np
import torch
import torchvision
import torchvision.io

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--authors", required=True, help="a checkout of ondrejbohdal/label-distillation")
    p.add_argument("--script", required=True, choices=["label_distillation_rr", "label_distillation_or2"])
    p.add_argument("--data-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "..", "..", "shared", "datasets"))
    p.add_argument("--json", help="also write their results JSON here")
    p.add_argument("--base-indices-out", help="write the base examples their code drew, as "
                   "positions in ldtorch's train file, to this text file")
    argv = sys.argv[1:]
    theirs = []
    if "--" in argv:
        k = argv.index("--")
        argv, theirs = argv[:k], argv[k + 1:]
    return p.parse_args(argv), theirs


def decode(data_dir):
    """The archive's images as (N, 3072) uint8 rows (CIFAR's channel-major layout), labels and
    member names, per split, in archive order."""
    out = {"train": ([], [], []), "test": ([], [], [])}
    with tarfile.open(os.path.join(data_dir, "cifar10", "cifar-10-images-jpeg.tar.gz")) as t:
        for m in t:
            if not m.isfile() or not m.name.endswith(".jpg"):
                continue
            _, split, cls, _ = m.name.split("/")
            raw = torch.frombuffer(bytearray(t.extractfile(m).read()), dtype=torch.uint8)
            img = torchvision.io.decode_jpeg(raw, mode=torchvision.io.ImageReadMode.RGB)  # (3, 32, 32)
            out[split][0].append(img.reshape(-1).numpy())
            out[split][1].append(CLASSES.index(cls))
            out[split][2].append(m.name)
    return {k: (np.stack(v[0]), np.array(v[1]), v[2]) for k, v in out.items()}


def ldtorch_order(labels, names):
    """The archive order's indices in ldtorch's order of an image tree: class, then file name
    (labeldistill/data/imagefolder.go)."""
    return sorted(range(len(labels)), key=lambda i: (labels[i], os.path.basename(names[i])))


def stage(data_dir, work):
    """torchvision's cifar-10-batches-py under work/data, and their results/ folder. Returns
    the position in ldtorch's train file of each staged train image."""
    root = os.path.join(work, "data", "cifar-10-batches-py")
    os.makedirs(root)
    splits = decode(data_dir)
    x, y, names = splits["train"]
    ours = ldtorch_order(y, names)
    position = np.empty(len(y), dtype=np.int64)
    position[ours] = np.arange(len(y))
    order = np.random.RandomState(0).permutation(len(y))
    x, y = x[order], y[order]
    for b in range(5):
        part = slice(b * 10000, (b + 1) * 10000)
        with open(os.path.join(root, "data_batch_%d" % (b + 1)), "wb") as f:
            pickle.dump({"data": x[part], "labels": y[part].tolist()}, f)
    tx, ty, _ = splits["test"]
    with open(os.path.join(root, "test_batch"), "wb") as f:
        pickle.dump({"data": tx, "labels": ty.tolist()}, f)
    with open(os.path.join(root, "batches.meta"), "wb") as f:
        pickle.dump({"label_names": CLASSES}, f)
    os.makedirs(os.path.join(work, "results"))
    # the staged files are not the release's: torchvision's CIFAR module would refuse them
    # by MD5 and try to download the release
    torchvision.datasets.cifar.check_integrity = lambda *args, **kwargs: True
    return position[order]


def record_first_reads():
    """Records the indices read from the first CIFAR-10 dataset object their code reads: the
    base examples' loader, read before anything else is."""
    reads = {"owner": None, "indices": [], "labels": []}
    get = torchvision.datasets.CIFAR10.__getitem__

    def getitem(self, index):
        item = get(self, index)
        if reads["owner"] is None:
            reads["owner"] = id(self)
        if reads["owner"] == id(self) and len(reads["indices"]) < 100000:
            reads["indices"].append(int(index))
            reads["labels"].append(int(item[1]))
        return item
    torchvision.datasets.cifar.CIFAR10.__getitem__ = getitem
    return reads


def base_examples(reads, theirs):
    """Their base examples from the reads, as their selection takes them: the first N read
    (unbalanced) or the first N/classes read of each class, in read order (balanced)."""
    def arg(name, default):
        return theirs[theirs.index(name) + 1] if name in theirs else default
    n = int(arg("--num_base_examples", "100"))
    if arg("--balanced_source", "False").lower() not in ("true", "1", "yes", "t", "y"):
        return reads["indices"][:n], reads["labels"][:n]
    counts, idx, lab = {}, [], []
    for i, c in zip(reads["indices"], reads["labels"]):
        if counts.get(c, 0) < n // len(CLASSES):
            counts[c] = counts.get(c, 0) + 1
            idx.append(i)
            lab.append(c)
    return idx, lab


def main():
    opts, theirs = parse()
    authors = os.path.abspath(opts.authors)
    data_dir = os.path.abspath(opts.data_dir)
    out = os.path.abspath(opts.json) if opts.json else None
    indices_out = os.path.abspath(opts.base_indices_out) if opts.base_indices_out else None
    work = tempfile.mkdtemp(prefix="authors-cifar10-")
    try:
        position = stage(data_dir, work)
        reads = record_first_reads()
        os.chdir(work)
        sys.path.insert(0, authors)
        sys.argv = [opts.script + ".py"] + theirs
        mod = importlib.import_module(opts.script)
        mod.main()
        if indices_out:
            idx, lab = base_examples(reads, theirs)
            with open(indices_out, "w") as f:
                f.write("# the base examples of %s %s, as positions in ldtorch's CIFAR-10 train "
                        "file; their classes: %s\n" % (opts.script, " ".join(theirs), lab))
                f.write("\n".join(str(position[i]) for i in idx) + "\n")
        results = os.path.join(work, "results")
        for name in sorted(os.listdir(results)):
            with open(os.path.join(results, name)) as f:
                res = json.load(f)
            if out:
                with open(out, "w") as g:
                    json.dump(res, g)
            errs = [e for k, v in res.items() if k.startswith("test_top_1_error") for e in v]
            acc = 100 - np.array(errs, dtype=np.float64)
            summary = {k: v for k, v in res.items() if not isinstance(v, list) or len(v) < 30}
            print(json.dumps(summary))
            if len(acc):
                print("authors %s: %s: test accuracy %.2f +- %.2f %% (population std, %d models)"
                      % (opts.script, name, acc.mean(), acc.std(), len(acc)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
