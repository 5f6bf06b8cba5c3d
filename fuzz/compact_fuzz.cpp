// The compact reader on arbitrary bytes. The CRC-32 over everything after byte 16 would turn
// nearly every mutation into a checksum error, so the harness writes the right one in, and the
// file size at byte 16 with it: the table and the tensor decoding behind it are what get
// fuzzed (tests/compact_test.cpp covers checksum and size errors). Whatever parse() accepts,
// decode() and read() must honour.
#include <zlib.h>

#include <cstdint>
#include <vector>

#include "forge/core/error.h"
#include "forge/serialization/compact.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  if (bytes.size() >= 24) {
    for (int i = 0; i < 8; ++i) bytes[16 + i] = static_cast<uint8_t>(uint64_t{size} >> (8 * i));
    const uLong crc = crc32(0L, bytes.data() + 16, static_cast<uInt>(bytes.size() - 16));
    for (int i = 0; i < 4; ++i) bytes[12 + i] = static_cast<uint8_t>(crc >> (8 * i));
  }
  try {
    const forge::CompactCheckpoint checkpoint = forge::CompactCheckpoint::parse(bytes, "fuzz");
    FORGE_FUZZ_CHECK(checkpoint.size() == size, "size() is the input's size");
    for (const std::string& name : checkpoint.names()) {
      const forge::CompactEntry& entry = checkpoint.entry(name);
      FORGE_FUZZ_CHECK(entry.offset <= size && entry.bytes <= size - entry.offset,
                       "entry inside the file");
      const std::vector<float> values = checkpoint.decode(name);
      FORGE_FUZZ_CHECK(static_cast<int64_t>(values.size()) == entry.shape.numel(),
                       "decode() yields numel values");
      const forge::Tensor t = checkpoint.read(name, forge::Device::cpu());
      FORGE_FUZZ_CHECK(t.shape() == entry.shape, "read() returns the entry's shape");
    }
  } catch (const forge::Error&) {
  }
  return 0;
}
