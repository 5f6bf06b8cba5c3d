// The safetensors reader on arbitrary bytes: open() either refuses them with forge::Error or
// yields entries that every read() honours (a tensor of exactly the entry's shape, or an
// error for a dtype Forge does not load).
#include <cstdint>

#include "forge/core/error.h"
#include "forge/serialization/safetensors.h"
#include "fuzz_check.h"
#include "mem_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static forge::fuzz::MemFile file("model.safetensors");
  file.assign(data, size);
  try {
    const forge::SafetensorsFile st = forge::SafetensorsFile::open(file.path());
    FORGE_FUZZ_CHECK(st.file_size() == size, "file_size() is the input's size");
    for (const std::string& name : st.names()) {
      const forge::SafetensorsEntry& entry = st.entry(name);
      FORGE_FUZZ_CHECK(entry.begin <= entry.end && entry.end <= size, "entry inside the file");
      try {
        const forge::Tensor t = st.read(name, forge::Device::cpu());
        FORGE_FUZZ_CHECK(t.shape() == entry.shape, "read() returns the entry's shape");
      } catch (const forge::Error&) {
      }
    }
  } catch (const forge::Error&) {
  }
  return 0;
}
