#include "forge/models/gpt2/inspect.h"

#include <filesystem>
#include <map>

#include "forge/core/error.h"
#include "forge/models/gpt2/gpt2.h"
#include "forge/serialization/compact.h"
#include "forge/serialization/safetensors.h"

namespace forge {
namespace {

namespace fs = std::filesystem;

/// The name under which `file` holds `name`: with the "transformer." prefix or without.
template <typename File>
std::string stored_name(const File& file, const std::string& name, const std::string& path) {
  const std::string prefixed = "transformer." + name;
  if (file.contains(prefixed)) return prefixed;
  FORGE_CHECK(file.contains(name), "{}: missing tensor {} (or {})", path, name, prefixed);
  return name;
}

/// The precision of a weight dtype in the words forge top shows.
std::string precision_of(const std::string& dtype) {
  static const std::map<std::string, std::string> words = {{"F32", "f32"},   {"F16", "f16"},
                                                           {"BF16", "bf16"}, {"f32", "f32"},
                                                           {"q8", "8-bit"},  {"q4", "4-bit"}};
  const auto it = words.find(dtype);
  return it == words.end() ? dtype : it->second;
}

/// Checks every expected tensor against the config (the loader's checks and messages) and fills
/// the parameter count and precision; `entry(name)` gives a stored tensor's shape and dtype.
template <typename File, typename DTypeOf>
void check_tensors(const File& file, const std::string& path, ModelSummary& out, DTypeOf dtype_of) {
  for (const auto& [name, shape] : Gpt2::expected_tensors(out.config)) {
    const std::string stored = stored_name(file, name, path);
    const Shape& have = file.entry(stored).shape;
    FORGE_CHECK(have == shape, "{}: tensor {} has shape {}, but the config needs {}", path, stored,
                have.str(), shape.str());
    out.parameters += shape.numel();
    if (shape.rank() < 2) continue;  // the weights' precision; biases and norms stay f32
    const std::string p = precision_of(dtype_of(stored));
    out.precision = out.precision.empty() || out.precision == p ? p : "mixed";
  }
}

}  // namespace

bool is_model_directory(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir + "/config.json", ec) ||
         fs::is_regular_file(dir + "/model.safetensors", ec) ||
         fs::is_regular_file(dir + "/model.compact", ec);
}

ModelSummary inspect_model(const std::string& dir) {
  FORGE_CHECK(fs::is_directory(dir), "model directory {} does not exist", dir);
  ModelSummary out;
  out.dir = dir;
  out.config = Gpt2Config::from_json_file(dir + "/config.json");
  out.config.validate();
  out.checkpoint = Gpt2::checkpoint_path(dir);
  if (detect_checkpoint_format(out.checkpoint) == CheckpointFormat::Compact) {
    const CompactCheckpoint file = CompactCheckpoint::open(out.checkpoint);
    out.container = "compact";
    out.size_bytes = file.size();
    for (const std::string& name : file.names()) {
      const CompactEntry& e = file.entry(name);
      out.tensors.push_back({name, e.shape, compact_dtype_name(e.dtype), e.bytes});
    }
    check_tensors(file, out.checkpoint, out, [&](const std::string& name) {
      return std::string(compact_dtype_name(file.entry(name).dtype));
    });
  } else {
    const SafetensorsFile file = SafetensorsFile::open(out.checkpoint);
    out.container = "safetensors";
    out.size_bytes = file.file_size();
    for (const std::string& name : file.names()) {
      const SafetensorsEntry& e = file.entry(name);
      out.tensors.push_back({name, e.shape, e.dtype, e.end - e.begin});
    }
    check_tensors(file, out.checkpoint, out,
                  [&](const std::string& name) { return file.entry(name).dtype; });
  }
  const bool vocab = fs::is_regular_file(dir + "/vocab.json");
  out.tokenizer = !vocab ? "none" : fs::is_regular_file(dir + "/merges.txt") ? "gpt2-bpe" : "char";
  return out;
}

}  // namespace forge
