// What a model directory holds, read from config.json and the checkpoint's header alone: no
// weight is read or put on a device, so tools (forge top's model browser) can describe many
// models quickly. The checks are the loader's, so a directory inspect_model() accepts is one
// Gpt2::load() reads, and one it refuses fails with the loader's message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "forge/core/shape.h"
#include "forge/models/gpt2/config.h"

namespace forge {

/// One tensor as its checkpoint stores it.
struct TensorSummary {
  std::string name;
  Shape shape;
  std::string dtype;  // safetensors' "F32", "F16", ...; the compact checkpoint's "f32", "q8", "q4"
  uint64_t bytes = 0;
};

struct ModelSummary {
  std::string dir;
  std::string checkpoint;  // Gpt2::checkpoint_path(dir)
  Gpt2Config config;
  int64_t parameters = 0;   // what Gpt2::num_parameters() will say once loaded
  uint64_t size_bytes = 0;  // the checkpoint file
  std::string container;    // "safetensors" or "compact"
  std::string precision;    // "f32", "f16", "bf16", "8-bit", "4-bit" (the weights'), or "mixed"
  std::string tokenizer;    // "gpt2-bpe", "char" or "none", from the files present
  std::vector<TensorSummary> tensors;  // in the order the checkpoint lists them
};

/// True when `dir` has a config.json or a model checkpoint, i.e. it means to be a model.
bool is_model_directory(const std::string& dir);

/// Describes the model in `dir`. Throws forge::Error with the loader's message for a missing or
/// invalid config, an unreadable, truncated or corrupt checkpoint, or a missing or misshapen
/// tensor. A safetensors checkpoint is read up to its header; a compact one is read whole,
/// because its CRC-32 covers the file.
ModelSummary inspect_model(const std::string& dir);

}  // namespace forge
