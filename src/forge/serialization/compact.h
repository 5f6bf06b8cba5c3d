// The compact checkpoint: groupwise symmetric 8- or 4-bit weights with f32 scales, f32 for the
// small tensors, dequantised to f32 on load. A binary little-endian header (docs/compact.md)
// names every tensor; a CRC-32 guards the rest, because a flipped weight byte is otherwise a
// valid, silently wrong, weight. Decoding works on bytes in memory (the browser's fetch).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "forge/core/tensor.h"

namespace forge {

/// How a tensor is stored: raw f32, or quantised (Q8: int8, Q4: two nibbles per byte).
enum class CompactDType : uint8_t { F32 = 0, Q8 = 1, Q4 = 2 };
const char* compact_dtype_name(CompactDType dtype);

/// One tensor's table entry, validated: the byte range lies inside the file and holds exactly
/// what the dtype, shape and group size need.
struct CompactEntry {
  CompactDType dtype = CompactDType::F32;
  Shape shape;
  uint32_t group_size = 0;  // elements per scale along the last dimension; 0 for F32
  uint64_t offset = 0;      // from the start of the file
  uint64_t bytes = 0;
};

/// What the writer does: tensors of rank ≥ 2 are quantised to `bits` in groups of
/// `group_size` along their last dimension; biases and LayerNorm parameters stay f32.
struct CompactOptions {
  int bits = 8;  // 8 or 4
  int64_t group_size = 32;
};

/// A parsed and validated compact checkpoint. open() reads the file into memory; parse() only
/// views `bytes`, which must outlive the checkpoint and every copy of it.
class CompactCheckpoint {
 public:
  static CompactCheckpoint open(const std::string& path);
  /// `origin` names the bytes in error messages (a path or a URL).
  static CompactCheckpoint parse(std::span<const uint8_t> bytes, const std::string& origin);

  const std::string& origin() const { return origin_; }
  uint64_t size() const { return bytes_.size(); }
  /// Names in file order.
  const std::vector<std::string>& names() const { return order_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  const CompactEntry& entry(const std::string& name) const;

  /// The tensor's values as f32: q · scale for quantised tensors.
  std::vector<float> decode(const std::string& name) const;
  Tensor read(const std::string& name, const Device& device) const;

 private:
  std::shared_ptr<const std::vector<uint8_t>> owned_;  // set by open()
  std::span<const uint8_t> bytes_;
  std::string origin_;
  std::vector<std::string> order_;
  std::map<std::string, CompactEntry> entries_;
};

/// The file's bytes for `tensors` (f32, any device); names must be unique and non-empty, and
/// every value finite (a NaN or infinity has no scale).
std::vector<uint8_t> encode_compact(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                    const CompactOptions& options);
/// encode_compact() written atomically: a temporary beside `path`, fsync, rename.
void save_compact(const std::string& path,
                  const std::vector<std::pair<std::string, Tensor>>& tensors,
                  const CompactOptions& options);

enum class CheckpointFormat { Safetensors, Compact };
const char* checkpoint_format_name(CheckpointFormat format);
/// The format from the leading bytes: the compact magic, or safetensors' 8-byte little-endian
/// header length followed by '{'. Anything else is an error quoting what was found.
CheckpointFormat detect_checkpoint_format(std::span<const uint8_t> head, const std::string& origin);
CheckpointFormat detect_checkpoint_format(const std::string& path);

}  // namespace forge
