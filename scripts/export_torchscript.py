#!/usr/bin/python3
"""Export a network as a TorchScript file that ldtorch distils through (nets.New("torchscript:FILE")).

The contract ldtorch checks when it loads the file (nets/doc.go, "TorchScript networks"):

  * a method features(x) taking a batch (B, C, H, W) and returning (B, D);
  * a submodule `head`, an nn.Linear(D, classes) with a bias;
  * forward(x) == head(features(x));
  * floating-point parameters, each held by a layer whose initialisation ldtorch knows
    (Conv1d/2d/3d, ConvTranspose1d/2d/3d, Linear, BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d,
    LayerNorm, GroupNorm), and a module that runs on the CPU.

Usage (Debian's python3 with torch 1.13; torchvision only for --resnet18):

  scripts/export_torchscript.py --lenet --channels 1 --size 28 --classes 10 --out lenet.pt
      ldtorch's LeNet, with the names of nets' LeNet (conv1, conv2, fc1, fc2; the head is
      nets' fc); --weights W.npz takes its weights from an .npz of state_dict names (head.*,
      or fc.* / fc3.* as ldtorch's own model files name the head)
  scripts/export_torchscript.py --resnet18 --channels 3 --classes 10 --out resnet18.pt
      torchvision's ResNet-18 with a CIFAR stem (3×3 stride-1 conv1, no max-pool) for 32×32
      inputs; its names are torchvision's, with fc renamed head
  scripts/export_torchscript.py --module package.path:ClassName [--kwargs '{"width": 64}'] \\
          --channels 3 --size 32 --classes 10 --out mine.pt
      your own nn.Module (importable from PYTHONPATH): used as it is when it already has
      features() and a Linear head, else wrapped: its last nn.Linear (in registration order)
      becomes `head` and features(x) is the module with that layer replaced by Identity
      (checked: head(features(x)) must equal the module's own output)

torch.jit.script is used; where scripting fails the module is traced instead, with a
warning (--trace traces from the start). A traced module may have fixed its batch size: the
script checks a second batch size and refuses such a module, and ldtorch checks it again.
--expected FILE.npz writes a probe batch x and PyTorch's float64 outputs for it (features,
logits; for modules with BatchNorm also a training-mode pass and its running statistics),
for tests. --fixtures DIR writes the test fixtures of testdata/torchscript/ (its README).
The script prints the contract it checked.
"""
import argparse
import copy
import importlib
import json
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

KNOWN = {
    "torch.nn.modules.conv.Conv1d", "torch.nn.modules.conv.Conv2d", "torch.nn.modules.conv.Conv3d",
    "torch.nn.modules.conv.ConvTranspose1d", "torch.nn.modules.conv.ConvTranspose2d",
    "torch.nn.modules.conv.ConvTranspose3d", "torch.nn.modules.linear.Linear",
    "torch.nn.modules.batchnorm.BatchNorm1d", "torch.nn.modules.batchnorm.BatchNorm2d",
    "torch.nn.modules.batchnorm.BatchNorm3d", "torch.nn.modules.instancenorm.InstanceNorm1d",
    "torch.nn.modules.instancenorm.InstanceNorm2d", "torch.nn.modules.instancenorm.InstanceNorm3d",
    "torch.nn.modules.normalization.LayerNorm", "torch.nn.modules.normalization.GroupNorm",
}


class ContractError(Exception):
    pass


# ----------------------------------------------------------------------------- networks

class LeNet(nn.Module):
    """nets' LeNet (nets/lenet.go): conv 5×5 →6 (padding 2 for 28×28, 0 for 32×32), 2×2
    max-pool, ReLU; conv 5×5 6→16, pool, ReLU; fc1 400→120, ReLU; fc2 120→84, ReLU; head."""

    def __init__(self, channels=1, classes=10, size=28):
        super().__init__()
        if size not in (28, 32):
            raise ContractError("LeNet takes 28×28 or 32×32 images, not %d" % size)
        self.conv1 = nn.Conv2d(channels, 6, 5, padding=2 if size == 28 else 0)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(400, 120)
        self.fc2 = nn.Linear(120, 84)
        self.head = nn.Linear(84, classes)

    @torch.jit.export
    def features(self, x):
        # ReLU after the pool, as nets' LeNet: the same values (ReLU is monotonic)
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = F.relu(self.fc1(x.flatten(1)))
        return F.relu(self.fc2(x))

    def forward(self, x):
        return self.head(self.features(x))


class ResNet18(nn.Module):
    """torchvision's resnet18 with a CIFAR stem: conv1 3×3 stride 1 (no bias), no max-pool."""

    def __init__(self, channels=3, classes=10):
        super().__init__()
        import torchvision  # only here: the other exports do not need it
        r = torchvision.models.resnet18(num_classes=classes)
        self.conv1 = nn.Conv2d(channels, 64, 3, stride=1, padding=1, bias=False)
        self.bn1 = r.bn1
        self.relu = r.relu
        self.layer1, self.layer2, self.layer3, self.layer4 = r.layer1, r.layer2, r.layer3, r.layer4
        self.avgpool = r.avgpool
        self.head = r.fc

    @torch.jit.export
    def features(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return torch.flatten(self.avgpool(x), 1)

    def forward(self, x):
        return self.head(self.features(x))


class Wrapped(nn.Module):
    """A user's module split at its last nn.Linear: body is the module with that layer
    replaced by Identity, head the layer."""

    def __init__(self, body, head):
        super().__init__()
        self.body = body
        self.head = head

    @torch.jit.export
    def features(self, x):
        return self.body(x)

    def forward(self, x):
        return self.head(self.body(x))


def meets_contract(m):
    return callable(getattr(m, "features", None)) and isinstance(getattr(m, "head", None), nn.Linear)


def wrap_at_last_linear(m, probe):
    last = None
    for name, sub in m.named_modules():
        if isinstance(sub, nn.Linear):
            last = name
    if last is None:
        raise ContractError("the module has no nn.Linear to split at (and no features() with a Linear head)")
    body = copy.deepcopy(m)
    parent, _, leaf = last.rpartition(".")
    owner = body.get_submodule(parent) if parent else body
    head = getattr(owner, leaf)
    setattr(owner, leaf, nn.Identity())
    w = Wrapped(body, head)
    with torch.no_grad():
        m.eval()
        w.eval()
        want = m(probe)
        got = w(probe)
    if want.shape != got.shape or not torch.allclose(want, got, rtol=1e-5, atol=1e-6):
        raise ContractError("the last nn.Linear (%s) is not the last operation of forward: head(features(x)) "
                            "differs from the module's output; give the module features() and a head" % last)
    return w, last


# ----------------------------------------------------------------------------- export and checks

def export(m, probe, trace=False):
    """torch.jit.script, or torch.jit.trace (features and forward) where scripting fails."""
    m.eval()
    if not trace:
        try:
            return torch.jit.script(m), "torch.jit.script"
        except Exception as e:  # noqa: BLE001 (any scripting failure falls back to tracing)
            warnings.warn("torch.jit.script failed (%s); tracing instead: a traced module records one path "
                          "through the code and may fix sizes it saw" % str(e).splitlines()[0])
    # trace_module would script the methods marked @torch.jit.export (and then refuse to
    # define the traced features again): unmark them while tracing
    marked = []
    for mod in m.modules():
        for name in dir(type(mod)):
            f = getattr(type(mod), name, None)
            if callable(f) and hasattr(f, "_torchscript_modifier"):
                marked.append((f, f._torchscript_modifier))
                del f._torchscript_modifier
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            t = torch.jit.trace_module(m, {"forward": probe, "features": probe}, check_trace=False)
    finally:
        for f, mod in marked:
            f._torchscript_modifier = mod
    return t, "torch.jit.trace"


def owner_types(sm):
    """(name, owner type) of each parameter of a scripted or traced module."""
    out = []

    def walk(mod, prefix):
        t = mod._c._type().qualified_name().replace("__torch__.", "", 1)
        t = ".".join(p for p in t.split(".") if not p.startswith("___torch_mangle_"))
        for n, _ in mod.named_parameters(recurse=False):
            out.append((prefix + n, t))
        for n, c in mod.named_children():
            walk(c, prefix + n + ".")

    walk(sm, "")
    return out


def short(e):
    """An exception's message without TorchScript's traceback."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith("RuntimeError: "):
            return ln[len("RuntimeError: "):]
    return lines[0] if lines else type(e).__name__


def check_contract(sm, channels, size, classes, path, unchecked=False, traced=False):
    """The checks ldtorch makes at load, on the exported module; prints what it checked."""
    lines = ["contract %s for %s:" % ("NOT checked (--unchecked)" if unchecked else "checked", path)]

    def need(cond, msg):
        if not cond:
            if unchecked:
                lines.append("  NOT MET: " + msg)
                return False
            raise ContractError(msg)
        return True

    h, w = size
    if not need(hasattr(sm, "features"), "no method features(x)"):
        return lines
    head = getattr(sm, "head", None)
    htype = head.original_name if head is not None else None
    if not need(htype == "Linear", "head is %s, not an nn.Linear" % (htype or "missing")):
        return lines
    if not need(getattr(head, "bias", None) is not None, "head has no bias"):
        return lines
    d = head.weight.shape[1]
    need(head.weight.shape[0] == classes, "head has %d outputs for %d classes" % (head.weight.shape[0], classes))
    for name, p in sm.named_parameters():
        need(p.is_floating_point(), "parameter %s is %s, not floating point" % (name, p.dtype))
    for name, t in owner_types(sm):
        need(t in KNOWN, "parameter %s belongs to %s, whose initialisation ldtorch does not know" % (name, t))
    dtype = head.weight.dtype
    sm.eval()
    worked = []
    with torch.no_grad():
        for b in (2, 5):
            x = torch.linspace(-1, 1, b * channels * h * w, dtype=dtype).reshape(b, channels, h, w)
            try:
                f = sm.features(x)
                y = sm(x)
            except Exception as e:  # noqa: BLE001
                hint = ""
                if traced and worked:
                    hint = " (it works on a batch of %d: traced with a fixed batch size?)" % worked[0]
                need(False, "a batch of %d fails: %s%s" % (b, short(e)[:300], hint))
                continue
            worked.append(b)
            if not need(isinstance(f, torch.Tensor) and isinstance(y, torch.Tensor),
                        "features and forward must return one tensor, not %s and %s" % (type(f).__name__, type(y).__name__)):
                continue
            need(tuple(f.shape) == (b, d), "features of a batch of %d is %s, want (%d, %d)" % (b, tuple(f.shape), b, d))
            need(tuple(y.shape) == (b, classes), "forward of a batch of %d is %s, want (%d, %d)" % (b, tuple(y.shape), b, classes))
            if tuple(f.shape) == (b, d) and tuple(y.shape) == (b, classes):
                diff = (y - F.linear(f, head.weight, head.bias)).abs().max().item()
                need(diff <= 1e-4 * (1 + y.abs().max().item()), "forward(x) is not head(features(x)) (%.3g apart)" % diff)
    n = sum(p.numel() for p in sm.parameters())
    lines += [
        "  features(x): (B, %d, %d, %d) -> (B, %d)   [batches of 2 and 5]" % (channels, h, w, d),
        "  head: nn.Linear(%d, %d)" % (d, classes),
        "  forward(x) = head(features(x))",
        "  parameters: %d tensors, %d values (body %d tensors, head 2); buffers: %d" % (
            len(list(sm.parameters())), n, len(list(sm.parameters())) - 2, len(list(sm.buffers()))),
    ]
    return lines


def write_expected(m, channels, size, classes, path, seed):
    """A probe batch and PyTorch's float64 outputs for it: eval-mode features and logits of
    the exported weights; with BatchNorm also a training-mode pass from fresh running
    statistics (0, 1) and the statistics after it."""
    g = torch.Generator().manual_seed(seed + 1)
    h, w = size
    x = torch.randn(4, channels, h, w, generator=g, dtype=torch.float64)
    m64 = copy.deepcopy(m).double().eval()
    out = {"x": x}
    with torch.no_grad():
        out["features"] = m64.features(x)
        out["logits"] = m64(x)
        bns = [mod for mod in m64.modules() if isinstance(mod, nn.modules.batchnorm._BatchNorm)]
        if bns:
            for b in bns:
                b.reset_running_stats()
            m64.train()
            out["train_logits"] = m64(x)
            for name, buf in m64.named_buffers():
                out["after." + name] = buf.clone().double()
            m64.eval()
            out["eval_logits_after"] = m64(x)
    np.savez(path, **{k: v.detach().numpy().astype(np.float64) for k, v in out.items()})


def load_weights(m, path):
    z = np.load(path)
    sd = m.state_dict()
    new = {}
    for k, v in z.items():
        name = k
        for alias in ("fc3.", "fc."):
            if k.startswith(alias) and "head." + k[len(alias):] in sd:
                name = "head." + k[len(alias):]
        if name not in sd:
            raise ContractError("%s: %s is not a parameter or buffer of the module (it has %s)" % (path, k, ", ".join(sd)))
        if tuple(v.shape) != tuple(sd[name].shape):
            raise ContractError("%s: %s has shape %s, the module's %s" % (path, k, v.shape, tuple(sd[name].shape)))
        new[name] = torch.from_numpy(np.array(v)).to(sd[name].dtype)
    missing = set(sd) - set(new)
    if missing:
        raise ContractError("%s lacks %s" % (path, ", ".join(sorted(missing))))
    m.load_state_dict(new)


def build(args):
    h, w = args.size
    if args.lenet:
        if h != w:
            raise ContractError("LeNet takes square images")
        return LeNet(args.channels, args.classes, h)
    if args.resnet18:
        return ResNet18(args.channels, args.classes)
    mod_name, _, cls = args.module.partition(":")
    if not cls:
        raise ContractError("--module wants package.path:ClassName, got %r" % args.module)
    try:
        cls_obj = getattr(importlib.import_module(mod_name), cls)
    except (ImportError, AttributeError) as e:
        raise ContractError("cannot find %s (%s); is its package on PYTHONPATH?" % (args.module, e))
    try:
        kwargs = json.loads(args.kwargs)
    except ValueError as e:
        raise ContractError("--kwargs is not JSON: %s" % e)
    return cls_obj(**kwargs)


def run(args):
    torch.manual_seed(args.seed)
    h, w = args.size
    m = build(args)
    if args.weights:
        load_weights(m, args.weights)
    probe = torch.linspace(-1, 1, 2 * args.channels * h * w).reshape(2, args.channels, h, w)
    probe = probe.to(next(m.parameters()).dtype)
    note = None
    if args.module and not meets_contract(m) and not args.as_is:
        m, last = wrap_at_last_linear(m, probe)
        note = "wrapped: body = the module with %s replaced by Identity, head = %s" % (last, last)
    sm, how = export(m, probe, trace=args.trace)
    lines = check_contract(sm, args.channels, args.size, args.classes, args.out, unchecked=args.unchecked,
                           traced=how == "torch.jit.trace")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    sm.save(args.out)
    if args.expected:
        write_expected(m, args.channels, args.size, args.classes, args.expected, args.seed)
    print("\n".join(lines + ["  exported with " + how] + (["  " + note] if note else [])))


def size_arg(s):
    a, _, b = s.partition("x")
    return (int(a), int(b or a))


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--lenet", action="store_true", help="nets' LeNet")
    what.add_argument("--resnet18", action="store_true", help="torchvision's ResNet-18 with a CIFAR stem")
    what.add_argument("--module", help="package.path:ClassName of your nn.Module")
    what.add_argument("--fixtures", metavar="DIR", help="write the test fixtures of testdata/torchscript/")
    p.add_argument("--kwargs", default="{}", help="JSON keyword arguments for --module's class")
    p.add_argument("--channels", type=int, default=1)
    p.add_argument("--size", type=size_arg, default=(28, 28), help="H or HxW (default 28)")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--weights", help="an .npz of state_dict names to take the weights from")
    p.add_argument("--seed", type=int, default=0, help="torch.manual_seed before the module is built")
    p.add_argument("--trace", action="store_true", help="trace instead of script")
    p.add_argument("--as-is", action="store_true", help="--module: export the module as it is, never wrapped")
    p.add_argument("--unchecked", action="store_true", help="save even when the contract is not met (tests)")
    p.add_argument("--expected", help="also write a probe batch and PyTorch's float64 outputs (.npz)")
    p.add_argument("--out", help="the TorchScript file to write")
    return p


def fixtures(out):
    """testdata/torchscript/: see its README.md for what each file is for."""
    here = os.path.dirname(os.path.abspath(__file__))
    fix_dir = os.path.join(os.path.dirname(here), "testdata", "torchscript")
    sys.path.insert(0, fix_dir)
    jobs = [
        ["--lenet", "--channels", "1", "--size", "28", "--classes", "10", "--seed", "1",
         "--out", "lenet.pt", "--expected", "lenet_expected.npz"],
        ["--module", "fixture_modules:BNNet", "--channels", "1", "--size", "8", "--classes", "3", "--seed", "2",
         "--out", "bn.pt", "--expected", "bn_expected.npz"],
        ["--module", "fixture_modules:GridNet", "--channels", "1", "--size", "6", "--classes", "3", "--seed", "3",
         "--out", "nodouble.pt"],
        ["--module", "fixture_modules:GridMNIST", "--channels", "1", "--size", "28", "--classes", "10", "--seed", "6",
         "--out", "nodouble_mnist.pt"],
        ["--module", "fixture_modules:PlainMLP", "--channels", "1", "--size", "4", "--classes", "3", "--seed", "4",
         "--out", "wrapped.pt", "--expected", "wrapped_expected.npz"],
        ["--module", "fixture_modules:ConvPools", "--channels", "1", "--size", "8", "--classes", "3", "--seed", "5",
         "--out", "convpools.pt"],
        ["--module", "fixture_modules:NoFeatures", "--as-is", "--unchecked", "--channels", "1", "--size", "4",
         "--classes", "3", "--out", "nofeatures.pt"],
        ["--module", "fixture_modules:ConvHead", "--as-is", "--unchecked", "--channels", "1", "--size", "4",
         "--classes", "3", "--out", "convhead.pt"],
        ["--module", "fixture_modules:ScaledMLP", "--as-is", "--unchecked", "--channels", "1", "--size", "4",
         "--classes", "3", "--out", "unknownlayer.pt"],
        ["--module", "fixture_modules:IntParam", "--as-is", "--unchecked", "--channels", "1", "--size", "4",
         "--classes", "3", "--out", "intparam.pt"],
        ["--module", "fixture_modules:TupleOut", "--as-is", "--unchecked", "--channels", "1", "--size", "4",
         "--classes", "3", "--out", "tupleout.pt"],
        ["--module", "fixture_modules:CudaOnly", "--as-is", "--unchecked", "--channels", "1", "--size", "4",
         "--classes", "3", "--out", "cudaonly.pt"],
        ["--module", "fixture_modules:FixedBatch", "--as-is", "--unchecked", "--trace", "--channels", "1",
         "--size", "4", "--classes", "3", "--out", "fixedbatch.pt"],
    ]
    for j in jobs:
        a = parser().parse_args(j)
        a.out = os.path.join(out, a.out)
        if a.expected:
            a.expected = os.path.join(out, a.expected)
        run(a)
    # not TorchScript: a torch.save file of a state dict (a zip archive of another kind)
    sys.path.insert(0, fix_dir)
    import fixture_modules  # noqa: E402 (the folder is on the path from here on)
    torch.save(fixture_modules.BNNet().state_dict(), os.path.join(out, "notscript.pt"))
    print("fixtures written to", out)


def main():
    args = parser().parse_args()
    try:
        if args.fixtures:
            fixtures(args.fixtures)
            return
        if not args.out:
            raise ContractError("--out is required")
        run(args)
    except ContractError as e:
        print("export_torchscript: %s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
