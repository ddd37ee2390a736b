"""Small modules for the TorchScript fixtures of this folder (scripts/export_torchscript.py
--fixtures imports them from here; README.md says what each fixture tests)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BNNet(nn.Module):
    """conv 3×3 → BatchNorm2d → ReLU → 2×2 average pool → head: the contract, with
    running statistics (a 1×8×8 input gives 4·4·4 = 64 features)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Linear(64, 3)

    @torch.jit.export
    def features(self, x):
        return F.avg_pool2d(F.relu(self.bn(self.conv(x))), 2).flatten(1)

    def forward(self, x):
        return self.head(self.features(x))


class GridNet(nn.Module):
    """conv → grid_sample (an identity affine grid) → head: grid sampling has a first
    derivative in libtorch but no second (grid_sampler_2d_backward is not differentiable)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.head = nn.Linear(72, 3)

    @torch.jit.export
    def features(self, x):
        y = self.conv(x)
        theta = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=y.dtype).unsqueeze(0).repeat(y.size(0), 1, 1)
        grid = F.affine_grid(theta, [y.size(0), y.size(1), y.size(2), y.size(3)], align_corners=False)
        return F.grid_sample(y, grid, align_corners=False).flatten(1)

    def forward(self, x):
        return self.head(self.features(x))


class GridMNIST(nn.Module):
    """GridNet's operator at MNIST's shape (1×28×28, 10 classes), for distillation runs on
    real MNIST: conv 3×3 → grid_sample (an identity affine grid) → ReLU → 4×4 average pool
    → head (2·7·7 = 98 features)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.head = nn.Linear(98, 10)

    @torch.jit.export
    def features(self, x):
        y = self.conv(x)
        theta = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=y.dtype).unsqueeze(0).repeat(y.size(0), 1, 1)
        grid = F.affine_grid(theta, [y.size(0), y.size(1), y.size(2), y.size(3)], align_corners=False)
        return F.avg_pool2d(F.relu(F.grid_sample(y, grid, align_corners=False)), 4).flatten(1)

    def forward(self, x):
        return self.head(self.features(x))


class PlainMLP(nn.Module):
    """No features(): the export wraps it at its last Linear (net.3)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x):
        return self.net(x)


class NoFeatures(nn.Module):
    """A head but no features method."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(x.flatten(1))


class ConvHead(nn.Module):
    """features() but a head that is not an nn.Linear."""

    def __init__(self):
        super().__init__()
        self.head = nn.Conv2d(1, 3, 4)

    @torch.jit.export
    def features(self, x):
        return x.flatten(1)

    def forward(self, x):
        return self.head(x).flatten(1)


class Scale(nn.Module):
    """A layer of our own with a parameter: ldtorch cannot know how it starts."""

    def __init__(self, n):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(n))

    def forward(self, x):
        return x * self.gain


class ScaledMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)
        self.scale = Scale(8)
        self.head = nn.Linear(8, 3)

    @torch.jit.export
    def features(self, x):
        return self.scale(F.relu(self.fc(x.flatten(1))))

    def forward(self, x):
        return self.head(self.features(x))


class IntParam(nn.Module):
    """A parameter that is not floating point."""

    def __init__(self):
        super().__init__()
        self.steps = nn.Parameter(torch.ones(2, dtype=torch.long), requires_grad=False)
        self.head = nn.Linear(16, 3)

    @torch.jit.export
    def features(self, x):
        return x.flatten(1)

    def forward(self, x):
        return self.head(self.features(x))


class TupleOut(nn.Module):
    """features() returns a tuple, not one tensor."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(16, 3)

    @torch.jit.export
    def features(self, x):
        f = x.flatten(1)
        return f, f

    def forward(self, x):
        return self.head(x.flatten(1))


class CudaOnly(nn.Module):
    """Makes a tensor on the GPU: it runs only where CUDA is."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(16, 3)

    @torch.jit.export
    def features(self, x):
        return x.flatten(1) + torch.zeros(1, device=torch.device("cuda"))

    def forward(self, x):
        return self.head(self.features(x))


class FixedBatch(nn.Module):
    """Traced, int(x.size(0)) becomes the constant 2 of the trace's batch."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)
        self.head = nn.Linear(8, 3)

    @torch.jit.export
    def features(self, x):
        n = int(x.size(0))
        return F.relu(self.fc(x.reshape(n, 16)))

    def forward(self, x):
        return self.head(self.features(x))


class ConvPools(nn.Module):
    """The convolution and max-pool patterns ldtorch moves onto its own kernels: a 2×2 pool
    of a ReLU of a convolution, a 3×3 stride-2 pool of a convolution, and a pool of its own
    (1×8×8 → 3×4×4 → 4×2×2 → 4×1×1)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 3, 3, padding=1)
        self.conv2 = nn.Conv2d(3, 4, 5, padding=2)
        self.head = nn.Linear(4, 3)

    @torch.jit.export
    def features(self, x):
        y = F.max_pool2d(F.relu(self.conv1(x)), 2)
        y = F.max_pool2d(self.conv2(y), 3, 2, 1)
        return F.max_pool2d(y, 2, 1).flatten(1)

    def forward(self, x):
        return self.head(self.features(x))
