// GPT-2 hyper-parameters, read from a HuggingFace config.json.
#pragma once

#include <cstdint>
#include <string>

namespace forge {

struct Gpt2Config {
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  int64_t n_ctx = 1024;  // HF's n_positions; n_ctx is accepted as a synonym
  int64_t vocab_size = 50257;
  float layer_norm_epsilon = 1e-5f;
  int64_t eos_token_id = -1;  // -1: none

  int64_t head_dim() const { return n_embd / n_head; }
  /// Throws forge::Error unless every field is positive and n_embd divides by n_head.
  void validate() const;

  /// Parses config.json: n_positions and/or n_ctx (equal when both are given), the rest with
  /// HF's defaults; activation_function must be gelu_new (or absent). Errors name the file.
  static Gpt2Config from_json_file(const std::string& path);
  static Gpt2Config from_json(const std::string& text, const std::string& origin = "config.json");
  std::string to_json() const;
};

}  // namespace forge
