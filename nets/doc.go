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
package nets
