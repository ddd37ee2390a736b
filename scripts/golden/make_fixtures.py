#!/usr/bin/python3
"""Generate the golden fixtures in testdata/golden/ (float64, deterministic).

Run with Debian's Python (torch 1.13, numpy):

    /usr/bin/python3 scripts/golden/make_fixtures.py [--out testdata/golden] [--only a.npz,b.npz]

Every array name, shape and meaning is documented in testdata/golden/README.md.
The script also proves the second-order label gradients of lenet_meta and rr_meta, and
ConvNet-3's double-backward gradients (convnet), against central finite differences and
exits non-zero if they disagree.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
SEED = 20240601

# Inputs (parameters, images) are rounded to dyadic grids so that they are exact in
# float64 and compress well; every output is full-precision float64.
PARAM_GRID = 2.0 ** -16
IMAGE_GRID = 2.0 ** -10


def q(t, grid):
    return torch.round(t / grid) * grid


def np64(t):
    # always a private copy (numpy() shares memory with tensors updated in place later);
    # np.array keeps 0-d shapes, unlike np.ascontiguousarray
    a = np.array(t.detach().cpu().numpy(), copy=True, order="C")
    if a.dtype == np.float64 or a.dtype == np.int64:
        return a
    raise TypeError("unexpected dtype %s" % a.dtype)


# ---------------------------------------------------------------- LeNet (functional)

LENET_NAMES = ["conv1_w", "conv1_b", "conv2_w", "conv2_b", "fc1_w", "fc1_b",
               "fc2_w", "fc2_b", "fc3_w", "fc3_b"]


def lenet_init(num_classes=10):
    """PyTorch default init (kaiming_uniform(a=sqrt(5)) == U(+-1/sqrt(fan_in)) for
    weights, U(+-1/sqrt(fan_in)) for biases), rounded to PARAM_GRID."""
    mods = [nn.Conv2d(1, 6, 5, padding=2), nn.Conv2d(6, 16, 5),
            nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, num_classes)]
    ps = []
    for m in mods:
        ps.append(q(m.weight.detach().clone(), PARAM_GRID))
        ps.append(q(m.bias.detach().clone(), PARAM_GRID))
    return ps


def lenet_features(p, x):
    h = F.max_pool2d(F.relu(F.conv2d(x, p[0], p[1], padding=2)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, p[2], p[3])), 2)
    h = h.flatten(1)
    h = F.relu(F.linear(h, p[4], p[5]))
    return F.relu(F.linear(h, p[6], p[7]))


def lenet(p, x):
    return F.linear(lenet_features(p, x), p[8], p[9])


def soft_ce(logits, y):
    return torch.mean(torch.sum(-y * F.log_softmax(logits, dim=1), dim=1))


def rand_labels(n, c):
    y = torch.rand(n, c) + 0.05
    return y / y.sum(dim=1, keepdim=True)


def check_no_ties(p, x):
    """Assert that no ReLU input is exactly 0 and no max-pool window has a tie, so the
    (sub)gradients are unambiguous and finite differences are meaningful."""
    def pool_gap(h):
        u = F.unfold(h.flatten(0, 1).unsqueeze(1), 2, stride=2)  # (BC,4,L)
        top2 = torch.topk(u, 2, dim=1).values
        pos = top2[:, 0] > 0  # a window whose max is relu(<=0)=0 passes no gradient
        return (top2[:, 0] - top2[:, 1])[pos].min().item()
    a1 = F.conv2d(x, p[0], p[1], padding=2)
    h1 = F.max_pool2d(F.relu(a1), 2)
    a2 = F.conv2d(h1, p[2], p[3])
    h2 = F.max_pool2d(F.relu(a2), 2)
    a3 = F.linear(h2.flatten(1), p[4], p[5])
    a4 = F.linear(F.relu(a3), p[6], p[7])
    for a in (a1, a2, a3, a4):
        assert (a == 0).sum().item() == 0, "exact zero at a ReLU input"
    gap = min(pool_gap(F.relu(a1)), pool_gap(F.relu(a2)))
    assert gap > 0, "tie in a max-pool window"
    return gap


def fd_check(what, loss_at, y, dy):
    """Central finite differences of loss_at w.r.t. every entry of y, compared with the
    autograd gradient dy.  rel err = max|fd - dy| / max|dy|.

    At eps = 1e-6 the FD itself is limited by float64 round-off in the loss
    (|loss| * 2^-52 / eps ~ 5e-10 absolute, against |dy| ~ 5e-4 because alpha = 0.01), so
    the 1e-6 relative bound is asserted at eps = 1e-4 (truncation error is negligible
    there: the loss depends on y almost linearly), and eps = 1e-6 must agree to 1e-5."""
    res = {}
    for eps, tol in ((1e-6, 1e-5), (1e-5, 1e-6), (1e-4, 1e-6)):
        fd = torch.zeros_like(y)
        for i in range(y.shape[0]):
            for j in range(y.shape[1]):
                yp = y.clone(); yp[i, j] += eps
                ym = y.clone(); ym[i, j] -= eps
                fd[i, j] = (loss_at(yp) - loss_at(ym)) / (2 * eps)
        abs_err = (fd - dy).abs().max().item()
        rel_err = abs_err / dy.abs().max().item()
        print("%s: max|dyb| %.3e; central FD eps %.0e: max abs err %.3e, rel err %.3e (tol %.0e)"
              % (what, dy.abs().max().item(), eps, abs_err, rel_err, tol))
        assert rel_err < tol, "%s disagrees with finite differences" % what
        res[eps] = (abs_err, rel_err)
    return res


# ---------------------------------------------------------------- lenet_meta

def lenet_meta_forward(p, xb, yb, xt, yt, alpha, create_graph=True):
    logits_b = lenet(p, xb)
    inner = soft_ce(logits_b, yb)
    g = torch.autograd.grad(inner, p, create_graph=create_graph)
    fast = [pi - alpha * gi for pi, gi in zip(p, g)]
    logits_t = lenet(fast, xt)
    outer = F.cross_entropy(logits_t, yt)
    return logits_b, inner, g, logits_t, outer


def make_lenet_meta(gen_seed):
    torch.manual_seed(gen_seed)
    p = lenet_init()
    xb = q(torch.randn(8, 1, 28, 28), IMAGE_GRID)
    yb = rand_labels(8, 10)
    xt = q(torch.randn(16, 1, 28, 28), IMAGE_GRID)
    yt = torch.randint(0, 10, (16,), dtype=torch.int64)
    alpha = 0.01

    gap = min(check_no_ties(p, xb), check_no_ties(p, xt))
    pr = [t.clone().requires_grad_(True) for t in p]
    ybr = yb.clone().requires_grad_(True)
    logits_b, inner, g, logits_t, outer = lenet_meta_forward(pr, xb, ybr, xt, yt, alpha)
    (dyb,) = torch.autograd.grad(outer, ybr)

    # finite-difference proof of dyb
    def outer_at(y):
        ps = [t.clone().requires_grad_(True) for t in p]
        return lenet_meta_forward(ps, xb, y, xt, yt, alpha, create_graph=False)[4].item()
    fdres = fd_check("lenet_meta dyb", outer_at, yb, dyb)
    print("lenet_meta: min positive max-pool gap %.3e (no ties, no exact ReLU zeros)" % gap)

    out = {}
    for i, (name, t) in enumerate(zip(LENET_NAMES, p)):
        out["p%d" % i] = np64(t)
    out.update(xb=np64(xb), yb=np64(yb), xt=np64(xt), yt=np64(yt),
               alpha=np.array(alpha, dtype=np.float64),
               logits_b=np64(logits_b), inner=np64(inner),
               logits_t=np64(logits_t), outer=np64(outer), dyb=np64(dyb))
    for i, gi in enumerate(g):
        out["g%d" % i] = np64(gi)
    return out, fdres


# ---------------------------------------------------------------- rr_meta

def add_ones(f):
    return torch.cat([f, torch.ones(f.shape[0], 1, dtype=f.dtype)], dim=1)


def ridge(zb, yb, lam):
    a = zb @ zb.t() + lam * torch.eye(zb.shape[0])
    return zb.t() @ torch.linalg.solve(a, yb)


def rr_forward(p, xb, yb, xt, yt, w0, s, lam, alpha):
    zb = add_ones(lenet_features(p, xb))
    wl = ridge(zb, yb, lam)
    w = (1 - alpha) * w0 + alpha * wl
    zt = add_ones(lenet_features(p, xt))
    logits_t = s * (zt @ w)
    outer = F.cross_entropy(logits_t, yt)
    return zb, wl, w, logits_t, outer


def make_rr_meta(gen_seed):
    torch.manual_seed(gen_seed)
    p = lenet_init()[:8]
    xb = q(torch.randn(8, 1, 28, 28), IMAGE_GRID)
    yb = rand_labels(8, 10)
    yb2 = rand_labels(8, 10)
    xt = q(torch.randn(16, 1, 28, 28), IMAGE_GRID)
    yt = torch.randint(0, 10, (16,), dtype=torch.int64)
    w0 = q(torch.randn(85, 10) * 0.1, PARAM_GRID)
    s0, lam, alpha = 1.3, 1.0, 0.01
    gap = min(check_no_ties(p, xb), check_no_ties(p, xt))

    pr = [t.clone().requires_grad_(True) for t in p]
    ybr = yb.clone().requires_grad_(True)
    s = torch.tensor(s0, requires_grad=True)
    zb, wl, w, logits_t, outer = rr_forward(pr, xb, ybr, xt, yt, w0, s, lam, alpha)
    (dyb,) = torch.autograd.grad(outer, ybr, retain_graph=True)
    feat = soft_ce(s * (zb @ w), yb2)
    grads = torch.autograd.grad(feat, pr + [s])
    fg, fgs = grads[:8], grads[8]

    with torch.no_grad():
        def outer_at(y):
            return rr_forward(p, xb, y, xt, yt, w0, s0, lam, alpha)[4].item()
        fdres = fd_check("rr_meta dyb", outer_at, yb, dyb)

        # also prove fgs (a scalar) by finite differences
        def feat_at(sv):
            zb_, _, w_, _, _ = rr_forward(p, xb, yb, xt, yt, w0, sv, lam, alpha)
            return soft_ce(sv * (zb_ @ w_), yb2).item()
        eps = 1e-6
        fd_s = (feat_at(s0 + eps) - feat_at(s0 - eps)) / (2 * eps)
        s_err = abs(fd_s - fgs.item()) / abs(fgs.item())
        # and a few entries of fg (the path through zb *and* through the ridge solve)
        def feat_at_p(pp):
            zb_, _, w_, _, _ = rr_forward(pp, xb, yb, xt, yt, w0, s0, lam, alpha)
            return soft_ce(s0 * (zb_ @ w_), yb2).item()
        fg_err = 0.0
        for (k, flat) in ((1, 0), (1, 5), (3, 7), (5, 11), (7, 3), (7, 40), (6, 1234)):
            pp = [t.clone() for t in p]; pm = [t.clone() for t in p]
            pp[k].view(-1)[flat] += eps; pm[k].view(-1)[flat] -= eps
            fd_p = (feat_at_p(pp) - feat_at_p(pm)) / (2 * eps)
            an = fg[k].reshape(-1)[flat].item()
            fg_err = max(fg_err, abs(fd_p - an) / max(abs(an), 1e-3))
    print("rr_meta fgs: FD (eps 1e-6) rel err %.3e; 7 entries of fg: max rel err %.3e; "
          "min positive max-pool gap %.3e" % (s_err, fg_err, gap))
    assert fg_err < 1e-5, "rr_meta fg disagrees with finite differences"
    fdres["fg_rel_err"] = fg_err
    assert s_err < 1e-6, "rr_meta fgs disagrees with finite differences"
    fdres["fgs_rel_err"] = s_err

    out = {}
    for i, t in enumerate(p):
        out["p%d" % i] = np64(t)
    out.update(xb=np64(xb), yb=np64(yb), yb2=np64(yb2), xt=np64(xt), yt=np64(yt),
               w0=np64(w0), s=np.array(s0), lam=np.array(lam), alpha=np.array(alpha),
               zb=np64(zb), wl=np64(wl), w=np64(w), logits_t=np64(logits_t),
               outer=np64(outer), dyb=np64(dyb), feat=np64(feat), fgs=np64(fgs))
    for i, gi in enumerate(fg):
        out["fg%d" % i] = np64(gi)
    return out, fdres


# ---------------------------------------------------------------- ops

def vjp_case(out, name, fn, inputs, grad_mask=None):
    """Store <name>_in<k>, <name>_out, <name>_gout, <name>_gin<k> (for differentiable
    inputs only, in input order)."""
    if grad_mask is None:
        grad_mask = [True] * len(inputs)
    ins = [t.clone().requires_grad_(m) for t, m in zip(inputs, grad_mask)]
    y = fn(*ins)
    gout = torch.randn(y.shape)
    diff = [t for t, m in zip(ins, grad_mask) if m]
    gins = torch.autograd.grad(y, diff, gout)
    for k, t in enumerate(inputs):
        out["%s_in%d" % (name, k)] = np64(t)
    out[name + "_out"] = np64(y)
    out[name + "_gout"] = np64(gout)
    k = 0
    for idx, m in enumerate(grad_mask):
        if m:
            out["%s_gin%d" % (name, idx)] = np64(gins[k])
            k += 1


def make_ops(gen_seed):
    torch.manual_seed(gen_seed)
    out = {}
    vjp_case(out, "conv", lambda x, w, b: F.conv2d(x, w, b, stride=1, padding=1, groups=2),
             [torch.randn(2, 4, 7, 7), torch.randn(6, 2, 3, 3), torch.randn(6)])
    vjp_case(out, "maxpool", lambda x: F.max_pool2d(x, 3, stride=2, padding=1),
             [torch.randn(2, 3, 8, 8)])
    vjp_case(out, "avgpool", lambda x: F.avg_pool2d(x, 2), [torch.randn(2, 3, 6, 6)])
    vjp_case(out, "adaptavg", lambda x: F.adaptive_avg_pool2d(x, (1, 1)),
             [torch.randn(2, 3, 5, 5)])
    vjp_case(out, "lrn", lambda x: F.local_response_norm(x, 4, alpha=0.001 / 9.0, beta=0.75, k=1.0),
             [torch.randn(2, 6, 5, 5) * 3.0])

    # batch norm, training mode: batch statistics, running stats updated in place
    x = torch.randn(4, 3, 5, 5) * 2.0 + 0.5
    wt, bs = torch.rand(3) + 0.5, torch.randn(3)
    rm, rv = torch.randn(3) * 0.1, torch.rand(3) + 0.5
    rm_w, rv_w = rm.clone(), rv.clone()
    vjp_case(out, "bn", lambda x_, w_, b_: F.batch_norm(x_, rm_w, rv_w, w_, b_, training=True,
                                                        momentum=0.1, eps=1e-5),
             [x, wt, bs])
    out["bn_rm"], out["bn_rv"] = np64(rm), np64(rv)
    out["bn_rm_after"], out["bn_rv_after"] = np64(rm_w), np64(rv_w)

    # batch norm, eval mode with given running statistics
    x = torch.randn(4, 3, 5, 5)
    wt, bs = torch.rand(3) + 0.5, torch.randn(3)
    rm, rv = torch.randn(3) * 0.5, torch.rand(3) + 0.5
    vjp_case(out, "bneval", lambda x_, w_, b_, m_, v_: F.batch_norm(x_, m_, v_, w_, b_, training=False,
                                                                    momentum=0.1, eps=1e-5),
             [x, wt, bs, rm, rv], grad_mask=[True, True, True, False, False])

    vjp_case(out, "linear", F.linear, [torch.randn(4, 6), torch.randn(3, 6), torch.randn(3)])
    vjp_case(out, "logsoftmax", lambda x: F.log_softmax(x, dim=1), [torch.randn(4, 5) * 2])
    vjp_case(out, "softmax", lambda x: F.softmax(x, dim=1), [torch.randn(4, 5) * 2])
    vjp_case(out, "ce", lambda z, t: F.cross_entropy(z, t),
             [torch.randn(6, 5) * 2, torch.randint(0, 5, (6,), dtype=torch.int64)],
             grad_mask=[True, False])
    vjp_case(out, "softce", soft_ce, [torch.randn(6, 5) * 2, rand_labels(6, 5)])
    vjp_case(out, "solve", torch.linalg.solve,
             [torch.randn(5, 5) + 5.0 * torch.eye(5), torch.randn(5, 3)])
    vjp_case(out, "inv", torch.linalg.inv, [torch.randn(5, 5) + 5.0 * torch.eye(5)])
    vjp_case(out, "mm", torch.mm, [torch.randn(4, 5), torch.randn(5, 3)])
    vjp_case(out, "bmm", torch.bmm, [torch.randn(2, 4, 5), torch.randn(2, 5, 3)])
    x = torch.randn(4, 5)
    x = torch.where(x.abs() < 1e-3, torch.full_like(x, 0.5), x)
    vjp_case(out, "relu", F.relu, [x])

    # label projection: clamp to [0,1], then divide each row by its sum (forward only)
    x = torch.rand(4, 5) * 1.6 - 0.3
    out["project_in0"] = np64(x)
    c = torch.clamp(x, 0, 1)
    out["project_out"] = np64(c / c.sum(dim=1, keepdim=True))
    return out


# ---------------------------------------------------------------- optim

def run_opt(out, prefix, make_opt, p0, grads, state_keys):
    p = p0.clone().requires_grad_(True)
    opt = make_opt([p])
    out[prefix + "_p0"] = np64(p0)
    for k, g in enumerate(grads, start=1):
        out["%s_g%d" % (prefix, k)] = np64(g)
        p.grad = g.clone()
        opt.step()
        out["%s_p%d" % (prefix, k)] = np64(p)
    st = opt.state[p]
    for src, dst in state_keys:
        out[prefix + "_" + dst] = np64(st[src])


def make_optim(gen_seed):
    torch.manual_seed(gen_seed)
    out = {}
    adam_keys = [("exp_avg", "exp_avg"), ("exp_avg_sq", "exp_avg_sq")]
    for prefix, wd in (("adam", 0.0), ("adamwd", 0.01)):
        p0 = torch.randn(5, 4)
        grads = [torch.randn(5, 4) for _ in range(3)]
        run_opt(out, prefix, lambda ps: torch.optim.Adam(ps, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                                         weight_decay=wd, amsgrad=False, foreach=False),
                p0, grads, adam_keys)
    p0 = torch.randn(5, 4)
    grads = [torch.randn(5, 4) for _ in range(3)]
    run_opt(out, "sgd", lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9, dampening=0,
                                                   weight_decay=5e-4, nesterov=False, foreach=False),
            p0, grads, [("momentum_buffer", "buf")])
    check_optim_formulas(out)
    return out


def check_optim_formulas(out):
    """Re-derive the optimiser fixtures with the textbook formulas of torch 1.13's
    single-tensor (foreach=False) Adam and SGD, so README.md can state them."""
    for prefix, wd in (("adam", 0.0), ("adamwd", 0.01)):
        lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8
        p = out[prefix + "_p0"].copy()
        m = np.zeros_like(p); v = np.zeros_like(p)
        for t in (1, 2, 3):
            g = out["%s_g%d" % (prefix, t)] + wd * p
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            denom = np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps
            p = p - (lr / (1 - b1 ** t)) * m / denom
            err = np.abs(p - out["%s_p%d" % (prefix, t)]).max()
            assert err < 1e-15, (prefix, t, err)
        assert np.allclose(m, out[prefix + "_exp_avg"], rtol=1e-14, atol=0)
        assert np.allclose(v, out[prefix + "_exp_avg_sq"], rtol=1e-14, atol=0)
    lr, mom, wd = 0.01, 0.9, 5e-4
    p = out["sgd_p0"].copy(); buf = None
    for t in (1, 2, 3):
        d = out["sgd_g%d" % t] + wd * p
        buf = d.copy() if buf is None else mom * buf + d
        p = p - lr * buf
        assert np.allclose(p, out["sgd_p%d" % t], rtol=0, atol=1e-15)
    assert np.allclose(buf, out["sgd_buf"], rtol=1e-14, atol=0)
    print("optim: numpy re-derivation of Adam / Adam+L2 / SGD-momentum agrees")


# ---------------------------------------------------------------- convnet (ConvNet-3)

CONVNET_WIDTH = 128


def hashed_values(seed, n, exp, offset):
    """n parameter values, the same in the Go test (nets/convnet_test.go): splitmix64 from
    state seed, the top 9 bits v of each output, value = offset + (2v - 511) / 512 * 2^-exp.
    Every value is exact in float64, and nothing needs storing."""
    m = np.uint64(0xFFFFFFFFFFFFFFFF)
    state = (np.uint64(seed) + np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) & m
    z = state
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    v = (z >> np.uint64(55)).astype(np.int64)
    return offset + (2.0 * v - 511.0) / 512.0 * 2.0 ** (-exp)


def convnet_specs(channels, classes, size):
    """(name, shape, exp, offset) per parameter in nets' order; exp ~ log2 sqrt(fan_in) so
    that conv and linear values lie within about PyTorch's U(+-1/sqrt(fan_in)); norm
    weights near 1, norm biases small."""
    specs, c, s = [], channels, size
    for d in range(3):
        pad = 3 if channels == 1 and d == 0 else 1
        e = int(np.round(np.log2(np.sqrt(c * 9))))
        specs += [("conv%d.weight" % (d + 1), (CONVNET_WIDTH, c, 3, 3), e, 0.0),
                  ("conv%d.bias" % (d + 1), (CONVNET_WIDTH,), e, 0.0),
                  ("norm%d.weight" % (d + 1), (CONVNET_WIDTH,), 2, 1.0),
                  ("norm%d.bias" % (d + 1), (CONVNET_WIDTH,), 3, 0.0)]
        c, s = CONVNET_WIDTH, (s + 2 * pad - 2) // 2
    feat = CONVNET_WIDTH * s * s
    e = int(np.round(np.log2(np.sqrt(feat))))
    specs += [("fc.weight", (classes, feat), e, 0.0), ("fc.bias", (classes,), e, 0.0)]
    return specs


def convnet_features(p, x):
    channels = x.shape[1]
    h = x
    for d in range(3):
        pad = 3 if channels == 1 and d == 0 else 1
        h = F.conv2d(h, p[4 * d], p[4 * d + 1], padding=pad)
        a = F.group_norm(h, CONVNET_WIDTH, p[4 * d + 2], p[4 * d + 3], eps=1e-5)
        assert (a == 0).sum().item() == 0, "exact zero at a ReLU input"
        h = F.avg_pool2d(F.relu(a), 2)
    return h.flatten(1)


def check_convnet_module(p, x):
    """The functional form above is the nn.Module of the nets package doc, and the
    reference ConvNet's layer list (conv, GroupNorm(C, C), ReLU, AvgPool2d(2, 2))."""
    channels, size = x.shape[1], x.shape[2]
    layers, c = [], channels
    for d in range(3):
        pad = 3 if channels == 1 and d == 0 else 1
        layers += [nn.Conv2d(c, CONVNET_WIDTH, kernel_size=3, padding=pad),
                   nn.GroupNorm(CONVNET_WIDTH, CONVNET_WIDTH, affine=True), nn.ReLU(),
                   nn.AvgPool2d(kernel_size=2, stride=2)]
        c = CONVNET_WIDTH
    feats = nn.Sequential(*layers)
    fc = nn.Linear(p[-2].shape[1], p[-2].shape[0])
    with torch.no_grad():
        mods = [m for m in feats if isinstance(m, (nn.Conv2d, nn.GroupNorm))]
        for i, m in enumerate(mods):
            m.weight.copy_(p[2 * i]); m.bias.copy_(p[2 * i + 1])
        fc.weight.copy_(p[-2]); fc.bias.copy_(p[-1])
        want = fc(feats(x).flatten(1))
        got = F.linear(convnet_features(p, x), p[-2], p[-1])
    assert torch.equal(want, got), "functional ConvNet-3 differs from the module"


def make_convnet_case(out, tag, channels, size, batch, classes):
    specs = convnet_specs(channels, classes, size)
    p = []
    for k, (name, shape, e, off) in enumerate(specs):
        v = torch.from_numpy(hashed_values(k + 1, int(np.prod(shape)), e, off)).reshape(shape)
        p.append(v)
        out["%s_pexp%d" % (tag, k)] = np.array(e, dtype=np.int64)
        out["%s_poff%d" % (tag, k)] = np.array(off, dtype=np.float64)
        out["%s_psum%d" % (tag, k)] = np64(v.sum())
    x = q(torch.randn(batch, channels, size, size), IMAGE_GRID)
    y = rand_labels(batch, classes)
    check_convnet_module(p, x)
    out[tag + "_x"], out[tag + "_y"] = np64(x), np64(y)

    def first_and_second(p, x, y):
        feat = convnet_features(p, x)
        logits = F.linear(feat, p[-2], p[-1])
        loss = soft_ce(logits, y)
        g = torch.autograd.grad(loss, p, create_graph=True)
        r = sum((gi * gi).sum() for gi in g)
        return feat, logits, loss, g, r

    pr = [t.clone().requires_grad_(True) for t in p]
    xr, yr = x.clone().requires_grad_(True), y.clone().requires_grad_(True)
    feat, logits, loss, g, r = first_and_second(pr, xr, yr)
    h = torch.autograd.grad(r, pr + [xr, yr])
    out[tag + "_logits"] = np64(logits)
    out[tag + "_loss"], out[tag + "_r"] = np64(loss), np64(r)
    out[tag + "_drdx"], out[tag + "_drdy"] = np64(h[-2]), np64(h[-1])

    def project(name, t):
        # 1-D tensors in full; larger ones as their first row and their row sums
        if t.dim() == 1:
            out[name] = np64(t)
        else:
            out[name + "_row0"] = np64(t[0])
            out[name + "_sums"] = np64(t.flatten(1).sum(1))
    for k in range(len(p)):
        project("%s_g%d" % (tag, k), g[k])
        project("%s_h%d" % (tag, k), h[k])

    # r is quadratic in y (the loss is linear in it): central differences are exact up to
    # rounding; a few entries of dr/dx check the path through the network's input.
    def r_at(yy=y, xx=x):
        pp = [t.clone().requires_grad_(True) for t in p]
        return first_and_second(pp, xx, yy)[4].item()
    eps, worst = 1e-4, 0.0
    for i in range(batch):
        for j in range(classes):
            yp = y.clone(); yp[i, j] += eps
            ym = y.clone(); ym[i, j] -= eps
            fd = (r_at(yy=yp) - r_at(yy=ym)) / (2 * eps)
            worst = max(worst, abs(fd - h[-1][i, j].item()))
    rel = worst / h[-1].abs().max().item()
    print("convnet %s: dr/dy vs central FD (eps %g): rel err %.2e" % (tag, eps, rel))
    assert rel < 1e-6, "convnet dr/dy disagrees with finite differences"
    gen = torch.Generator().manual_seed(7)
    worst = 0.0
    for _ in range(6):
        idx = tuple(int(torch.randint(0, n, (1,), generator=gen)) for n in x.shape)
        xp = x.clone(); xp[idx] += 1e-6
        xm = x.clone(); xm[idx] -= 1e-6
        fd = (r_at(xx=xp) - r_at(xx=xm)) / 2e-6
        worst = max(worst, abs(fd - h[-2][idx].item()) / h[-2].abs().max().item())
    print("convnet %s: six entries of dr/dx vs central FD (eps 1e-6): rel err %.2e" % (tag, worst))
    assert worst < 1e-5, "convnet dr/dx disagrees with finite differences"


def make_convnet(gen_seed):
    torch.manual_seed(gen_seed)
    out = {}
    make_convnet_case(out, "mnist", 1, 28, 3, 10)
    make_convnet_case(out, "cifar", 3, 32, 2, 10)
    # group_norm as an op, with first- and second-order VJPs (instance norm: groups = C)
    for name, groups in (("inorm", 6), ("gnorm", 2)):
        x = torch.randn(3, 6, 4, 5) * 2.0 + 0.5
        w, b = torch.rand(6) + 0.5, torch.randn(6)
        vjp_case(out, name, lambda x_, w_, b_: F.group_norm(x_, groups, w_, b_, eps=1e-5), [x, w, b])
        # second order: d/dx of |d<gout, gn(x)>/dx|^2
        xr = x.clone().requires_grad_(True)
        y = F.group_norm(xr, groups, w, b, eps=1e-5)
        gx, = torch.autograd.grad(y, xr, torch.from_numpy(out[name + "_gout"]), create_graph=True)
        h, = torch.autograd.grad((gx * gx).sum(), xr)
        out[name + "_hin0"] = np64(h)
    return out


# ---------------------------------------------------------------- dsa (augmentation)

def dsa_flip(x, flip):
    return torch.where(flip.view(-1, 1, 1, 1) > 0, x.flip(3), x)


def dsa_affine(x, theta):
    grid = F.affine_grid(theta, x.shape, align_corners=True)
    return F.grid_sample(x, grid, align_corners=True)


def dsa_scale(x, sx, sy):
    z = torch.zeros_like(sx)
    theta = torch.stack([torch.stack([sx, z, z], 1), torch.stack([z, sy, z], 1)], 1)
    return dsa_affine(x, theta)


def dsa_rotate(x, a):
    z = torch.zeros_like(a)
    theta = torch.stack([torch.stack([torch.cos(a), torch.sin(-a), z], 1),
                         torch.stack([torch.sin(a), torch.cos(a), z], 1)], 1)
    return dsa_affine(x, theta)


def dsa_brightness(x, b):
    return x + b.view(-1, 1, 1, 1)


def dsa_saturation(x, f):
    m = x.mean(dim=1, keepdim=True)
    return (x - m) * f.view(-1, 1, 1, 1) + m


def dsa_contrast(x, f):
    m = x.mean(dim=[1, 2, 3], keepdim=True)
    return (x - m) * f.view(-1, 1, 1, 1) + m


def dsa_crop(x, dh, dw):
    # pad by one zero pixel, then read through clamped indices: a shift past the edge
    # reads the padding
    n, _, hh, ww = x.shape
    b = torch.arange(n).view(n, 1, 1)
    r = torch.clamp(torch.arange(hh).view(1, hh, 1) + dh.view(n, 1, 1) + 1, 0, hh + 1)
    c = torch.clamp(torch.arange(ww).view(1, 1, ww) + dw.view(n, 1, 1) + 1, 0, ww + 1)
    xp = F.pad(x, [1, 1, 1, 1])
    return xp.permute(0, 2, 3, 1)[b, r, c].permute(0, 3, 1, 2)


def dsa_cutout(x, ch, cw, sh, sw):
    # the square's indices clamped into the image, set to zero in a mask
    n, _, hh, ww = x.shape
    b = torch.arange(n).view(n, 1, 1)
    r = torch.clamp(torch.arange(sh).view(1, sh, 1) + ch.view(n, 1, 1) - sh // 2, 0, hh - 1)
    c = torch.clamp(torch.arange(sw).view(1, 1, sw) + cw.view(n, 1, 1) - sw // 2, 0, ww - 1)
    mask = torch.ones(n, hh, ww)
    mask[b, r, c] = 0
    return x * mask.unsqueeze(1)


def make_dsa_case(out, tag, n, channels, size):
    """One parameter draw with DD-Ranking's default strengths (flip 0.5, rotate 15, scale 1.2,
    brightness 1, saturation 2, contrast 0.5, crop 0.125, cutout 0.5), stored, and every
    operation's output and VJP for it."""
    x = q(torch.randn(n, channels, size, size), IMAGE_GRID)
    crop, cut = int(size * 0.125 + 0.5), int(size * 0.5 + 0.5)
    prm = {
        "flip": torch.tensor([i % 2 for i in range(n)], dtype=torch.int64),
        "sx": torch.rand(n) * (1.2 - 1 / 1.2) + 1 / 1.2,
        "sy": torch.rand(n) * (1.2 - 1 / 1.2) + 1 / 1.2,
        "angle": (torch.rand(n) - 0.5) * 2 * 15 / 180 * np.pi,
        "bright": (torch.rand(n) - 0.5) * 1.0,
        "sat": torch.rand(n) * 2.0,
        "con": torch.rand(n) + 0.5,
        # shifts and centres that reach the extremes of their ranges
        "dh": torch.tensor([(-crop, crop, 0, 1)[i % 4] for i in range(n)], dtype=torch.int64),
        "dw": torch.tensor([(crop, -1, -crop, 2)[i % 4] for i in range(n)], dtype=torch.int64),
        "cuth": torch.tensor([(0, size, 5, size // 2)[i % 4] for i in range(n)], dtype=torch.int64),
        "cutw": torch.tensor([(size, 3, 0, size - 2)[i % 4] for i in range(n)], dtype=torch.int64),
        "cutsize": torch.tensor([cut, cut], dtype=torch.int64),
    }
    out[tag + "_x"] = np64(x)
    for k, v in prm.items():
        out["%s_%s" % (tag, k)] = np64(v)
    ops = {
        "flip": lambda t: dsa_flip(t, prm["flip"]),
        "scale": lambda t: dsa_scale(t, prm["sx"], prm["sy"]),
        "rotate": lambda t: dsa_rotate(t, prm["angle"]),
        "brightness": lambda t: dsa_brightness(t, prm["bright"]),
        "saturation": lambda t: dsa_saturation(t, prm["sat"]),
        "contrast": lambda t: dsa_contrast(t, prm["con"]),
        "color": lambda t: dsa_contrast(dsa_saturation(dsa_brightness(t, prm["bright"]), prm["sat"]), prm["con"]),
        "crop": lambda t: dsa_crop(t, prm["dh"], prm["dw"]),
        "cutout": lambda t: dsa_cutout(t, prm["cuth"], prm["cutw"], cut, cut),
    }
    gout = q(torch.randn(x.shape), IMAGE_GRID)  # every operation keeps the shape
    out[tag + "_gout"] = np64(gout)
    for name, f in ops.items():
        xr = x.clone().requires_grad_(True)
        y = f(xr)
        gin, = torch.autograd.grad(y, xr, gout)
        out["%s_%s_out" % (tag, name)] = np64(y)
        out["%s_%s_gin" % (tag, name)] = np64(gin)
    if channels == 1:
        assert torch.equal(ops["saturation"](x), x), "saturation changed a one-channel image"


def make_dsa(gen_seed):
    torch.manual_seed(gen_seed)
    out = {}
    make_dsa_case(out, "rgb", 4, 3, 12)   # crop 2, cutout 6 (even)
    make_dsa_case(out, "grey", 4, 1, 13)  # crop 2, cutout 7 (odd)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                  "testdata", "golden"))
    ap.add_argument("--only", default="",
                    help="comma-separated file names to write (default: all)")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)

    files = {}
    files["lenet_meta.npz"], _ = make_lenet_meta(SEED + 1)
    files["rr_meta.npz"], _ = make_rr_meta(SEED + 2)
    files["ops.npz"] = make_ops(SEED + 3)
    files["optim.npz"] = make_optim(SEED + 4)
    files["convnet.npz"] = make_convnet(SEED + 5)
    files["dsa.npz"] = make_dsa(SEED + 6)

    total = 0
    for fname, arrs in files.items():
        if only and fname not in only:
            continue
        for k, v in arrs.items():
            assert v.dtype in (np.float64, np.int64), (fname, k, v.dtype)
        path = os.path.join(args.out, fname)
        np.savez_compressed(path, **arrs)
        sz = os.path.getsize(path)
        total += sz
        print("%-16s %4d arrays  %8d bytes" % (fname, len(arrs), sz))
    print("total %d bytes" % total)


if __name__ == "__main__":
    main()
