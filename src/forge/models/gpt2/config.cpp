#include "forge/models/gpt2/config.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "forge/core/error.h"
#include "forge/serialization/file_io.h"
#include "forge/serialization/json_excerpt.h"
#include "forge/serialization/json_parse.h"

namespace forge {
namespace {

using Json = nlohmann::json;

/// Reads integer `key` into `out` when present; any other JSON type is an error naming it.
void read_int(const Json& j, const char* key, const std::string& origin, int64_t& out) {
  if (!j.contains(key)) return;
  const Json& v = j[key];
  FORGE_CHECK(v.is_number_integer(), "{}: '{}' must be an integer, got {}", origin, key,
              json_excerpt(v));
  FORGE_CHECK(!v.is_number_unsigned() ||
                  v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
              "{}: '{}' = {} is out of range", origin, key, v.dump());
  out = v.get<int64_t>();
}

/// Options HF's GPT2Config has that change the numbers Forge would compute: a config that sets
/// them describes a different model, so it is refused rather than run wrongly.
void reject_unsupported(const Json& j, const std::string& origin, int64_t n_embd) {
  if (j.contains("activation_function")) {
    const Json& v = j["activation_function"];
    FORGE_CHECK(v.is_string(), "{}: 'activation_function' must be a string, got {}", origin,
                v.type_name());
    FORGE_CHECK(v.get<std::string>() == "gelu_new",
                "{}: activation_function '{}' is not supported: Forge implements GPT-2's "
                "tanh-approximated GELU, 'gelu_new', only",
                origin, v.get<std::string>());
  }
  if (j.contains("model_type")) {
    const Json& v = j["model_type"];
    FORGE_CHECK(v.is_string() && v.get<std::string>() == "gpt2",
                "{}: model_type {} is not \"gpt2\"", origin, json_excerpt(v));
  }
  if (j.contains("n_inner") && !j["n_inner"].is_null()) {
    int64_t n_inner = 0;
    read_int(j, "n_inner", origin, n_inner);
    // Divided rather than multiplied: 4 * n_embd overflows for a hostile n_embd.
    FORGE_CHECK(n_inner % 4 == 0 && n_inner / 4 == n_embd,
                "{}: n_inner {} is not supported: Forge's MLP is 4 * n_embd wide (n_embd {})",
                origin, n_inner, n_embd);
  }
  const auto flag_is = [&](const char* key, bool expected) {
    if (!j.contains(key)) return;
    const Json& v = j[key];
    FORGE_CHECK(v.is_boolean(), "{}: '{}' must be a boolean, got {}", origin, key, v.type_name());
    FORGE_CHECK(v.get<bool>() == expected, "{}: {} = {} is not supported by Forge", origin, key,
                v.get<bool>());
  };
  flag_is("scale_attn_weights", true);
  flag_is("scale_attn_by_inverse_layer_idx", false);
}

/// The parameters' bytes (f32) of a GPT-2 of `c`, in `bytes`; false when a step overflows.
bool checked_parameter_bytes(const Gpt2Config& c, int64_t& bytes) {
  const int64_t e = c.n_embd;
  int64_t e2 = 0, layer = 0, layers = 0, wte = 0, wpe = 0, total = 0;
  // Per block: c_attn e·3e + 3e, attn c_proj e·e + e, c_fc e·4e + 4e, mlp c_proj 4e·e + e,
  // two LayerNorms 4e: 12e² + 13e.
  return !__builtin_mul_overflow(e, e, &e2) && !__builtin_mul_overflow(e2, 12, &layer) &&
         !__builtin_add_overflow(layer, 13 * e, &layer) &&
         !__builtin_mul_overflow(layer, c.n_layer, &layers) &&
         !__builtin_mul_overflow(c.vocab_size, e, &wte) &&
         !__builtin_mul_overflow(c.n_ctx, e, &wpe) &&
         !__builtin_add_overflow(layers, wte, &total) &&
         !__builtin_add_overflow(total, wpe, &total) &&
         !__builtin_add_overflow(total, 2 * e, &total) && !__builtin_mul_overflow(total, 4, &bytes);
}

}  // namespace

void Gpt2Config::validate() const {
  FORGE_CHECK(n_layer > 0, "n_layer must be positive, got {}", n_layer);
  FORGE_CHECK(n_head > 0, "n_head must be positive, got {}", n_head);
  FORGE_CHECK(n_embd > 0, "n_embd must be positive, got {}", n_embd);
  FORGE_CHECK(n_ctx > 0, "n_positions (n_ctx) must be positive, got {}", n_ctx);
  FORGE_CHECK(vocab_size > 0, "vocab_size must be positive, got {}", vocab_size);
  // Token ids are u32 throughout.
  FORGE_CHECK(vocab_size <= int64_t{1} << 32, "vocab_size {} does not fit u32 token ids",
              vocab_size);
  FORGE_CHECK(std::isfinite(layer_norm_epsilon) && layer_norm_epsilon > 0,
              "layer_norm_epsilon must be positive and finite, got {}", layer_norm_epsilon);
  FORGE_CHECK(n_embd % n_head == 0, "n_embd {} is not divisible by n_head {}", n_embd, n_head);
  FORGE_CHECK(eos_token_id == -1 || (eos_token_id >= 0 && eos_token_id < vocab_size),
              "eos_token_id {} is outside the vocabulary of {}", eos_token_id, vocab_size);
  // Every size derived from the config (3·n_embd, vocab_size × n_embd, the parameters' bytes)
  // must fit int64, so no later multiply overflows.
  int64_t bytes = 0;
  FORGE_CHECK(checked_parameter_bytes(*this, bytes),
              "n_layer {}, n_embd {}, n_positions {} and vocab_size {} make a model whose size "
              "overflows 64 bits",
              n_layer, n_embd, n_ctx, vocab_size);
}

Gpt2Config Gpt2Config::from_json_file(const std::string& path) {
  std::string text;
  try {
    text = read_regular_file(path);
  } catch (const Error& e) {
    fail("cannot open GPT-2 config {}: {}", path, e.what());
  }
  return from_json(text, path);
}

Gpt2Config Gpt2Config::from_json(const std::string& text, const std::string& origin) {
  Json j;
  try {
    j = parse_json_limited(text, origin);
  } catch (const Json::exception& e) {
    fail("{}: not valid JSON: {}", origin, e.what());
  }
  FORGE_CHECK(j.is_object(), "{}: must be a JSON object, got {}", origin, j.type_name());

  Gpt2Config c;
  read_int(j, "n_layer", origin, c.n_layer);
  read_int(j, "n_head", origin, c.n_head);
  read_int(j, "n_embd", origin, c.n_embd);
  read_int(j, "vocab_size", origin, c.vocab_size);

  // HF names the context n_positions; older configs also (or only) carry n_ctx.
  int64_t n_positions = -1;
  int64_t n_ctx = -1;
  read_int(j, "n_positions", origin, n_positions);
  read_int(j, "n_ctx", origin, n_ctx);
  FORGE_CHECK(!j.contains("n_positions") || !j.contains("n_ctx") || n_positions == n_ctx,
              "{}: n_positions {} and n_ctx {} disagree", origin, n_positions, n_ctx);
  if (j.contains("n_positions")) {
    c.n_ctx = n_positions;
  } else if (j.contains("n_ctx")) {
    c.n_ctx = n_ctx;
  }

  if (j.contains("layer_norm_epsilon")) {
    const Json& v = j["layer_norm_epsilon"];
    FORGE_CHECK(v.is_number(), "{}: 'layer_norm_epsilon' must be a number, got {}", origin,
                json_excerpt(v));
    // Range-check as double: narrowing an out-of-range double to float is undefined.
    const double eps = v.get<double>();
    FORGE_CHECK(eps > 0 && eps <= std::numeric_limits<float>::max(),
                "{}: layer_norm_epsilon {} must be positive and fit f32", origin, v.dump());
    c.layer_norm_epsilon = static_cast<float>(eps);
  }
  // null is how HF writes "no end-of-text token".
  if (j.contains("eos_token_id") && !j["eos_token_id"].is_null()) {
    read_int(j, "eos_token_id", origin, c.eos_token_id);
  }
  reject_unsupported(j, origin, c.n_embd);

  try {
    c.validate();
  } catch (const Error& e) {
    fail("{}: {}", origin, e.what());
  }
  return c;
}

std::string Gpt2Config::to_json() const {
  nlohmann::ordered_json j;
  j["model_type"] = "gpt2";
  j["architectures"] = nlohmann::ordered_json::array({"GPT2LMHeadModel"});
  j["n_layer"] = n_layer;
  j["n_head"] = n_head;
  j["n_embd"] = n_embd;
  // Both spellings, so old and new readers agree on the context length.
  j["n_positions"] = n_ctx;
  j["n_ctx"] = n_ctx;
  j["vocab_size"] = vocab_size;
  // Through the float's shortest decimal, so 1e-5f is written as 1e-05 and not as the double
  // 9.999999747378752e-06, and reads back as the same float.
  j["layer_norm_epsilon"] = std::stod(fmt::format("{}", layer_norm_epsilon));
  j["activation_function"] = "gelu_new";
  j["tie_word_embeddings"] = true;
  if (eos_token_id >= 0) j["eos_token_id"] = eos_token_id;
  return j.dump(2) + "\n";
}

}  // namespace forge
