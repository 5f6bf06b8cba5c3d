#include "forge/serialization/safetensors.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <nlohmann/json.hpp>

#include "forge/core/error.h"
#include "forge/serialization/file_io.h"
#include "forge/serialization/half.h"
#include "forge/serialization/json_excerpt.h"
#include "forge/serialization/json_parse.h"

namespace forge {
namespace {

// Tensor bytes go between the file and memory unswapped.
static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swapping");

using Json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;
constexpr const char* kMetadataKey = "__metadata__";

/// Bytes per element of every dtype the format defines; a name not listed is rejected at open
/// because its size (and so the entry's byte range) cannot be checked.
uint64_t dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, uint64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"U16", 2},  {"I16", 2}, {"F16", 2}, {"BF16", 2},    {"U32", 4},
      {"I32", 4},  {"F32", 4}, {"U64", 8}, {"I64", 8},     {"F64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

/// The name save_safetensors() writes for each Forge dtype.
const char* safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "F32";
    case DType::U32:
      return "U32";
  }
  fail("unknown DType {}", static_cast<int>(dtype));
}

uint64_t read_u64_le(const unsigned char* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

/// Parses one header entry; `data_bytes` is the size of the data section it must fit in.
SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const Json& j,
                             uint64_t data_bytes) {
  const std::string where = fmt::format("{}: tensor '{}'", path, name);
  FORGE_CHECK(j.is_object(), "{}: header entry must be an object, got {}", where, j.type_name());
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    FORGE_CHECK(j.contains(field), "{}: header entry has no '{}'", where, field);
  }
  const Json& dtype = j["dtype"];
  const Json& shape = j["shape"];
  const Json& offsets = j["data_offsets"];
  FORGE_CHECK(dtype.is_string(), "{}: 'dtype' must be a string, got {}", where, dtype.type_name());
  FORGE_CHECK(shape.is_array(), "{}: 'shape' must be an array, got {}", where, shape.type_name());
  FORGE_CHECK(offsets.is_array(), "{}: 'data_offsets' must be an array [begin, end], got {}", where,
              offsets.type_name());
  FORGE_CHECK(offsets.size() == 2, "{}: 'data_offsets' must be [begin, end], got {} elements",
              where, offsets.size());

  SafetensorsEntry entry;
  entry.dtype = dtype.get<std::string>();
  const uint64_t element_bytes = dtype_bytes(entry.dtype);
  FORGE_CHECK(element_bytes != 0, "{}: unknown dtype {}", where, json_excerpt(dtype));

  // The running product must stay within int64, in the order Shape::numel() multiplies, even
  // when a later dimension is 0: a lying header must never make downstream size math overflow.
  constexpr uint64_t kMaxNumel = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  std::vector<int64_t> dims;
  uint64_t numel = 1;
  for (const Json& d : shape) {
    FORGE_CHECK(d.is_number_integer(), "{}: shape has a non-integer dimension {}", where,
                json_excerpt(d));
    FORGE_CHECK(d.is_number_unsigned(), "{}: shape has a negative dimension {}", where, d.dump());
    const uint64_t dim = d.get<uint64_t>();
    FORGE_CHECK(dim == 0 || (dim <= kMaxNumel && numel <= kMaxNumel / dim),
                "{}: shape has too many elements (overflow at dimension {} = {})", where,
                dims.size(), dim);
    numel *= dim;
    dims.push_back(static_cast<int64_t>(dim));
  }
  entry.shape = Shape(std::move(dims));
  FORGE_CHECK(numel <= std::numeric_limits<uint64_t>::max() / element_bytes,
              "{}: shape {} of {} has too many bytes", where, entry.shape.str(), entry.dtype);
  const uint64_t bytes = numel * element_bytes;

  for (const Json& o : offsets) {
    FORGE_CHECK(o.is_number_unsigned(), "{}: 'data_offsets' must be non-negative integers, got {}",
                where, json_excerpt(o));
  }
  entry.begin = offsets[0].get<uint64_t>();
  entry.end = offsets[1].get<uint64_t>();
  FORGE_CHECK(entry.begin <= entry.end, "{}: data_offsets [{}, {}] end before they begin", where,
              entry.begin, entry.end);
  FORGE_CHECK(entry.end <= data_bytes,
              "{}: data_offsets [{}, {}] run past the {}-byte data section (file truncated?)",
              where, entry.begin, entry.end, data_bytes);
  FORGE_CHECK(entry.end - entry.begin == bytes,
              "{}: data_offsets [{}, {}] hold {} bytes, but {} {} needs {}", where, entry.begin,
              entry.end, entry.end - entry.begin, entry.dtype, entry.shape.str(), bytes);
  return entry;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const Json& j) {
  FORGE_CHECK(j.is_object(), "{}: '{}' must be an object, got {}", path, kMetadataKey,
              j.type_name());
  std::map<std::string, std::string> metadata;
  for (const auto& [key, value] : j.items()) {
    FORGE_CHECK(value.is_string(), "{}: '{}' value for '{}' must be a string, got {}", path,
                kMetadataKey, key, value.type_name());
    metadata[key] = value.get<std::string>();
  }
  return metadata;
}

/// Rejects two tensors sharing bytes: writing one through a shared range would corrupt the
/// other, and no honest writer produces it. Empty ranges share nothing and are skipped.
void check_no_overlap(const std::string& path,
                      const std::map<std::string, SafetensorsEntry>& entries) {
  std::vector<const std::pair<const std::string, SafetensorsEntry>*> by_offset;
  for (const auto& item : entries) {
    if (item.second.begin != item.second.end) by_offset.push_back(&item);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->second.begin < b->second.begin; });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const auto& [prev_name, prev] = *by_offset[i - 1];
    const auto& [name, cur] = *by_offset[i];
    FORGE_CHECK(cur.begin >= prev.end,
                "{}: tensor '{}' bytes [{}, {}) overlap tensor '{}' bytes [{}, {})", path, name,
                cur.begin, cur.end, prev_name, prev.begin, prev.end);
  }
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile file;
  file.file_ = std::make_shared<const InputFile>(path);
  file.path_ = path;
  file.file_size_ = file.file_->size();

  FORGE_CHECK(file.file_size_ >= 8,
              "{}: file is {} bytes, too short for the 8-byte header length of a safetensors "
              "file",
              path, file.file_size_);
  unsigned char length_bytes[8];
  file.file_->read_at(0, length_bytes, sizeof length_bytes);
  const uint64_t header_bytes = read_u64_le(length_bytes);
  FORGE_CHECK(header_bytes <= kMaxHeaderBytes,
              "{}: header length {} exceeds the {}-byte limit (not a safetensors file?)", path,
              header_bytes, kMaxHeaderBytes);
  FORGE_CHECK(header_bytes <= file.file_size_ - 8,
              "{}: header length {} runs past the end of the {}-byte file (file truncated?)", path,
              header_bytes, file.file_size_);
  file.data_start_ = 8 + header_bytes;

  std::string text(header_bytes, '\0');
  file.file_->read_at(8, text.data(), text.size());
  Json header;
  try {
    header = parse_json_limited(text, path);
  } catch (const Json::exception& e) {
    fail("{}: header is not valid JSON: {}", path, e.what());
  }
  FORGE_CHECK(header.is_object(), "{}: header must be a JSON object, got {}", path,
              header.type_name());

  const uint64_t data_bytes = file.file_size_ - file.data_start_;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      file.metadata_ = parse_metadata(path, value);
    } else {
      file.entries_.emplace(name, parse_entry(path, name, value, data_bytes));
    }
  }
  check_no_overlap(path, file.entries_);
  return file;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> names;
  names.reserve(entries_.size());
  for (const auto& item : entries_) names.push_back(item.first);
  return names;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = entries_.find(name);
  FORGE_CHECK(it != entries_.end(), "{}: no tensor named '{}' (the file holds {} tensors)", path_,
              name, entries_.size());
  return it->second;
}

Tensor SafetensorsFile::read(const std::string& name, const Device& device) const {
  const SafetensorsEntry& e = entry(name);
  const uint64_t offset = data_start_ + e.begin;
  const std::size_t bytes = static_cast<std::size_t>(e.end - e.begin);

  if (e.dtype == "F32" || e.dtype == "U32") {
    Tensor t = Tensor::empty(e.shape, e.dtype == "F32" ? DType::F32 : DType::U32, device);
    // Straight into host memory when the device has it: no second copy of a 150 MB wte.
    if (void* host = t.buffer().host()) {
      file_->read_at(offset, static_cast<char*>(host) + t.offset() * 4, bytes);
    } else {
      std::vector<char> staging(bytes);
      file_->read_at(offset, staging.data(), bytes);
      t.write(staging.data(), bytes);
    }
    return t;
  }
  if (e.dtype == "F16" || e.dtype == "BF16") {
    std::vector<uint16_t> halves(bytes / 2);
    file_->read_at(offset, halves.data(), bytes);
    std::vector<float> values(halves.size());
    const bool bf16 = e.dtype == "BF16";
    std::transform(halves.begin(), halves.end(), values.begin(),
                   [bf16](uint16_t h) { return bf16 ? bf16_to_f32(h) : f16_to_f32(h); });
    return Tensor::from_floats(values, e.shape, device);
  }
  fail("{}: tensor '{}' has dtype {}, which Forge cannot load (it reads F32, F16, BF16, U32)",
       path_, name, e.dtype);
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Sorted by name; the map also rejects a name given twice.
  std::map<std::string, const Tensor*> sorted;
  for (const auto& [name, tensor] : tensors) {
    FORGE_CHECK(!name.empty(), "{}: cannot save a tensor with an empty name", path);
    FORGE_CHECK(name != kMetadataKey, "{}: '{}' is reserved and cannot name a tensor", path,
                kMetadataKey);
    FORGE_CHECK(tensor.defined(), "{}: tensor '{}' is undefined", path, name);
    FORGE_CHECK(sorted.emplace(name, &tensor).second, "{}: tensor '{}' is given twice", path, name);
  }

  // ordered_json keeps __metadata__ first, as HuggingFace writes it.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : sorted) {
    const uint64_t bytes = static_cast<uint64_t>(tensor->numel()) * dtype_size(tensor->dtype());
    header[name] = {{"dtype", safetensors_dtype(tensor->dtype())},
                    {"shape", tensor->shape().dims()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::ordered_json::exception& e) {
    fail("{}: cannot write the header (a tensor name or metadata string is not UTF-8?): {}", path,
         e.what());
  }
  // Data starts 8-byte aligned, so a reader may map it and use it in place.
  text.append((8 - text.size() % 8) % 8, ' ');

  AtomicFileWriter out(path);
  unsigned char length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<unsigned char>(text.size() >> (8 * i));
  out.write(length_bytes, sizeof length_bytes);
  out.write(text.data(), text.size());
  for (const auto& [name, tensor] : sorted) {
    if (tensor->dtype() == DType::F32) {
      const std::vector<float> values = tensor->to_floats();
      out.write(values.data(), values.size() * sizeof(float));
    } else {
      const std::vector<uint32_t> ids = tensor->to_ids();
      out.write(ids.data(), ids.size() * sizeof(uint32_t));
    }
  }
  out.commit();
}

}  // namespace forge
