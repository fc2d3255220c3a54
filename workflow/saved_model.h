// Writes a model trained by a run back as TorchScript (train --save), for torch.jit.load.
#pragma once

#include <string>

#include "pipebal/models/zoo.h"

namespace pipebal::workflow {

// Writes the trained TorchScript module atomically: an interrupted or failed save (a full disk)
// never leaves half a model, nor a file of another name.
// Throws std::invalid_argument saying why (LibTorch's refusal, or the write's error).
void save_trained_model(const models::Model& model, const std::string& path);

}  // namespace pipebal::workflow
