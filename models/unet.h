// U-Net (Ronneberger et al.) as a layer sequence, shaped like torchgpipe's U-Net benchmark:
// the encoder-decoder links travel as named skip tensors, so any cut between stages is legal.
#pragma once

#include <cstdint>

#include "pipebal/pipeline/layer_seq.h"

namespace pipebal::models {

struct UNetOptions {
  int64_t B = 2;             // down/up levels; input H and W must be divisible by 2^B
  int64_t C = 16;            // channels after the stem; doubled at every level
  int64_t in_channels = 3;   // channels of the input image
  int64_t out_channels = 1;  // channels of the output map
};

// Input [N, in_channels, H, W]; output [N, out_channels, H, W]. Layers, 3B + 3 in all:
//   stem                      ConvBlock     in_channels -> C
//   enc{i}, down{i}           EncoderBlock  C*2^i -> C*2^(i+1), stashes `skip{i}`;
//                             Downsample    2x2 max pool            (i = 0 .. B-1)
//   bottom                    ConvBlock     C*2^B -> C*2^B
//   dec{i}                    DecoderBlock  upsample x2, pops `skip{i}`, concatenates,
//                                           C*2^(i+2) -> C*2^i      (i = B-1 .. 0)
//   head                      Conv1x1       C -> out_channels
// A conv block is (3x3 conv, batch norm, ReLU) twice. Throws std::invalid_argument for bad
// options here, and from the stem's forward for an input whose shape does not fit.
pipeline::LayerSeq make_unet(const UNetOptions& options);

}  // namespace pipebal::models
