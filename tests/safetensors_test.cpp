// safetensors: bit-identical round trips, exact half-float widening, the golden HF checkpoints,
// and hostile files (truncated, lying or malformed) that must fail with a clear message.
#include "forge/serialization/safetensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "forge/core/error.h"
#include "test_support.h"

namespace forge {
namespace {

namespace fs = std::filesystem;
using test::expect_error;

/// A fresh directory per test, removed with everything in it when the test ends.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            (std::string("forge-safetensors-") + info->name() + "-" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_))
      names.push_back(e.path().filename().string());
    return names;
  }

 private:
  fs::path path_;
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string u64_le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

/// A safetensors file with a hand-written header: the way to make it lie.
std::string with_header(const std::string& header, const std::string& data = "") {
  return u64_le(header.size()) + header + data;
}

template <typename T>
std::string raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::vector<uint32_t> bits_of(const std::vector<float>& values) {
  std::vector<uint32_t> bits;
  for (float v : values) bits.push_back(std::bit_cast<uint32_t>(v));
  return bits;
}

/// Writes `bytes` to a file in `dir` and asserts that opening it fails naming the file and
/// containing `needle`.
void expect_open_error(const TempDir& dir, const std::string& bytes, const std::string& needle) {
  const std::string path = dir.file("hostile.safetensors");
  write_bytes(path, bytes);
  expect_error([&] { SafetensorsFile::open(path); }, path + ": ");
  expect_error([&] { SafetensorsFile::open(path); }, needle);
}

// ---- round trips ---------------------------------------------------------------------------

TEST(Safetensors, SaveThenLoadIsBitIdenticalForF32U32EmptyScalarAndMetadata) {
  const TempDir dir;
  const Device cpu = Device::cpu();
  const std::vector<float> awkward = {0.0f,
                                      -0.0f,
                                      1.0f / 3.0f,
                                      std::numeric_limits<float>::denorm_min(),
                                      std::numeric_limits<float>::max(),
                                      -std::numeric_limits<float>::infinity(),
                                      std::bit_cast<float>(0x7fc01234u),  // NaN with a payload
                                      -1e-30f};
  const std::vector<uint32_t> ids = {0, 1, 50256, 0xffffffffu, 7, 8};
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"z.weights", Tensor::from_floats(awkward, {2, 2, 2}, cpu)},
      {"a.ids", Tensor::from_ids(ids, {2, 3}, cpu)},
      {"empty", Tensor::empty({0}, DType::F32, cpu)},
      {"empty.2d", Tensor::empty({3, 0}, DType::U32, cpu)},
      {"scalar", Tensor::from_floats({-2.5f}, Shape{}, cpu)},
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "1200"}};
  const std::string path = dir.file("model.safetensors");
  save_safetensors(path, tensors, metadata);

  const SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.metadata(), metadata);
  EXPECT_EQ(file.names(),
            (std::vector<std::string>{"a.ids", "empty", "empty.2d", "scalar", "z.weights"}));
  for (const auto& [name, original] : tensors) {
    SCOPED_TRACE(name);
    const Tensor loaded = file.read(name, cpu);
    EXPECT_EQ(loaded.shape(), original.shape());
    ASSERT_EQ(loaded.dtype(), original.dtype());
    if (original.dtype() == DType::F32) {
      EXPECT_EQ(bits_of(loaded.to_floats()), bits_of(original.to_floats()));
    } else {
      EXPECT_EQ(loaded.to_ids(), original.to_ids());
    }
  }
  EXPECT_EQ(file.entry("scalar").shape.rank(), 0);
  EXPECT_EQ(file.entry("a.ids").dtype, "U32");
}

TEST(Safetensors, SavedHeaderIsSortedSpacePaddedToEightBytesWithContiguousData) {
  const TempDir dir;
  const Device cpu = Device::cpu();
  const std::string path = dir.file("model.safetensors");
  save_safetensors(path,
                   {{"b", Tensor::from_floats({1, 2, 3}, {3}, cpu)},
                    {"a", Tensor::from_ids({9}, {1}, cpu)},
                    {"c", Tensor::from_floats({4, 5}, {1, 2}, cpu)}},
                   {{"format", "pt"}});
  const std::string bytes = read_regular_file(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  const std::string header = bytes.substr(8, n);
  const std::string json_text = header.substr(0, header.find_last_not_of(' ') + 1);
  EXPECT_EQ(header.find_first_not_of(' ', json_text.size()), std::string::npos);
  EXPECT_LT(header.size() - json_text.size(), 8u);
  EXPECT_EQ(json_text.rfind("{\"__metadata__\":{\"format\":\"pt\"},\"a\":", 0), 0u) << json_text;
  EXPECT_LT(json_text.find("\"b\":"), json_text.find("\"c\":"));
  EXPECT_EQ(bytes.size(), 8 + n + 4 + 12 + 8);

  const SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.entry("a").begin, 0u);
  EXPECT_EQ(file.entry("b").begin, 4u);
  EXPECT_EQ(file.entry("c").begin, 16u);
  EXPECT_EQ(file.entry("c").end, 24u);
}

TEST(Safetensors, SaveReplacesAnExistingFileAndLeavesNoTemporary) {
  const TempDir dir;
  const Device cpu = Device::cpu();
  const std::string path = dir.file("model.safetensors");
  save_safetensors(path, {{"w", Tensor::from_floats({1, 2}, {2}, cpu)}});
  save_safetensors(path, {{"w", Tensor::from_floats({3, 4, 5}, {3}, cpu)}});
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(SafetensorsFile::open(path).read("w", cpu).to_floats(), (std::vector<float>{3, 4, 5}));
}

TEST(Safetensors, FailedSaveRemovesItsTemporaryAndNamesThePath) {
  const TempDir dir;
  const Device cpu = Device::cpu();
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"w", Tensor::from_floats({1}, {1}, cpu)}};
  // A directory in the way makes the final rename fail after all data is written.
  const std::string blocked = dir.file("blocked.safetensors");
  fs::create_directory(blocked);
  expect_error([&] { save_safetensors(blocked, tensors); }, "cannot rename " + blocked + ".tmp.");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"blocked.safetensors"});

  const std::string nowhere = dir.file("missing-dir/model.safetensors");
  expect_error([&] { save_safetensors(nowhere, tensors); }, "cannot create " + nowhere + ".tmp.");
}

TEST(Safetensors, SaveRejectsDuplicateReservedAndUndefinedTensors) {
  const TempDir dir;
  const Device cpu = Device::cpu();
  const std::string path = dir.file("model.safetensors");
  const Tensor t = Tensor::from_floats({1}, {1}, cpu);
  expect_error([&] { save_safetensors(path, {{"w", t}, {"w", t}}); }, "tensor 'w' is given twice");
  expect_error(
      [&] {
        save_safetensors(path, {{"__metadata__", t}});
      },
      "'__metadata__' is reserved");
  expect_error([&] { save_safetensors(path, {{"w", Tensor()}}); }, "tensor 'w' is undefined");
  EXPECT_TRUE(dir.entries().empty());
}

// ---- half floats ---------------------------------------------------------------------------

/// Writes one 16-bit tensor of `dtype` holding `halves` and reads it back as f32 bits.
std::vector<uint32_t> widen(const TempDir& dir, const std::string& dtype,
                            const std::vector<uint16_t>& halves) {
  const std::string path = dir.file(dtype + ".safetensors");
  const std::string header = "{\"h\":{\"dtype\":\"" + dtype + "\",\"shape\":[" +
                             std::to_string(halves.size()) + "],\"data_offsets\":[0," +
                             std::to_string(halves.size() * 2) + "]}}";
  write_bytes(path, with_header(header, raw(halves)));
  const Tensor t = SafetensorsFile::open(path).read("h", Device::cpu());
  EXPECT_EQ(t.dtype(), DType::F32);
  return bits_of(t.to_floats());
}

TEST(Safetensors, F16WidensToF32ExactlyIncludingSubnormalsInfinitiesAndNaN) {
  const TempDir dir;
  const std::vector<std::pair<uint16_t, uint32_t>> cases = {
      {0x0000, 0x00000000},  // +0
      {0x8000, 0x80000000},  // -0
      {0x3c00, 0x3f800000},  // 1
      {0xc000, 0xc0000000},  // -2
      {0x3555, 0x3eaaa000},  // 0.333251953125
      {0x7bff, 0x477fe000},  // 65504, the largest finite
      {0x0400, 0x38800000},  // 2^-14, the smallest normal
      {0x0001, 0x33800000},  // 2^-24, the smallest subnormal
      {0x03ff, 0x387fc000},  // the largest subnormal
      {0x8001, 0xb3800000},  // -2^-24
      {0x7c00, 0x7f800000},  // +inf
      {0xfc00, 0xff800000},  // -inf
      {0x7e00, 0x7fc00000},  // quiet NaN
      {0x7c01, 0x7f802000},  // NaN payload kept
  };
  std::vector<uint16_t> in;
  std::vector<uint32_t> expected;
  for (const auto& [h, f] : cases) {
    in.push_back(h);
    expected.push_back(f);
  }
  EXPECT_EQ(widen(dir, "F16", in), expected);
}

TEST(Safetensors, Bf16WidensToF32ExactlyAsTheTopHalf) {
  const TempDir dir;
  const std::vector<uint16_t> in = {0x0000, 0x8000, 0x3f80, 0x4049, 0x0001,
                                    0x7f7f, 0x7f80, 0xff80, 0x7fc0};
  std::vector<uint32_t> expected;
  for (uint16_t b : in) expected.push_back(static_cast<uint32_t>(b) << 16);
  EXPECT_EQ(widen(dir, "BF16", in), expected);
  EXPECT_EQ(std::bit_cast<float>(expected[3]), 3.140625f);
}

TEST(Safetensors, ReadingAnUnsupportedDtypeNamesTheTensorAndDtype) {
  const TempDir dir;
  const std::string path = dir.file("i64.safetensors");
  write_bytes(path, with_header(R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})",
                                std::string(16, '\0')));
  const SafetensorsFile file = SafetensorsFile::open(path);  // valid file, unloadable dtype
  EXPECT_EQ(file.entry("ids").dtype, "I64");
  expect_error([&] { file.read("ids", Device::cpu()); }, path + ": tensor 'ids' has dtype I64");
  expect_error([&] { file.read("nope", Device::cpu()); }, path + ": no tensor named 'nope'");
}

// ---- the golden HF checkpoints -------------------------------------------------------------

/// The first `count` floats of `name`, read from the file with plain iostreams.
std::vector<float> raw_floats(const SafetensorsFile& file, const std::string& name, int count) {
  const std::string bytes = read_regular_file(file.path());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  std::vector<float> values(count);
  std::memcpy(values.data(), bytes.data() + 8 + n + file.entry(name).begin, count * sizeof(float));
  return values;
}

TEST(Safetensors, GoldenTinyCheckpointHasPrefixedHfNamesAndFullVocabWte) {
  const SafetensorsFile file =
      SafetensorsFile::open(test::golden_dir("tiny") + "/model.safetensors");
  const std::vector<std::string> names = file.names();
  EXPECT_EQ(names.size(), 4u + 2u * 12u);  // wte, wpe, ln_f.{weight,bias}, 12 per block
  for (const std::string& name : names) EXPECT_EQ(name.rfind("transformer.", 0), 0u) << name;
  EXPECT_FALSE(file.contains("lm_head.weight"));  // tied to wte
  EXPECT_EQ(file.metadata().at("format"), "pt");

  const SafetensorsEntry& wte = file.entry("transformer.wte.weight");
  EXPECT_EQ(wte.dtype, "F32");
  EXPECT_EQ(wte.shape, (Shape{50257, 64}));
  const Tensor t = file.read("transformer.wte.weight", Device::cpu());
  EXPECT_EQ(t.shape(), (Shape{50257, 64}));
  const std::vector<float> values = t.to_floats();
  EXPECT_EQ(std::vector<float>(values.begin(), values.begin() + 4),
            raw_floats(file, "transformer.wte.weight", 4));
  EXPECT_EQ(file.read("transformer.h.1.attn.c_attn.weight", Device::cpu()).shape(),
            (Shape{64, 192}));
}

TEST(Safetensors, GoldenCharCheckpointReadsEveryTensorWithItsHeaderShape) {
  const SafetensorsFile file =
      SafetensorsFile::open(test::golden_dir("char") + "/model.safetensors");
  EXPECT_EQ(file.entry("transformer.wte.weight").shape, (Shape{65, 32}));
  for (const std::string& name : file.names()) {
    SCOPED_TRACE(name);
    const Tensor t = file.read(name, Device::cpu());
    EXPECT_EQ(t.shape(), file.entry(name).shape);
    const std::vector<float> values = t.to_floats();
    EXPECT_EQ(std::vector<float>(values.begin(), values.begin() + 1), raw_floats(file, name, 1));
  }
}

// ---- hostile files -------------------------------------------------------------------------

TEST(SafetensorsHostile, GoldenFileTruncatedAnywhereFailsAtOpenNamingTheProblem) {
  const TempDir dir;
  const std::string whole = read_regular_file(test::golden_dir("char") + "/model.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(whole[i]);
  const uint64_t data_start = 8 + n;
  std::vector<uint64_t> cuts = {0,
                                1,
                                7,
                                8,
                                9,
                                100,
                                data_start - 1,
                                data_start,
                                data_start + 1,
                                data_start + 1000,
                                whole.size() - 1};
  for (uint64_t cut = 0; cut < whole.size(); cut += whole.size() / 23) cuts.push_back(cut);
  for (const uint64_t cut : cuts) {
    SCOPED_TRACE("cut at byte " + std::to_string(cut));
    const std::string needle = cut < 8            ? "too short for the 8-byte header length"
                               : cut < data_start ? "runs past the end of the"
                                                  : "run past the";
    expect_open_error(dir, whole.substr(0, cut), needle);
  }
}

TEST(SafetensorsHostile, TinyFilesAndMissingPathsFailWithTheirPath) {
  const TempDir dir;
  expect_open_error(dir, "", "file is 0 bytes, too short");
  expect_open_error(dir, "1234567", "file is 7 bytes, too short");
  const std::string missing = dir.file("absent.safetensors");
  expect_error([&] { SafetensorsFile::open(missing); },
               "cannot open " + missing + ": No such file");
  expect_error([&] { SafetensorsFile::open(dir.file("")); }, "not a regular file");
}

TEST(SafetensorsHostile, HeaderLengthPastTheEndOrAbsurdIsRefusedBeforeReading) {
  const TempDir dir;
  expect_open_error(dir, u64_le(1000) + "{}",
                    "header length 1000 runs past the end of the 10-byte");
  expect_open_error(dir, u64_le(~uint64_t{0}) + "{}", "exceeds the 100000000-byte limit");
  expect_open_error(dir, u64_le(100000001) + "{}", "exceeds the 100000000-byte limit");
}

TEST(SafetensorsHostile, HeaderThatIsNotAJsonObjectIsRefused) {
  const TempDir dir;
  expect_open_error(dir, with_header(""), "header is not valid JSON");
  expect_open_error(dir, with_header("{\"w\": {\"dtype\": "), "header is not valid JSON");
  expect_open_error(dir, with_header("{\"w\xff\": {}}"), "header is not valid JSON");
  expect_open_error(dir, with_header("[1, 2, 3]"), "header must be a JSON object, got array");
  expect_open_error(dir, with_header("\"F32\""), "header must be a JSON object, got string");
}

TEST(SafetensorsHostile, EntryWithMissingOrMistypedFieldsNamesTensorAndField) {
  const TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"w":"F32"})", "tensor 'w': header entry must be an object, got string"},
      {R"({"w":{"shape":[1],"data_offsets":[0,4]}})", "tensor 'w': header entry has no 'dtype'"},
      {R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", "tensor 'w': header entry has no 'shape'"},
      {R"({"w":{"dtype":"F32","shape":[1]}})", "tensor 'w': header entry has no 'data_offsets'"},
      {R"({"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", "'dtype' must be a string"},
      {R"({"w":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})", "'shape' must be an array"},
      {R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", "non-integer dimension"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4]}})", "must be [begin, end], got 1"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":{}}})", "must be an array [begin, end]"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", "non-negative integers"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":["0","4"]}})", "non-negative integers"},
      {R"({"__metadata__":{"step":12}})", "'__metadata__' value for 'step' must be a string"},
      {R"({"__metadata__":["pt"]})", "'__metadata__' must be an object"},
  };
  for (const auto& [header, needle] : cases) {
    SCOPED_TRACE(header);
    expect_open_error(dir, with_header(header, std::string(4, '\0')), needle);
  }
}

TEST(SafetensorsHostile, UnknownDtypeIsRefusedAtOpen) {
  const TempDir dir;
  expect_open_error(dir,
                    with_header(R"({"w":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})",
                                std::string(4, '\0')),
                    R"(tensor 'w': unknown dtype "F33")");
}

TEST(SafetensorsHostile, DeeplyNestedOrHugeHeaderValuesFailWithAShortMessage) {
  const TempDir dir;
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  expect_open_error(
      dir, with_header(R"({"w":{"dtype":"F32","data_offsets":[0,4],"shape":[)" + deep + "]}}"),
      "JSON nested deeper than 64 levels");
  const std::string path = dir.file("huge-dtype.safetensors");
  write_bytes(path, with_header(R"({"w":{"shape":[1],"data_offsets":[0,4],"dtype":")" +
                                std::string(1 << 20, 'Q') + "\"}}"));
  try {
    SafetensorsFile::open(path);
    ADD_FAILURE() << "huge dtype accepted";
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), path.size() + 200);
    EXPECT_NE(std::string(e.what()).find("unknown dtype \"QQQQ"), std::string::npos);
  }
}

TEST(SafetensorsHostile, NegativeOrOverflowingShapesAreRefusedWithoutOverflow) {
  const TempDir dir;
  const std::string data(16, '\0');
  const auto entry = [&](const std::string& dtype, const std::string& shape) {
    return with_header(
        "{\"w\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[0,16]}}",
        data);
  };
  expect_open_error(dir, entry("F32", "[-4]"), "shape has a negative dimension -4");
  expect_open_error(dir, entry("F32", "[4294967296,4294967296]"), "has too many elements");
  expect_open_error(dir, entry("F32", "[18446744073709551615]"), "has too many elements");
  // The product overflows before the zero would rescue it.
  expect_open_error(dir, entry("F32", "[4611686018427387904,4,0]"), "has too many elements");
  expect_open_error(dir, entry("F64", "[2305843009213693952]"), "has too many bytes");
  expect_open_error(dir, entry("F32", "[1e30]"), "non-integer dimension");
}

TEST(SafetensorsHostile, ByteRangesThatLieAboutSizeOrPositionAreRefused) {
  const TempDir dir;
  const std::string data(16, '\0');
  const auto entry = [&](const std::string& shape, const std::string& offsets) {
    return with_header(
        "{\"w\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}}",
        data);
  };
  expect_open_error(dir, entry("[3]", "[0,8]"), "hold 8 bytes, but F32 [3] needs 12");
  expect_open_error(dir, entry("[]", "[0,0]"), "hold 0 bytes, but F32 [] needs 4");
  expect_open_error(dir, entry("[4]", "[8,24]"), "data_offsets [8, 24] run past the 16-byte data");
  expect_open_error(dir, entry("[1]", "[12,8]"), "data_offsets [12, 8] end before they begin");
  expect_open_error(dir, entry("[1]", "[18446744073709551612,18446744073709551615]"),
                    "run past the 16-byte data section");
}

TEST(SafetensorsHostile, OverlappingByteRangesAreRefused) {
  const TempDir dir;
  expect_open_error(dir,
                    with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                std::string(12, '\0')),
                    "tensor 'b' bytes [4, 12) overlap tensor 'a' bytes [0, 8)");
}

TEST(SafetensorsHostile, ATensorNamedTwiceIsRefused) {
  const TempDir dir;
  expect_open_error(dir,
                    with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                std::string(8, '\0')),
                    "key \"a\" appears twice in one object");
}

TEST(SafetensorsHostile, AFifoOrDeviceIsRefusedAtOnceNotReadForever) {
  const TempDir dir;
  const std::string fifo = dir.file("fifo.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  test::expect_error([&] { SafetensorsFile::open(fifo); }, fifo + ": it is a FIFO");
  test::expect_error([&] { SafetensorsFile::open("/dev/zero"); }, "/dev/zero: it is a device");
  test::expect_error([&] { SafetensorsFile::open(dir.file("")); }, "it is a directory");
}

}  // namespace
}  // namespace forge
