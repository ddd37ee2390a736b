#!/usr/bin/python3
"""A plain-PyTorch mirror of one label-distillation meta-iteration, for timing.

It reproduces what the authors' reference code (label_distillation_or2.py and
label_distillation_rr.py) computes per step on MNIST with LeNet, N = 100 base examples,
N_i = 50, N_o = 1024 (docs: docs/ALGORITHM.md sections 4 and 5), including the
work the reference does and ldtorch does not:

  LD  the 1024-image target loss is backpropagated into every model parameter as well as
      into the labels (label_loss.backward(retain_graph=True)); the parameter gradients are
      then zeroed before the model's own step, so they are wasted work (docs/ALGORITHM.md §9).
  RR  the 1024 target images go through the feature extractor *with* a graph and
      label_loss.backward() reaches θ and s too (a full backward); the base batch is then
      forwarded a second time for the feature loss; the ridge solve uses an explicit
      torch.inverse as the reference does (docs/ALGORITHM.md recommends a solve instead).

Run with Debian's python (torch 1.13, numpy):

    /usr/bin/python3 scripts/bench/mirror.py --method ld --steps 20 --warmup 3 --json

and it prints one JSON line (see scripts/bench/README.md).  Everything is float32, as in
the reference.  There is no accuracy mode: this is a timing tool only.
"""
import argparse
import gzip
import json
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# The shared datasets beside the repository (../shared/datasets), or $LDTORCH_MNIST_DIR.
MNIST_DIR = os.environ.get("LDTORCH_MNIST_DIR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "datasets", "mnist")
MEAN, STD = 0.1307, 0.3081


# ------------------------------------------------------------------------------ data

def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    ndim = magic & 0xFF
    if (magic >> 8) != 0x08:
        raise ValueError("%s: not an unsigned-byte IDX file (magic %#x)" % (path, magic))
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    off = 4 + 4 * ndim  # 16 bytes for images (3 dims), 8 for labels (1 dim)
    arr = np.frombuffer(data, dtype=np.uint8, offset=off)
    return arr.reshape(dims)


def load_mnist(data_dir, seed, n_base, n_classes=10):
    imgs = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"))
    labs = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(((imgs.astype(np.float32) / 255.0 - MEAN) / STD)[:, None, :, :].copy())
    y = torch.from_numpy(labs.astype(np.int64))
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(x.shape[0], generator=g)
    tr, va = perm[:50000], perm[50000:]
    # balanced base examples from the target-set part (ldtorch's choice, docs/ALGORITHM.md §1)
    per_class = n_base // n_classes
    counts = [0] * n_classes
    base = []
    for i in tr[torch.randperm(tr.numel(), generator=g)].tolist():
        c = int(y[i])
        if counts[c] < per_class:
            counts[c] += 1
            base.append(i)
            if len(base) == n_base:
                break
    base = torch.tensor(base)
    return x[tr].contiguous(), y[tr].contiguous(), x[base].contiguous(), y[base], (x[va], y[va])


def target_batches(x, y, n_o, seed):
    """Endless epochs of shuffled batches of n_o (last batch of an epoch partial)."""
    g = torch.Generator().manual_seed(seed + 1)
    while True:
        perm = torch.randperm(x.shape[0], generator=g)
        for s in range(0, x.shape[0], n_o):
            idx = perm[s:s + n_o]
            yield x[idx], y[idx]


# ------------------------------------------------------------------------------ model

def lenet_params(n_classes=10, with_fc3=True):
    """PyTorch default init: weights and biases U(±1/sqrt(fan_in))."""
    mods = [nn.Conv2d(1, 6, 5, padding=2), nn.Conv2d(6, 16, 5), nn.Linear(400, 120),
            nn.Linear(120, 84)]
    if with_fc3:
        mods.append(nn.Linear(84, n_classes))
    ps = []
    for m in mods:
        ps += [m.weight.detach().clone().requires_grad_(True),
               m.bias.detach().clone().requires_grad_(True)]
    return ps


def lenet_features(p, x):
    h = F.max_pool2d(F.relu(F.conv2d(x, p[0], p[1], padding=2)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, p[2], p[3])), 2)
    h = h.view(h.size(0), -1)
    h = F.relu(F.linear(h, p[4], p[5]))
    return F.relu(F.linear(h, p[6], p[7]))


def lenet(p, x):
    return F.linear(lenet_features(p, x), p[8], p[9])


def rr_head(feat, w):
    # the reference: x.matmul(w[:-1, :]) + w[-1, :]  ==  [feat, 1] @ w
    return feat.matmul(w[:-1, :]) + w[-1, :]


def soft_ce(logits, y):
    return torch.mean(torch.sum(-y * F.log_softmax(logits, dim=1), dim=1))


def ridge_weights(z, y, lam):
    # the reference's get_local_weights: explicit inverse of the N_i x N_i kernel system
    k = z.matmul(z.t()) + lam * torch.eye(z.shape[0])
    return z.t().matmul(torch.inverse(k)).matmul(y)


def error_rate(logits, y):
    return (logits.argmax(dim=1) != y).float().mean().item() * 100.0


def project_labels_(labels):
    with torch.no_grad():
        labels.clamp_(0, 1)
        labels.div_(labels.sum(dim=1, keepdim=True))


# ------------------------------------------------------------------------------ LD

class LD:
    def __init__(self, args, base_x, n_classes=10):
        self.a = args
        self.base_x = base_x
        self.labels = torch.full((base_x.shape[0], n_classes), 1.0 / n_classes, requires_grad=True)
        self.labels_opt = torch.optim.Adam([self.labels], lr=1e-3)
        self.params = lenet_params(n_classes)
        self.opt = torch.optim.Adam(self.params, lr=1e-3)

    def meta_step(self, x, y):
        a = self.a
        idx = torch.randperm(self.base_x.shape[0])[:a.n_inner]
        xb, yb = self.base_x[idx], self.labels[idx]
        inner = soft_ce(lenet(self.params, xb), yb)
        self.opt.zero_grad()
        grads = torch.autograd.grad(inner, self.params, create_graph=True)
        fast = [p - a.inner_lr * g for p, g in zip(self.params, grads)]
        logit = lenet(fast, x)
        label_loss = F.cross_entropy(logit, y)
        self.labels_opt.zero_grad()
        # as the reference: reaches the labels AND every model parameter
        label_loss.backward(retain_graph=True)
        self.labels_opt.step()
        project_labels_(self.labels)
        # model step with the inner loss of step 2 (labels from before the label step)
        self.opt.zero_grad()
        inner.backward()
        self.opt.step()
        return error_rate(logit.detach(), y)

    def eval_setup(self):
        self.eval_params = lenet_params()
        self.eval_opt = torch.optim.Adam(self.eval_params, lr=1e-3)

    def eval_step(self):
        idx = torch.randperm(self.base_x.shape[0])[:self.a.n_inner]
        loss = soft_ce(lenet(self.eval_params, self.base_x[idx]), self.labels[idx].detach())
        self.eval_opt.zero_grad()
        loss.backward()
        self.eval_opt.step()


# ------------------------------------------------------------------------------ RR

class RR:
    def __init__(self, args, base_x, n_classes=10):
        self.a = args
        self.base_x = base_x
        self.n_classes = n_classes
        self.labels = torch.full((base_x.shape[0], n_classes), 1.0 / n_classes, requires_grad=True)
        self.labels_opt = torch.optim.Adam([self.labels], lr=1e-3)
        self.params, self.opt, self.s, self.s_opt, self.w = self._fresh()

    def _fresh(self):
        params = lenet_params(with_fc3=False)
        s = torch.ones(1, requires_grad=True)
        return (params, torch.optim.Adam(params, lr=1e-3), s, torch.optim.Adam([s], lr=0.01),
                torch.zeros(85, self.n_classes))

    def _ridge_update(self, params, w, idx):
        a = self.a
        xb = self.base_x[idx]
        z = lenet_features(params, xb)
        z = torch.cat((z, torch.ones(z.shape[0], 1)), dim=1)
        w_local = ridge_weights(z, self.labels[idx], a.lam)
        return xb, (1 - a.rr_alpha) * w.detach() + a.rr_alpha * w_local

    def meta_step(self, x, y):
        idx = torch.randperm(self.base_x.shape[0])[:self.a.n_inner]
        xb, self.w = self._ridge_update(self.params, self.w, idx)
        # as the reference: the 1024 target images are forwarded with a graph, and the
        # backward below reaches θ and s as well as the labels
        logit = rr_head(lenet_features(self.params, x), self.s * self.w)
        label_loss = F.cross_entropy(logit, y)
        self.labels_opt.zero_grad()
        label_loss.backward(retain_graph=True)
        self.labels_opt.step()
        project_labels_(self.labels)
        # feature loss: the base batch forwarded again, the same attached W
        feat_out = rr_head(lenet_features(self.params, xb), self.s * self.w)
        feat_loss = soft_ce(feat_out, self.labels[idx].detach())
        self.opt.zero_grad()
        self.s_opt.zero_grad()
        feat_loss.backward()
        self.opt.step()
        self.s_opt.step()
        return error_rate(logit.detach(), y)

    def eval_setup(self):
        self.e_params, self.e_opt, self.e_s, self.e_s_opt, self.e_w = self._fresh()

    def eval_step(self):
        # steps 1-3 and 5 with fixed labels (the reference's validate/test loop)
        idx = torch.randperm(self.base_x.shape[0])[:self.a.n_inner]
        xb, self.e_w = self._ridge_update(self.e_params, self.e_w, idx)
        feat_out = rr_head(lenet_features(self.e_params, xb), self.e_s * self.e_w)
        feat_loss = soft_ce(feat_out, self.labels[idx].detach())
        self.e_opt.zero_grad()
        self.e_s_opt.zero_grad()
        feat_loss.backward()
        self.e_opt.step()
        self.e_s_opt.step()


# ------------------------------------------------------------------------------ main

def blas_in_use():
    libs = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = os.path.basename(path).lower()
                if path.startswith("/") and ("blas" in name or "lapack" in name or "mkl" in name) \
                        and path not in libs:
                    libs.append(path)
    except OSError:
        pass
    return ", ".join(libs) if libs else "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--method", choices=["ld", "rr"], default="ld")
    ap.add_argument("--steps", type=int, default=20, help="timed meta-steps")
    ap.add_argument("--warmup", type=int, default=3, help="untimed meta-steps first")
    ap.add_argument("--eval-steps", type=int, default=20, help="timed evaluation steps")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: keep default)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--data-dir", default=MNIST_DIR)
    ap.add_argument("--n-base", type=int, default=100)
    ap.add_argument("--n-inner", type=int, default=50)
    ap.add_argument("--n-outer", type=int, default=1024)
    ap.add_argument("--inner-lr", type=float, default=0.01, help="LD inner SGD step α")
    ap.add_argument("--lam", type=float, default=1.0, help="RR ridge λ")
    ap.add_argument("--rr-alpha", type=float, default=0.01, help="RR pseudo-gradient α")
    ap.add_argument("--json", action="store_true", help="print one JSON line only")
    args = ap.parse_args()

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    t0 = time.perf_counter()
    tx, ty, bx, _, _ = load_mnist(args.data_dir, args.seed, args.n_base)
    load_s = time.perf_counter() - t0
    batches = target_batches(tx, ty, args.n_outer, args.seed)

    algo = (LD if args.method == "ld" else RR)(args, bx)
    times = []
    cpu = []  # CPU time of this thread: with one intra-op thread it is the compute itself, robust to load
    errs = []
    for i in range(args.warmup + args.steps):
        x, y = next(batches)
        t, c = time.perf_counter(), time.thread_time()
        errs.append(algo.meta_step(x, y))
        dt, dc = time.perf_counter() - t, time.thread_time() - c
        if i >= args.warmup:
            times.append(dt)
            cpu.append(dc)

    algo.eval_setup()
    etimes = []
    ecpu = []
    for i in range(args.warmup + args.eval_steps):
        t, c = time.perf_counter(), time.thread_time()
        algo.eval_step()
        dt, dc = time.perf_counter() - t, time.thread_time() - c
        if i >= args.warmup:
            etimes.append(dt)
            ecpu.append(dc)

    res = {
        # "-tuned" when started with glibc malloc variables set (compare.sh runs both ways).
        "impl": "pytorch-mirror" + ("-tuned" if any(k.startswith("MALLOC_") for k in os.environ) else ""),
        "method": args.method,
        "meta_step_median_s": float(np.median(times)),
        "meta_step_p90_s": float(np.percentile(times, 90)),
        "eval_step_median_s": float(np.median(etimes)),
        "meta_step_cpu_median_s": float(np.median(cpu)),
        "eval_step_cpu_median_s": float(np.median(ecpu)),
        "threads": torch.get_num_threads(),
        "blas": blas_in_use(),
        "torch_version": torch.__version__,
        "steps": args.steps,
        "warmup": args.warmup,
        "eval_steps": args.eval_steps,
        "seed": args.seed,
        "n_base": args.n_base,
        "n_inner": args.n_inner,
        "n_outer": args.n_outer,
        "last_err_pct": errs[-1],
        "data_load_s": load_s,
    }
    if args.json:
        print(json.dumps(res))
    else:
        print("%s %s: meta-step median %.4f s (p90 %.4f s) over %d steps; eval step median %.4f s;"
              " %d thread(s); BLAS %s; torch %s"
              % (res["impl"], args.method, res["meta_step_median_s"], res["meta_step_p90_s"],
                 args.steps, res["eval_step_median_s"], res["threads"], res["blas"],
                 res["torch_version"]))


if __name__ == "__main__":
    main()
