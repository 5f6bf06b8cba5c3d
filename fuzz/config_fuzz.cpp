// config.json parsing on arbitrary text: from_json() either refuses it with forge::Error or
// returns a config that validates and survives to_json() → from_json() unchanged.
#include <cstdint>
#include <string>

#include "forge/core/error.h"
#include "forge/models/gpt2/config.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  forge::Gpt2Config c;
  try {
    c = forge::Gpt2Config::from_json(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const forge::Error&) {
    return 0;
  }
  c.validate();  // from_json() promised a valid config: an error here escapes and aborts
  const forge::Gpt2Config back = forge::Gpt2Config::from_json(c.to_json(), "to_json()");
  FORGE_FUZZ_CHECK(
      back.n_layer == c.n_layer && back.n_head == c.n_head && back.n_embd == c.n_embd &&
          back.n_ctx == c.n_ctx && back.vocab_size == c.vocab_size &&
          back.layer_norm_epsilon == c.layer_norm_epsilon && back.eos_token_id == c.eos_token_id,
      "to_json() reads back as the same config");
  return 0;
}
