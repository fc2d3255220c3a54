// AmoebaNet-D (Real et al., the model of the GPipe paper) as a layer sequence, following
// torchgpipe's benchmark: a stem, two stem reduction cells, three groups of L normal cells
// separated by two reduction cells, and a classifier. Every cell is one layer.
#pragma once

#include <cstdint>

#include "pipebal/pipeline/layer_seq.h"

namespace pipebal::models {

struct AmoebaNetOptions {
  int64_t L = 6;         // normal cells per group (torchgpipe's num_layers = 3 * L)
  int64_t D = 32;        // filters: cells in the first normal group have D channels per branch
  int64_t classes = 10;  // output classes
  int64_t in_channels = 3;
};

// Input [N, in_channels, H, W] with H and W divisible by 32 (five stride-2 steps); output
// [N, classes]. Layers, 3L + 6 in all:
//   stem                          Stem           3x3 conv stride 2 + batch norm -> D/4
//   reduce0, reduce1              ReductionCell  D/2 and D channels per branch
//   cell0 .. cell{L-1}            NormalCell     D
//   reduce2                       ReductionCell  2D
//   cell{L} .. cell{2L-1}         NormalCell     2D
//   reduce3                       ReductionCell  4D
//   cell{2L} .. cell{3L-1}        NormalCell     4D
//   head                          Classifier     global average pool + linear
// Cells carry two tensors, {s1, s0} -> {output, s1} (s1: the previous cell's output, s0: the
// one before; a cell given one tensor uses it as both). The head keeps tensors[0] only.
// Throws std::invalid_argument for L < 1, D not a positive multiple of 8, classes or
// in_channels < 1; the stem throws for an input whose shape does not fit.
pipeline::LayerSeq make_amoebanet(const AmoebaNetOptions& options);

}  // namespace pipebal::models
