#include "forge/serialization/compact.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "forge/core/error.h"
#include "forge/serialization/file_io.h"

namespace forge {
namespace {

// Scales and f32 tensors go between the file and memory unswapped.
static_assert(std::endian::native == std::endian::little,
              "the compact format is little-endian; a big-endian host needs byte swapping");

constexpr char kMagic[8] = {'F', 'G', 'C', 'O', 'M', 'P', 'C', 'T'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kFixedHeader = 32;  // magic, version, crc, file size, count, table bytes
constexpr uint64_t kMinEntry = 2 + 1 + 1 + 1 + 4 + 8 + 8;  // a one-byte name, rank 0
constexpr int kMaxRank = 8;
constexpr uint64_t kAlign = 16;
constexpr uint64_t kMaxGroup = 1u << 20;

/// CRC-32 (IEEE 802.3, reflected 0xEDB88320), as zlib computes it.
uint32_t crc32(std::span<const uint8_t> bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (uint8_t b : bytes) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

int quant_max(CompactDType dtype) {
  return dtype == CompactDType::Q8 ? 127 : 7;
}

uint64_t row_code_bytes(CompactDType dtype, uint64_t cols) {
  return dtype == CompactDType::Q8 ? cols : cols / 2 + cols % 2;
}

/// a · b, or an error when it does not fit in 63 bits (sizes stay valid int64 too).
uint64_t checked_mul(uint64_t a, uint64_t b, const std::string& what) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  FORGE_CHECK(a == 0 || b <= kMax / a, "{}: size overflows ({} × {})", what, a, b);
  return a * b;
}

uint64_t checked_add(uint64_t a, uint64_t b, const std::string& what) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  FORGE_CHECK(a <= kMax && b <= kMax - a, "{}: size overflows ({} + {})", what, a, b);
  return a + b;
}

/// Bytes a tensor of `dtype`, `shape` and `group` occupies: f32 values, or per row its
/// ceil(cols / group) f32 scales (all rows' scales first) and its codes.
uint64_t payload_bytes(CompactDType dtype, const Shape& shape, uint64_t group,
                       const std::string& what) {
  // The sizes' product must fit beside a zero too: a tensor's strides still multiply them.
  uint64_t product = 1;
  bool empty = false;
  for (int64_t d : shape.dims()) {
    empty = empty || d == 0;
    if (d != 0) product = checked_mul(product, static_cast<uint64_t>(d), what);
  }
  const uint64_t numel = empty ? 0 : product;
  if (dtype == CompactDType::F32) return checked_mul(numel, 4, what);
  const uint64_t cols = static_cast<uint64_t>(shape[-1]);
  const uint64_t rows = cols == 0 ? 0 : numel / cols;
  const uint64_t groups = cols / group + (cols % group != 0);
  return checked_add(checked_mul(checked_mul(rows, groups, what), 4, what),
                     checked_mul(rows, row_code_bytes(dtype, cols), what), what);
}

/// Bounds-checked little-endian reads over the header; errors say which field ran out.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, uint64_t pos, uint64_t end, const std::string& origin)
      : bytes_(bytes), pos_(pos), end_(end), origin_(origin) {}
  uint64_t pos() const { return pos_; }
  uint64_t uint(int width, const char* field) {
    FORGE_CHECK(end_ - pos_ >= static_cast<uint64_t>(width),
                "{}: tensor table ends inside {} at byte {} (table truncated or lying)", origin_,
                field, pos_);
    uint64_t v = 0;
    for (int i = width - 1; i >= 0; --i) v = (v << 8) | bytes_[pos_ + i];
    pos_ += width;
    return v;
  }
  std::string text(uint64_t n, const char* field) {
    FORGE_CHECK(end_ - pos_ >= n, "{}: tensor table ends inside {} at byte {}", origin_, field,
                pos_);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t pos_, end_;
  const std::string& origin_;
};

uint64_t read_le(std::span<const uint8_t> bytes, uint64_t pos, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | bytes[pos + i];
  return v;
}

void put_le(std::vector<uint8_t>& out, uint64_t value, int width) {
  for (int i = 0; i < width; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

void patch_le(std::vector<uint8_t>& out, uint64_t pos, uint64_t value, int width) {
  for (int i = 0; i < width; ++i) out[pos + i] = static_cast<uint8_t>(value >> (8 * i));
}

/// Quantises one row: per group s = absmax / qmax rounded up to a float, so |x / s| ≤ qmax
/// and no code clamps, and q = round(x / s): |x − q·s| ≤ s / 2. An all-zero group has s = 0.
void quantize_row(const float* x, uint64_t cols, uint64_t group, CompactDType dtype, float* scales,
                  uint8_t* codes) {
  const int qmax = quant_max(dtype);
  if (dtype == CompactDType::Q4) std::memset(codes, 0, row_code_bytes(dtype, cols));
  for (uint64_t g0 = 0, gi = 0; g0 < cols; g0 += group, ++gi) {
    const uint64_t g1 = std::min(cols, g0 + group);
    float absmax = 0.0f;
    for (uint64_t i = g0; i < g1; ++i) absmax = std::max(absmax, std::fabs(x[i]));
    const double wanted = static_cast<double>(absmax) / qmax;
    float s = static_cast<float>(wanted);
    if (static_cast<double>(s) < wanted) s = std::nextafter(s, INFINITY);
    scales[gi] = s;
    for (uint64_t i = g0; i < g1; ++i) {
      const long q = s == 0.0f ? 0 : std::lround(static_cast<double>(x[i]) / s);
      const int c = static_cast<int>(std::clamp<long>(q, -qmax, qmax));
      if (dtype == CompactDType::Q8) {
        codes[i] = static_cast<uint8_t>(static_cast<int8_t>(c));
      } else {
        codes[i / 2] |= static_cast<uint8_t>((c + 8) << (4 * (i % 2)));
      }
    }
  }
}

}  // namespace

const char* compact_dtype_name(CompactDType dtype) {
  switch (dtype) {
    case CompactDType::F32:
      return "f32";
    case CompactDType::Q8:
      return "q8";
    case CompactDType::Q4:
      return "q4";
  }
  return "unknown";
}

CompactCheckpoint CompactCheckpoint::open(const std::string& path) {
  const InputFile file(path);
  FORGE_CHECK(file.size() <= std::numeric_limits<std::size_t>::max(), "{}: too large", path);
  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<std::size_t>(file.size()));
  file.read_at(0, bytes->data(), bytes->size());
  CompactCheckpoint checkpoint = parse(*bytes, path);
  checkpoint.owned_ = std::move(bytes);
  return checkpoint;
}

CompactCheckpoint CompactCheckpoint::parse(std::span<const uint8_t> bytes,
                                           const std::string& origin) {
  CompactCheckpoint c;
  c.bytes_ = bytes;
  c.origin_ = origin;
  const uint64_t size = bytes.size();
  FORGE_CHECK(size >= kFixedHeader, "{}: {} bytes is too short for the {}-byte compact header",
              origin, size, kFixedHeader);
  FORGE_CHECK(std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0,
              "{}: not a compact checkpoint (bad magic)", origin);
  const uint64_t version = read_le(bytes, 8, 4);
  FORGE_CHECK(version == kVersion, "{}: compact version {} is not supported (this Forge reads {})",
              origin, version, kVersion);
  const uint64_t stated_size = read_le(bytes, 16, 8);
  FORGE_CHECK(stated_size == size, "{}: header says {} bytes but there are {} (file truncated?)",
              origin, stated_size, size);
  const uint64_t stored_crc = read_le(bytes, 12, 4);
  const uint32_t crc = crc32(bytes.subspan(16));
  FORGE_CHECK(crc == stored_crc,
              "{}: checksum mismatch (stored {:08x}, computed {:08x}): the "
              "file is corrupted",
              origin, stored_crc, crc);
  const uint64_t count = read_le(bytes, 24, 4);
  const uint64_t table_bytes = read_le(bytes, 28, 4);
  FORGE_CHECK(table_bytes <= size - kFixedHeader,
              "{}: tensor table of {} bytes runs past the end of the {}-byte file", origin,
              table_bytes, size);
  FORGE_CHECK(count <= table_bytes / kMinEntry,
              "{}: {} tensors cannot fit in a {}-byte tensor table", origin, count, table_bytes);
  const uint64_t data_start = kFixedHeader + table_bytes;

  Cursor cur(bytes, kFixedHeader, data_start, origin);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t name_bytes = cur.uint(2, "a name length");
    FORGE_CHECK(name_bytes > 0, "{}: tensor {} has an empty name", origin, i);
    std::string name = cur.text(name_bytes, "a name");
    const std::string what = fmt::format("{}: tensor '{}'", origin, name);
    CompactEntry e;
    const uint64_t dtype = cur.uint(1, "a dtype");
    FORGE_CHECK(dtype <= 2, "{}: unknown dtype code {}", what, dtype);
    e.dtype = static_cast<CompactDType>(dtype);
    const uint64_t rank = cur.uint(1, "a rank");
    FORGE_CHECK(rank <= kMaxRank, "{}: rank {} exceeds {}", what, rank, kMaxRank);
    e.group_size = static_cast<uint32_t>(cur.uint(4, "a group size"));
    std::vector<int64_t> dims;
    for (uint64_t d = 0; d < rank; ++d) {
      const uint64_t dim = cur.uint(8, "a dimension");
      FORGE_CHECK(dim <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                  "{}: dimension {} is {}, too large", what, d, dim);
      dims.push_back(static_cast<int64_t>(dim));
    }
    e.shape = Shape(std::move(dims));
    e.offset = cur.uint(8, "an offset");
    e.bytes = cur.uint(8, "a byte count");
    if (e.dtype == CompactDType::F32) {
      FORGE_CHECK(e.group_size == 0, "{}: an f32 tensor has group size {}, not 0", what,
                  e.group_size);
    } else {
      FORGE_CHECK(rank >= 1, "{}: a quantised tensor needs rank ≥ 1", what);
      FORGE_CHECK(e.group_size >= 1 && e.group_size <= kMaxGroup,
                  "{}: group size {} outside [1, {}]", what, e.group_size, kMaxGroup);
    }
    const uint64_t want = payload_bytes(e.dtype, e.shape, e.group_size, what);
    FORGE_CHECK(e.bytes == want, "{}: holds {} bytes, but {} {} in groups of {} needs {}", what,
                e.bytes, compact_dtype_name(e.dtype), e.shape.str(), e.group_size, want);
    FORGE_CHECK(e.offset >= data_start && e.offset <= size && e.bytes <= size - e.offset,
                "{}: bytes [{}, +{}) lie outside the data section [{}, {})", what, e.offset,
                e.bytes, data_start, size);
    FORGE_CHECK(c.entries_.emplace(name, e).second, "{}: appears twice in the tensor table", what);
    c.order_.push_back(std::move(name));
  }
  FORGE_CHECK(cur.pos() == data_start,
              "{}: the tensor table's {} entries end at byte {}, but the header says {}", origin,
              count, cur.pos(), data_start);

  std::vector<std::pair<uint64_t, const std::string*>> ranges;
  for (const auto& [name, e] : c.entries_) {
    if (e.bytes != 0) ranges.emplace_back(e.offset, &name);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    const CompactEntry& prev = c.entries_.at(*ranges[i - 1].second);
    FORGE_CHECK(ranges[i].first >= prev.offset + prev.bytes, "{}: tensor '{}' overlaps tensor '{}'",
                origin, *ranges[i].second, *ranges[i - 1].second);
  }
  return c;
}

const CompactEntry& CompactCheckpoint::entry(const std::string& name) const {
  const auto it = entries_.find(name);
  FORGE_CHECK(it != entries_.end(), "{}: no tensor named '{}' (the file holds {} tensors)", origin_,
              name, entries_.size());
  return it->second;
}

std::vector<float> CompactCheckpoint::decode(const std::string& name) const {
  const CompactEntry& e = entry(name);
  const uint8_t* src = bytes_.data() + e.offset;
  std::vector<float> out(static_cast<std::size_t>(e.shape.numel()));
  if (e.dtype == CompactDType::F32) {
    std::memcpy(out.data(), src, e.bytes);
    return out;
  }
  const uint64_t cols = static_cast<uint64_t>(e.shape[-1]);
  if (cols == 0) return out;
  const uint64_t rows = out.size() / cols;
  const uint64_t group = e.group_size;
  const uint64_t groups = cols / group + (cols % group != 0);
  const uint64_t row_bytes = row_code_bytes(e.dtype, cols);
  const uint8_t* codes = src + rows * groups * 4;
  for (uint64_t r = 0; r < rows; ++r) {
    const uint8_t* row = codes + r * row_bytes;
    float* y = out.data() + r * cols;
    for (uint64_t gi = 0; gi < groups; ++gi) {
      float s;
      std::memcpy(&s, src + (r * groups + gi) * 4, 4);
      FORGE_CHECK(std::isfinite(s) && s >= 0.0f, "{}: tensor '{}' row {} group {} has scale {}",
                  origin_, name, r, gi, s);
      const uint64_t end = std::min(cols, (gi + 1) * group);
      if (e.dtype == CompactDType::Q8) {
        for (uint64_t i = gi * group; i < end; ++i) y[i] = static_cast<int8_t>(row[i]) * s;
      } else {
        for (uint64_t i = gi * group; i < end; ++i)
          y[i] = static_cast<float>(((row[i / 2] >> (4 * (i % 2))) & 0xF) - 8) * s;
      }
    }
  }
  return out;
}

Tensor CompactCheckpoint::read(const std::string& name, const Device& device) const {
  return Tensor::from_floats(decode(name), entry(name).shape, device);
}

std::vector<uint8_t> encode_compact(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                    const CompactOptions& options) {
  FORGE_CHECK(options.bits == 8 || options.bits == 4, "compact: bits must be 4 or 8, got {}",
              options.bits);
  FORGE_CHECK(options.group_size >= 1 && static_cast<uint64_t>(options.group_size) <= kMaxGroup,
              "compact: group size must be in [1, {}], got {}", kMaxGroup, options.group_size);
  const CompactDType quantised = options.bits == 8 ? CompactDType::Q8 : CompactDType::Q4;

  std::vector<CompactEntry> entries;
  std::vector<std::vector<float>> values;
  std::map<std::string, int> seen;
  std::vector<uint8_t> table;
  for (const auto& [name, tensor] : tensors) {
    FORGE_CHECK(!name.empty() && name.size() <= 0xFFFF,
                "compact: tensor names must be 1 to 65535 bytes, got {} bytes", name.size());
    FORGE_CHECK(seen.emplace(name, 0).second, "compact: tensor '{}' is given twice", name);
    FORGE_CHECK(tensor.defined() && tensor.dtype() == DType::F32,
                "compact: tensor '{}' must be a defined f32 tensor", name);
    FORGE_CHECK(tensor.rank() <= kMaxRank, "compact: tensor '{}' has rank {} > {}", name,
                tensor.rank(), kMaxRank);
    CompactEntry e;
    e.shape = tensor.shape();
    if (tensor.rank() >= 2) {
      e.dtype = quantised;
      e.group_size = static_cast<uint32_t>(options.group_size);
    }
    e.bytes = payload_bytes(e.dtype, e.shape, e.group_size, "compact: tensor '" + name + "'");
    values.push_back(tensor.to_floats());
    for (size_t i = 0; i < values.back().size(); ++i) {
      FORGE_CHECK(std::isfinite(values.back()[i]), "compact: tensor '{}' element {} is {}", name, i,
                  values.back()[i]);
    }
    put_le(table, name.size(), 2);
    table.insert(table.end(), name.begin(), name.end());
    put_le(table, static_cast<uint8_t>(e.dtype), 1);
    put_le(table, static_cast<uint64_t>(tensor.rank()), 1);
    put_le(table, e.group_size, 4);
    for (int64_t d : e.shape.dims()) put_le(table, static_cast<uint64_t>(d), 8);
    entries.push_back(e);
    put_le(table, 0, 8);  // offset and size, patched once the layout is known
    put_le(table, 0, 8);
  }
  FORGE_CHECK(table.size() <= 0xFFFFFFFFu && tensors.size() <= 0xFFFFFFFFu,
              "compact: the tensor table is too large");

  uint64_t offset = kFixedHeader + table.size();
  uint64_t entry_end = 0;  // where each entry's offset field sits in `table`
  for (size_t i = 0; i < entries.size(); ++i) {
    entry_end += 2 + tensors[i].first.size() + 1 + 1 + 4 + 8 * entries[i].shape.dims().size() + 16;
    offset = (offset + kAlign - 1) / kAlign * kAlign;
    entries[i].offset = offset;
    for (int k = 0; k < 8; ++k) {
      table[entry_end - 16 + k] = static_cast<uint8_t>(offset >> (8 * k));
      table[entry_end - 8 + k] = static_cast<uint8_t>(entries[i].bytes >> (8 * k));
    }
    offset += entries[i].bytes;
  }

  std::vector<uint8_t> out(offset, 0);
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  patch_le(out, 8, kVersion, 4);
  patch_le(out, 24, entries.size(), 4);
  patch_le(out, 28, table.size(), 4);
  if (!table.empty()) std::memcpy(out.data() + kFixedHeader, table.data(), table.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const CompactEntry& e = entries[i];
    uint8_t* dst = out.data() + e.offset;
    const std::vector<float>& x = values[i];
    if (e.dtype == CompactDType::F32) {
      std::memcpy(dst, x.data(), e.bytes);
      continue;
    }
    const uint64_t cols = static_cast<uint64_t>(e.shape[-1]);
    if (cols == 0) continue;
    const uint64_t rows = x.size() / cols;
    const uint64_t groups = cols / e.group_size + (cols % e.group_size != 0);
    std::vector<float> scales(groups);
    uint8_t* codes = dst + rows * groups * 4;
    for (uint64_t r = 0; r < rows; ++r) {
      quantize_row(x.data() + r * cols, cols, e.group_size, e.dtype, scales.data(),
                   codes + r * row_code_bytes(e.dtype, cols));
      std::memcpy(dst + r * groups * 4, scales.data(), groups * 4);
    }
  }
  patch_le(out, 16, out.size(), 8);
  patch_le(out, 12, crc32(std::span<const uint8_t>(out).subspan(16)), 4);
  return out;
}

void save_compact(const std::string& path,
                  const std::vector<std::pair<std::string, Tensor>>& tensors,
                  const CompactOptions& options) {
  const std::vector<uint8_t> bytes = encode_compact(tensors, options);
  AtomicFileWriter out(path);
  out.write(bytes.data(), bytes.size());
  out.commit();
}

const char* checkpoint_format_name(CheckpointFormat format) {
  return format == CheckpointFormat::Compact ? "compact" : "safetensors";
}

CheckpointFormat detect_checkpoint_format(std::span<const uint8_t> head,
                                          const std::string& origin) {
  if (head.size() >= sizeof kMagic && std::memcmp(head.data(), kMagic, sizeof kMagic) == 0)
    return CheckpointFormat::Compact;
  if (head.size() >= 9 && head[8] == '{') return CheckpointFormat::Safetensors;
  std::string shown;
  for (size_t i = 0; i < std::min<size_t>(head.size(), 9); ++i)
    shown += fmt::format("{:02x}", head[i]);
  fail(
      "{}: neither a safetensors file (an 8-byte header length, then '{{') nor a compact "
      "checkpoint (magic FGCOMPCT): it starts with bytes {}",
      origin, shown.empty() ? "(none: empty file)" : shown);
}

CheckpointFormat detect_checkpoint_format(const std::string& path) {
  const InputFile file(path);
  uint8_t head[9];
  const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(file.size(), sizeof head));
  file.read_at(0, head, n);
  return detect_checkpoint_format(std::span<const uint8_t>(head, n), path);
}

}  // namespace forge
