#!/usr/bin/python3
"""Run one of the authors' scripts (ondrejbohdal/label-distillation) unchanged and record
what it computes, tensor by tensor, for ldtorch to replay (scripts/trace/README.md).

    /usr/bin/python3 scripts/trace/authors.py --authors DIR --script data_distillation_rr \
        --out trace.npz [--steps 1,2,10,100] [--data-dir ../shared/datasets] -- \
        --epochs 5 --random_seed 1234 --num_base_examples 100

--threads and --init-noise run their code under another reduction order or a rounding-sized
change of the initial values: compare.py then measures how far their code moves from itself.

DIR is a checkout of the authors' repository, kept outside this one; nothing of it is
copied here. Everything after `--` goes to their argument parser. Their script runs in a
temporary folder that holds MNIST's raw IDX files from --data-dir (torchvision then finds
them and downloads nothing) and their results/ folder. The driver only wraps what their
code calls (torch.randperm, torch.optim.Adam, the DataLoader's sampler, their model
classes, their train/validate/test and ridge functions) to record inputs and outputs; the
arithmetic is theirs. Needs Debian's python3-torch, python3-torchvision, python3-tqdm.

The trace (one .npz, every array named below; steps are 1-based meta-steps):
  args                    their parsed arguments as JSON (UTF-8 bytes, as every string here)
  target_set, validation  MNIST train indices of their target set and validation split
  init_images             the images before the first step, pixels in [0, 1] (image scripts)
  init_labels             the labels before the first step (label scripts)
  base_indices            MNIST train indices of the base examples (label scripts; their
                          images matched pixel for pixel in the base loader's order)
  model<k>.phase          where their k-th network was built (main, train, validate, test)
  model<k>.<param>        its initial parameters (state_dict names)
  target_offsets, target_idx   meta-step t's target batch: target_idx[off[t-1]:off[t]]
  base_perm               (steps, N) each meta-step's permutation; the base batch is
                          its first inner_batch_size entries
  target_err, target_loss every meta-step's top-1 error (%) and cross-entropy on its
                          target batch
  step<t>.*               at a traced step t: ridge.z, ridge.y, ridge.w (the solve's
                          input and output), image_grad or label_grad, then images /
                          labels / theta.<param> after step t
  val<k>.steps, val<k>.perm, val<k>.err   the k-th validation: steps, its permutations,
                          its top-1 error (%); test<k>.* the same for the k-th test model
"""
import argparse
import gzip
import importlib
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

MNIST_FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte",
               "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--authors", required=True, help="a checkout of ondrejbohdal/label-distillation")
    p.add_argument("--script", required=True,
                   choices=["data_distillation_rr", "data_distillation_or2",
                            "label_distillation_rr", "label_distillation_or2"])
    p.add_argument("--out", required=True, help="the trace .npz to write")
    p.add_argument("--steps", default="1,2,10,100", help="meta-steps to record in full")
    p.add_argument("--data-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "..", "..", "shared", "datasets"))
    p.add_argument("--max-tests", type=int, default=20, help="test models to record (their script runs 20)")
    p.add_argument("--threads", type=int, default=0,
                   help="torch.set_num_threads before their script runs (0: torch's default)")
    p.add_argument("--init-noise", type=float, default=0.0,
                   help="scale each initial learnt value by (1 + e) with e uniform in [-NOISE, NOISE], drawn "
                        "by numpy (their torch random stream is untouched): their code's sensitivity to rounding")
    p.add_argument("--init-noise-seed", type=int, default=0, help="numpy's seed for --init-noise")
    argv = sys.argv[1:]
    theirs = []
    if "--" in argv:
        k = argv.index("--")
        argv, theirs = argv[:k], argv[k + 1:]
    return p.parse_args(argv), theirs


def stage_mnist(data_dir, work):
    raw = os.path.join(work, "data", "MNIST", "raw")
    os.makedirs(raw)
    for name in MNIST_FILES:
        src = os.path.join(data_dir, "mnist", name + ".gz")
        with gzip.open(src, "rb") as f, open(os.path.join(raw, name), "wb") as g:
            shutil.copyfileobj(f, g)
    os.makedirs(os.path.join(work, "results"))


def np_of(t):
    return np.array(t.detach().cpu().numpy(), copy=True)


class Recorder:
    def __init__(self, steps):
        self.steps = set(steps)
        self.out = {}
        self.phase = "main"
        self.step = 0          # meta-steps begun
        self.images = None     # their learnt image tensor
        self.labels = None     # their learnt label tensor
        self.models = []       # (phase, module)
        self.learner = None    # the network the meta-step trains now
        self.targets = []      # per meta-step: MNIST train indices
        self.perms = []        # per meta-step: the base permutation
        self.fresh = None      # the current validation / test record
        self.counts = {"validate": 0, "test": 0}
        self.errs, self.losses = [], []  # every meta-step's target error (%) and loss
        self.source_orders = []          # the label scripts' base-example loader, per epoch
        self.pixels = None               # MNIST's train pixels (uint8), to name base examples
        self.init_noise, self.init_noise_seed = 0.0, 0  # --init-noise, --init-noise-seed

    def put(self, key, value):
        if isinstance(value, str):  # as UTF-8 bytes: ldtorch's npz reader takes no strings
            self.out[key] = np.frombuffer(value.encode(), dtype=np.uint8)
        elif torch.is_tensor(value):
            self.out[key] = np_of(value)
        elif isinstance(value, int):
            self.out[key] = np.asarray(value, dtype=np.int64)
        else:
            self.out[key] = np.asarray(value)

    def perturb(self, value):
        """--init-noise: the initial learnt value, each entry scaled by 1 + e (recorded after)."""
        if self.init_noise:
            e = np.random.RandomState(self.init_noise_seed).uniform(-self.init_noise, self.init_noise, tuple(value.shape))
            with torch.no_grad():
                value.mul_(torch.from_numpy(1 + e).to(value.dtype))

    def traced(self):
        return self.phase == "train" and self.step in self.steps

    def after_step(self, t):
        """The state after meta-step t (recorded when step t+1 begins, or at the end)."""
        if t not in self.steps:
            return
        if self.images is not None:
            self.put("step%d.images" % t, self.images)
        if self.labels is not None:
            self.put("step%d.labels" % t, self.labels)
        if self.learner is not None:
            for name, v in self.learner.state_dict().items():
                self.put("step%d.theta.%s" % (t, name), v)


def install(rec, mod):
    real_randperm = torch.randperm

    def randperm(n, *a, **kw):
        perm = real_randperm(n, *a, **kw)
        if kw.get("generator") is not None or a:
            return perm  # the DataLoader's sampler, not theirs
        if rec.phase == "train":
            rec.after_step(rec.step)
            rec.step += 1
            rec.perms.append(np_of(perm))
        elif rec.fresh is not None:
            rec.fresh["perm"].append(np_of(perm))
        return perm
    torch.randperm = randperm

    real_adam = torch.optim.Adam

    class Adam(real_adam):
        def __init__(self, params, *a, **kw):
            params = list(params)
            super().__init__(params, *a, **kw)
            self.watched = None
            if rec.phase == "main" and len(params) == 1 and params[0].dim() == 4 and rec.images is None:
                rec.images, self.watched = params[0], "image_grad"
                rec.perturb(params[0])
                rec.put("init_images", params[0])
            elif rec.phase == "main" and len(params) == 1 and params[0].dim() == 2 and rec.labels is None \
                    and params[0].shape[0] > 1:
                rec.labels, self.watched = params[0], "label_grad"
                rec.perturb(params[0])
                rec.put("init_labels", params[0])

        def step(self, *a, **kw):
            if self.watched and rec.traced():
                rec.put("step%d.%s" % (rec.step, self.watched), self.param_groups[0]["params"][0].grad)
            return super().step(*a, **kw)
    torch.optim.Adam = Adam

    def watch_model(cls):
        # In place (their module refers to its classes by name, super() included).
        real_init = cls.__init__

        def __init__(self, *a, **kw):
            real_init(self, *a, **kw)
            k = len(rec.models)
            rec.models.append(rec.phase)
            rec.put("model%d.phase" % k, rec.phase)
            for name, v in self.state_dict().items():
                rec.put("model%d.%s" % (k, name), v)
            if rec.phase in ("main", "train"):
                rec.learner = self
            if rec.fresh is not None:
                rec.fresh["model"] = k
        cls.__init__ = __init__
    seen = set()
    for holder in [mod, getattr(mod, "M", None)]:
        if holder is None:
            continue
        for name in ["LeNet", "AlexCifarNet", "LeNetMeta", "AlexCifarNetMeta"]:
            cls = getattr(holder, name, None)
            if cls is not None and cls not in seen:
                seen.add(cls)
                watch_model(cls)

    import torch.utils.data.dataloader as dl
    real_sampler = dl.RandomSampler

    class Sampler(real_sampler):
        def __iter__(self):
            order = list(super().__iter__())
            base = mnist_indices(self.data_source)
            bs = getattr(self, "trace_batch", rec.batch_size)
            if bs != rec.batch_size:  # the label scripts' loader of base examples
                rec.source_orders.append(base[np.array(order)])
                return iter(order)
            for lo in range(0, len(order), bs):
                rec.targets.append(base[np.array(order[lo:lo + bs])])
            return iter(order)
    dl.RandomSampler = Sampler

    real_loader_init = torch.utils.data.DataLoader.__init__

    def loader_init(self, *a, **kw):
        real_loader_init(self, *a, **kw)
        if isinstance(self.sampler, Sampler):
            self.sampler.trace_batch = self.batch_size
    torch.utils.data.DataLoader.__init__ = loader_init

    real_split = torch.utils.data.random_split

    def random_split(dataset, lengths, *a, **kw):
        parts = real_split(dataset, lengths, *a, **kw)
        if isinstance(dataset, torch.utils.data.Subset):  # the target set out of the 50000
            rec.put("target_set", mnist_indices(parts[0]))
        else:
            rec.put("validation", mnist_indices(parts[1]))
        return parts
    torch.utils.data.random_split = random_split

    if hasattr(mod, "get_local_weights"):
        real_ridge = mod.get_local_weights

        def get_local_weights(z, y, device):
            w = real_ridge(z, y, device)
            if rec.traced():
                for k, v in (("z", z), ("y", y), ("w", w)):
                    rec.put("step%d.ridge.%s" % (rec.step, k), v)
            return w
        mod.get_local_weights = get_local_weights

    real_err = mod.compute_error_rate

    def compute_error_rate(output, target, topk=(1,)):
        res = real_err(output, target, topk)
        if rec.phase == "train":  # the meta-step's target batch
            rec.errs.append(float(res[0]))
            rec.losses.append(float(torch.nn.functional.cross_entropy(output, target)))
        return res
    mod.compute_error_rate = compute_error_rate

    def phased(name, fn):
        def run(*a, **kw):
            prev = rec.phase
            rec.phase = name
            if name in rec.counts:
                rec.counts[name] += 1
                rec.fresh = {"perm": [], "model": -1}
            try:
                result = fn(*a, **kw)
            finally:
                rec.phase = prev
            if name in rec.counts:
                k = rec.counts[name]
                key = "%s%d" % ("val" if name == "validate" else "test", k)
                if rec.fresh["perm"]:
                    rec.put(key + ".perm", np.stack(rec.fresh["perm"]))
                rec.put(key + ".steps", len(rec.fresh["perm"]))
                rec.put(key + ".model", rec.fresh["model"])
                rec.put(key + ".err", float(result[0]))
                rec.fresh = None
            return result
        return run
    real_train = mod.train

    def train(*a, **kw):
        # The label scripts' fixed base examples (their third argument), named once by
        # their MNIST train indices: the first example of the loader's order with the same
        # pixels (their selection is theirs; only the images are matched here).
        if "base_indices" not in rec.out and "label_distillation" in mod.__name__:
            rec.put("base_indices", name_examples(rec, a[2]))
        return real_train(*a, **kw)
    mod.train = train
    mod.train = phased("train", mod.train)
    mod.validate = phased("validate", mod.validate)
    mod.test = phased("test", mod.test)


def name_examples(rec, images):
    """MNIST train indices of normalised images, searched in the base loader's order."""
    px = np.rint((np_of(images) * 0.3081 + 0.1307) * 255).astype(np.uint8).reshape(len(images), -1)
    order = np.concatenate(rec.source_orders)
    where = {}
    for j in order:
        where.setdefault(rec.pixels[j].tobytes(), int(j))
    out = []
    for i, p in enumerate(px):
        if p.tobytes() not in where:
            raise SystemExit("trace: base example %d matches no MNIST train image" % i)
        out.append(where[p.tobytes()])
    return np.array(out, dtype=np.int64)


def mnist_indices(ds):
    """Indices into the underlying dataset of a (nested) Subset."""
    idx = np.arange(len(ds))
    while isinstance(ds, torch.utils.data.Subset):
        idx = np.asarray(ds.indices)[idx]
        ds = ds.dataset
    return idx


def main():
    opts, theirs = parse()
    steps = [int(s) for s in opts.steps.split(",") if s]
    authors = os.path.abspath(opts.authors)
    data_dir = os.path.abspath(opts.data_dir)
    out = os.path.abspath(opts.out)
    work = tempfile.mkdtemp(prefix="authors-trace-")
    try:
        stage_mnist(data_dir, work)
        os.chdir(work)
        sys.path.insert(0, authors)
        sys.argv = [opts.script + ".py"] + theirs
        mod = importlib.import_module(opts.script)
        if opts.threads:
            torch.set_num_threads(opts.threads)
        rec = Recorder(steps)
        rec.init_noise, rec.init_noise_seed = opts.init_noise, opts.init_noise_seed
        rec.batch_size = mod.get_args().batch_size
        rec.put("args", json.dumps(vars(mod.get_args())))
        install(rec, mod)
        with open(os.path.join(work, "data", "MNIST", "raw", "train-images-idx3-ubyte"), "rb") as f:
            rec.pixels = np.frombuffer(f.read()[16:], dtype=np.uint8).reshape(-1, 784)
        mod.main()
        rec.after_step(rec.step)
        rec.put("steps", rec.step)
        off = np.cumsum([0] + [len(t) for t in rec.targets[:rec.step]])
        rec.put("target_offsets", off.astype(np.int64))
        rec.put("target_idx", np.concatenate(rec.targets[:rec.step]).astype(np.int64))
        rec.put("base_perm", np.stack(rec.perms).astype(np.int64))
        rec.put("target_err", np.array(rec.errs))
        rec.put("target_loss", np.array(rec.losses))
        results = os.path.join(work, "results")
        for name in os.listdir(results):
            with open(os.path.join(results, name)) as f:
                rec.put("results", f.read())
        np.savez_compressed(out, **rec.out)
        print("trace: %s (%d meta-steps, %d arrays)" % (out, rec.step, len(rec.out)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
