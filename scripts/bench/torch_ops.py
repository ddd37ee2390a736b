#!/usr/bin/python3
"""PyTorch twin of torch/bench_test.go: the same work, timed the same way, for the Go vs
Python table in docs/benchmarks/binding.md.

Run with Debian's Python (torch 1.13 + numpy; the `python3` on PATH may lack torch):

    OMP_NUM_THREADS=1 /usr/bin/python3 scripts/bench/torch_ops.py [--repeats 5] [--iters 10] [--json]

Measured, with one intra-op thread (torch.set_num_threads(1)):
  call_dim         a.dim() on a 1-element tensor                     (ns per call)
  add1             a + b on 1-element tensors, result dropped         (ns per call)
  torch_add1       torch.add(a, b), result dropped                    (ns per call)
  lenet_fwd_bwd    LeNet forward + cross-entropy + backward into .grad, batch 1024 of
                   28x28 float32 images                               (ms per iteration)
  meta_step        one second-order LD step: LeNet, 50 base images with soft labels,
                   inner SGD step with create_graph, outer CE on 1024 target images,
                   gradient to the labels only, one Adam step on the labels (ms)

Per-call figures are the median over --repeats of (time of a loop / calls); the model
figures are the median over --iters single iterations after 2 warm-up iterations, as the
Go benchmarks' ms-median/op metric. Each figure is reported twice: wall time
(time.perf_counter) and the CPU time of the calling thread (time.thread_time, the "_cpu"
keys), which a busy shared machine disturbs much less; with one intra-op thread and a
single-threaded BLAS all the work runs on that thread. Inputs are random (normal images,
constant soft labels); the timing does not depend on the values.
"""
import argparse
import json
import math
import platform
import statistics
import time

import torch
import torch.nn.functional as F


def per_call_ns(fn, calls, repeats):
    """Medians over repeats of the mean wall and thread-CPU time of one call, in ns."""
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(calls):
            fn()
        c1, t1 = time.thread_time(), time.perf_counter()
        wall.append((t1 - t0) / calls * 1e9)
        cpu.append((c1 - c0) / calls * 1e9)
    return statistics.median(wall), statistics.median(cpu)


def median_ms(step, iters, warm=2):
    """Medians over iters of the wall and thread-CPU time of one step, in ms."""
    for _ in range(warm):
        step()
    wall, cpu = [], []
    for _ in range(iters):
        t0, c0 = time.perf_counter(), time.thread_time()
        step()
        c1, t1 = time.thread_time(), time.perf_counter()
        wall.append((t1 - t0) * 1e3)
        cpu.append((c1 - c0) * 1e3)
    return statistics.median(wall), statistics.median(cpu)


def put(res, key, pair):
    res[key], res[key.replace("_ns", "_cpu_ns").replace("_ms", "_cpu_ms")] = pair


LENET_SHAPES = [(6, 1, 5, 5), (6,), (16, 6, 5, 5), (16,), (120, 400), (120,),
                (84, 120), (84,), (10, 84), (10,)]


def lenet_params(gen):
    ps = []
    for i, shape in enumerate(LENET_SHAPES):
        w = LENET_SHAPES[i & ~1]
        bound = 1.0 / math.sqrt(math.prod(w[1:]))
        p = (torch.rand(shape, generator=gen) * 2 - 1) * bound
        ps.append(p.requires_grad_(True))
    return ps


def lenet(p, x):
    h = F.max_pool2d(F.relu(F.conv2d(x, p[0], p[1], padding=2)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, p[2], p[3])), 2)
    h = h.flatten(1)
    h = F.relu(F.linear(h, p[4], p[5]))
    h = F.relu(F.linear(h, p[6], p[7]))
    return F.linear(h, p[8], p[9])


def soft_ce(logits, y):
    return torch.mean(torch.sum(-y * F.log_softmax(logits, dim=1), dim=1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5, help="repeats of each per-call loop")
    ap.add_argument("--calls", type=int, default=1_000_000, help="calls per per-call loop")
    ap.add_argument("--iters", type=int, default=10, help="timed iterations of the model steps")
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    args = ap.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(1)

    res = {"torch": torch.__version__, "python": platform.python_version(),
           "threads": torch.get_num_threads()}

    a, b = torch.ones(1), torch.ones(1)
    put(res, "call_dim_ns", per_call_ns(lambda: a.dim(), args.calls, args.repeats))
    put(res, "add1_ns", per_call_ns(lambda: a + b, args.calls // 4, args.repeats))
    put(res, "torch_add1_ns", per_call_ns(lambda: torch.add(a, b), args.calls // 4, args.repeats))

    p = lenet_params(gen)
    x = torch.randn(1024, 1, 28, 28, generator=gen)
    y = torch.randint(0, 10, (1024,), generator=gen)

    def fwd_bwd():
        for q in p:
            q.grad = None
        loss = F.cross_entropy(lenet(p, x), y)
        loss.backward()

    put(res, "lenet_fwd_bwd_ms", median_ms(fwd_bwd, args.iters))

    xb = torch.randn(50, 1, 28, 28, generator=gen)
    labels = torch.full((50, 10), 0.1).requires_grad_(True)
    xt, yt = x, y
    alpha = 0.01
    opt = torch.optim.Adam([labels], lr=1e-3, foreach=False)

    def meta_step():
        inner = soft_ce(lenet(p, xb), labels)
        g = torch.autograd.grad(inner, p, create_graph=True)
        fast = [pi - alpha * gi for pi, gi in zip(p, g)]
        outer = F.cross_entropy(lenet(fast, xt), yt)
        (gl,) = torch.autograd.grad(outer, [labels])
        labels.grad = gl
        opt.step()
        return outer.item()

    put(res, "meta_step_ms", median_ms(meta_step, args.iters))

    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print("%-18s %s" % (k, ("%.1f" % v) if isinstance(v, float) else v))


if __name__ == "__main__":
    main()
