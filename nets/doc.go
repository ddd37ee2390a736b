// Package nets holds the networks of label distillation written functionally: parameters
// and BatchNorm buffers are passed explicitly to Forward, so a meta-step can run the same
// network on θ and on θ' = θ − α∇θ. Every network is a feature extractor (the "body")
// followed by one linear head; the RR variants use the body alone (see ridge.go).
//
// # ConvNet-3
//
// The architecture "convnet" is ConvNet-3, the default network of the dataset-distillation
// benchmarks DC-BENCH and DD-Ranking (the ConvNet of Zhao et al.'s dataset condensation
// code with net_width=128, net_depth=3, net_act='relu', net_norm='instancenorm',
// net_pooling='avgpooling'). As PyTorch code, in the reference's module layout (a features
// Sequential of conv, norm, ReLU and pool per block, then classifier; docs/ARTIFACT.md has it
// with the other networks, and Net.TorchNames maps nets' names to these):
//
//	import torch.nn as nn
//
//	class ConvNet3(nn.Module):
//	    def __init__(self, channels, classes, size):  # size: 28 or 32
//	        super().__init__()
//	        layers, c, s = [], channels, size
//	        for d in range(3):
//	            pad = 3 if channels == 1 and d == 0 else 1  # 1×28×28 → 32×32
//	            layers += [nn.Conv2d(c, 128, 3, padding=pad),       # conv{d+1} = features.{4d}
//	                       nn.GroupNorm(128, 128, affine=True),     # norm{d+1} = features.{4d+1}
//	                       nn.ReLU(), nn.AvgPool2d(2)]
//	            c, s = 128, (s + 2 * pad - 2) // 2
//	        self.features = nn.Sequential(*layers)
//	        self.classifier = nn.Linear(128 * s * s, classes)  # fc; 2048 inputs for 1×28×28 and 3×32×32
//
//	    def forward(self, x):
//	        return self.classifier(self.features(x).flatten(1))
//
// Instance normalisation is GroupNorm with one group per channel (eps 1e-5, γ = 1 and β = 0
// at start): each sample's channel is normalised by its own mean and biased variance over
// the positions, in training and evaluation alike; there are no running statistics, so the
// network has no buffers. The other parameters start from PyTorch's defaults
// (U(±1/√fan_in) for convolution and linear weights and biases), as the reference leaves
// them. A convolution's bias is followed by instance normalisation, which subtracts each
// channel's mean: it has no effect and its gradient is 0; it is kept, as in the reference,
// so that the parameters are the reference's. Parameter order: conv1.weight, conv1.bias, norm1.weight, norm1.bias, … norm3.bias,
// then the head fc.weight, fc.bias. Inputs are 28×28 or 32×32 images with any number of
// channels; the one-channel padding of 3 is the reference's, so that MNIST-like data
// reaches the same 4×4×128 features as CIFAR-like data (a three-channel 28×28 image ends
// at 3×3×128 = 1152).
//
// # TorchScript networks
//
// New("torchscript:FILE", c, h, w, classes) builds a Net from a TorchScript file (written by
// torch.jit.save of a scripted or traced module; scripts/export_torchscript.py exports
// nets' LeNet, a CIFAR ResNet-18 and modules of one's own). The contract, checked when the
// file loads, each failure an error naming the file:
//
//   - a method features(x) taking a batch (B, c, h, w) and returning (B, D), and a
//     submodule head that is an nn.Linear(D, classes) with a bias; forward(x) must be
//     head(features(x)) (compared on a probe batch);
//   - a probe batch of the data's shape, of 2 and of 5 images, runs through both methods on
//     the CPU (another input size or channel count fails here, a module that runs only on
//     CUDA too, and a traced module that fixed its batch size fails on one of the two);
//   - every parameter is floating point and is held by a layer whose initialisation nets
//     knows (below); parameters shared by two names (tied weights) are refused.
//
// Body is every parameter not under head., in the module's named_parameters order and with
// its state_dict names (TorchNames returns them as they are); Head is head.weight and
// head.bias. So LD RR uses Features (the method features) and LD uses Forward (the method
// forward), each a functional call: the module runs with the caller's parameter and buffer
// tensors in place of its own (θ′ = θ − α∇θ included, with every derivative its operators
// have; an operator without a double backward, grid_sample for one, fails second-order LD
// with libtorch's error, which the meta-step names with the file and method rr, while first
// order, and so LD RR, works).
//
// Fresh parameters come from the caller's seed (InitParams, Reinit) with PyTorch's default
// per layer type, exactly as for nets' own networks: Conv1d/2d/3d, ConvTranspose1d/2d/3d and
// Linear weights kaiming_uniform(a = √5), that is U(±1/√fan_in) with fan_in from the weight's
// shape, and biases U(±1/√fan_in) of their layer's weight; BatchNorm1d/2d/3d, SyncBatchNorm,
// InstanceNorm1d/2d/3d, LayerNorm and GroupNorm weight 1, bias 0. A parameter held by any
// other module type (a layer of one's own with an nn.Parameter, an Embedding, …) is an
// error naming the parameter and its layer type: there is no hook for one's own
// initialisation; hold parameters in the layers above. The exported LeNet therefore starts,
// for a seed, exactly where nets' LeNet starts.
//
// Buffers are the running statistics of BatchNorm and InstanceNorm layers, running_mean
// (starting at 0), running_var (1) and num_batches_tracked (0, kept in the buffers' dtype),
// handled as for ResNet: in training mode the layers normalise with the batch's statistics
// and update the buffers given to the call in place, in evaluation mode they use them
// (BatchCoupled reports such a network). Any other buffer of the module is a constant it
// keeps as the file holds it (moved to the parameters' dtype and device); a buffer the
// module changes while it runs must belong to one of those layers.
//
// The module's 2-d convolutions and max-pools run through the shim's own CPU kernels, as
// nets' networks do (torch.ScriptModule.UseOwnKernels), so the exported LeNet computes
// nets' LeNet's bits at its speed. Batched runs the models of a TorchScript network one by
// one (BodyPerModel) in either BodyMode. The Net holds the loaded module, used by one
// goroutine at a time (a call sets the module's attributes for its duration) and freed by
// Close.
package nets
