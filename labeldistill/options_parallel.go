package labeldistill

import "github.com/ldtorch/ldtorch/torch/dist"

// WithGroup runs Distill as one rank of a data-parallel group (see torch/dist). Every rank
// calls Distill with the same configuration and data; rank 0 alone writes checkpoints
// (and should be the only one to write anything else). A failing rank makes the others'
// Distill fail with a dist.RankError naming it. A cancelled ctx stops the group at rank 0's
// next meta-step boundary, where rank 0 writes its checkpoint; the other ranks follow rank 0
// (their own cancellation takes effect rootGrace later, 5 s).
func WithGroup(g *dist.Group) RunOption { return func(o *runOptions) { o.group = g } }

// WithBaseSplit sets whether a data-parallel run splits its base batch over the ranks
// (default BaseSplitAuto). The split changes only the order in which the ranks' parts are
// summed: the labels agree with the whole batch's to rounding.
func WithBaseSplit(s BaseSplit) RunOption { return func(o *runOptions) { o.baseSplit = s } }
