// HuggingFace safetensors: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and byte range, then the raw little-endian data.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "forge/core/tensor.h"

namespace forge {

class InputFile;

/// One tensor's header entry, validated against the file: offsets inside the data section,
/// size = numel × dtype size, no overlaps.
struct SafetensorsEntry {
  std::string dtype;  // as written: "F32", "F16", "BF16", "U32", "I64", ...
  Shape shape;
  uint64_t begin = 0;  // byte offsets relative to the start of the data section
  uint64_t end = 0;
};

/// An opened safetensors file. The header is parsed and validated eagerly, so a truncated,
/// lying or non-JSON file fails at open() with its path in the message. Headers over 100 MB are
/// refused (GPT-2 XL needs tens of KB). Unused bytes between or after tensors are allowed; ranges
/// that overlap are not. The file stays open, so read() sees the bytes the header described
/// even if the path is replaced meanwhile; copies share the descriptor, and read() is safe to
/// call from several threads.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  const SafetensorsEntry& entry(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  uint64_t file_size() const { return file_size_; }

  /// Reads one tensor onto `device`. F32 stays f32, F16/BF16 widen to f32, U32 stays u32;
  /// any other dtype is an error naming the tensor and its dtype.
  Tensor read(const std::string& name, const Device& device) const;

 private:
  std::shared_ptr<const InputFile> file_;
  std::string path_;
  uint64_t file_size_ = 0;
  uint64_t data_start_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

/// Writes tensors (f32 as "F32", u32 as "U32", from any device) atomically: a temporary file
/// beside `path`, fsync, then rename, so a crash never leaves a half-written checkpoint. The
/// header lists names sorted, with data in the same order and contiguous, padded with spaces
/// to a multiple of 8 bytes as HuggingFace does; `__metadata__` is written when non-empty.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace forge
