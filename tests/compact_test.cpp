// The compact checkpoint: quantisation error bounds, golden logits from a compact model,
// hostile bytes, format detection, and `forge convert` on the real binary.
#include "forge/serialization/compact.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "cli_run.h"
#include "forge/models/gpt2/gpt2.h"
#include "forge/serialization/safetensors.h"
#include "test_support.h"

namespace forge {
namespace {

namespace fs = std::filesystem;
using test::expect_error;
using Bytes = std::vector<uint8_t>;

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            (std::string("forge-compact-") + info->name() + "-" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

Tensor floats(const std::vector<float>& v, Shape shape) {
  return Tensor::from_floats(v, shape, Device::cpu());
}

/// A row mixing the cases the bound must survive, `cols` long (not a multiple of most groups).
std::vector<float> hostile_rows(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (auto& v : x) v = normal(rng);
  for (int64_t c = 0; c < std::min<int64_t>(cols, 40); ++c) {
    x[0 * cols + c] = 0.0f;                      // all-zero groups
    if (rows > 1) x[1 * cols + c] = -0.3125f;    // constant groups
    if (rows > 2) x[2 * cols + c] = 1e-41f * c;  // subnormals: the scale underflows
  }
  if (rows > 3 && cols > 5) x[3 * cols + 5] = 1e30f;   // a huge outlier
  if (rows > 4 && cols > 1) x[4 * cols + 1] = -3e38f;  // near FLT_MAX
  return x;
}

/// |x − q(x)| ≤ s/2 per group, s = absmax/qmax, plus the f32 rounding of s and of q·s.
void expect_within_half_a_scale(const std::vector<float>& x, const std::vector<float>& y,
                                int64_t cols, int64_t group, int bits) {
  const double qmax = bits == 8 ? 127 : 7;
  ASSERT_EQ(x.size(), y.size());
  for (size_t r = 0; r < x.size() / cols; ++r) {
    for (int64_t g0 = 0; g0 < cols; g0 += group) {
      const int64_t g1 = std::min(cols, g0 + group);
      double absmax = 0;
      for (int64_t i = g0; i < g1; ++i)
        absmax = std::max(absmax, std::fabs(double(x[r * cols + i])));
      const double s = absmax / qmax;
      const double bound =
          s / 2 * (1 + 1e-6) + absmax * 0x1p-23 + std::numeric_limits<float>::denorm_min();
      for (int64_t i = g0; i < g1; ++i) {
        const size_t k = r * cols + i;
        ASSERT_LE(std::fabs(double(x[k]) - y[k]), bound)
            << "row " << r << " col " << i << " x " << x[k] << " decoded " << y[k];
        if (absmax == 0) {
          ASSERT_EQ(y[k], 0.0f);
        }
      }
    }
  }
}

TEST(Compact, QuantisedWeightsStayWithinHalfAScaleOnRandomAndAdversarialRows) {
  for (int bits : {8, 4}) {
    for (int64_t group : {32, 64, 7, 1}) {
      for (int64_t cols : {100, 64, 33, 1}) {
        SCOPED_TRACE(fmt::format("bits {} group {} cols {}", bits, group, cols));
        const std::vector<float> x = hostile_rows(6, cols, uint64_t(bits * 1000 + group + cols));
        const Bytes bytes = encode_compact({{"w", floats(x, {6, cols})}}, {bits, group});
        const CompactCheckpoint c = CompactCheckpoint::parse(bytes, "mem");
        EXPECT_EQ(c.entry("w").dtype, bits == 8 ? CompactDType::Q8 : CompactDType::Q4);
        expect_within_half_a_scale(x, c.decode("w"), cols, group, bits);
      }
    }
  }
}

TEST(Compact, ConstantGroupsDecodeToTheirValueAndSmallTensorsStayExact) {
  const std::vector<float> c(64, 0.7f);
  const std::vector<float> bias = {1.5f, -2.25f, 3.0e-39f, 7.0f};
  const Bytes bytes =
      encode_compact({{"c", floats(c, {2, 32})}, {"b", floats(bias, {4})}}, {4, 32});
  const CompactCheckpoint ck = CompactCheckpoint::parse(bytes, "mem");
  for (float v : ck.decode("c")) EXPECT_NEAR(v, 0.7f, 0.7f * 0x1p-22);
  EXPECT_EQ(ck.entry("b").dtype, CompactDType::F32);
  EXPECT_EQ(ck.decode("b"), bias);  // bit-exact
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"c", "b"}));
}

TEST(Compact, FourBitsOfGroupsOf32TakeFiveBitsAWeight) {
  const std::vector<float> w(256 * 256, 0.01f);
  const Bytes b4 = encode_compact({{"w", floats(w, {256, 256})}}, {4, 32});
  const Bytes b8 = encode_compact({{"w", floats(w, {256, 256})}}, {8, 32});
  const CompactCheckpoint c4 = CompactCheckpoint::parse(b4, "mem");
  const CompactCheckpoint c8 = CompactCheckpoint::parse(b8, "mem");
  EXPECT_EQ(c4.entry("w").bytes, 256u * 8 * 4 + 256 * 128);
  EXPECT_EQ(c8.entry("w").bytes, 256u * 8 * 4 + 256 * 256);
}

TEST(Compact, WriterRejectsNonFiniteValuesDuplicateNamesAndBadOptions) {
  expect_error([] { encode_compact({{"w", floats({1, NAN}, {1, 2})}}, {}); }, "element 1 is nan");
  expect_error([] { encode_compact({{"w", floats({1, INFINITY}, {2})}}, {}); }, "is inf");
  expect_error(
      [] {
        encode_compact({{"w", floats({1}, {1})}, {"w", floats({1}, {1})}}, {});
      },
      "given twice");
  expect_error([] { encode_compact({{"w", floats({1}, {1})}}, {5, 32}); }, "bits must be 4 or 8");
  expect_error([] { encode_compact({{"w", floats({1}, {1})}}, {8, 0}); }, "group size");
}

// The tiny golden GPT-2 (64 wide, 2 layers, GPT-2's 50257 vocabulary, weights drawn with std
// 0.2, so its logits are large) from a compact checkpoint, against f32 over the golden texts.
// Measured max |Δlogit| / max |logit|: 8-bit 0.040, 4-bit 0.597 (random weights quantise far worse
// than trained ones: see docs/compact.md); asserted at 0.08 and 1.0.
TEST(Compact, TinyGoldenLogitsFromACompactCheckpointStayCloseToF32) {
  const std::string dir = test::golden_dir("tiny");
  const auto meta = test::read_json(dir + "/reference.json");
  const Gpt2 f32 = Gpt2::load(dir, Device::cpu());
  for (auto [bits, bound] : {std::pair{8, 0.08f}, std::pair{4, 1.0f}}) {
    SCOPED_TRACE(bits);
    const Bytes bytes = encode_compact(f32.named_parameters(), {bits, 32});
    const CompactCheckpoint file = CompactCheckpoint::parse(bytes, "tiny.compact");
    const Gpt2 q = Gpt2::from_compact(f32.config(), file, Device::cpu());
    float worst = 0, largest = 0;
    for (const auto& ids : meta["ids"]) {
      const auto tokens = ids.get<std::vector<uint32_t>>();
      const std::vector<float> want = f32.forward(tokens).to_floats();
      worst = std::max(worst, test::max_abs_diff(want, q.forward(tokens).to_floats()));
      for (float v : want) largest = std::max(largest, std::fabs(v));
    }
    std::printf("tiny golden, %d-bit: max |logit difference| %.5f of max |logit| %.3f = %.5f\n",
                bits, worst, largest, worst / largest);
    EXPECT_LE(worst / largest, bound);
    EXPECT_GT(worst, 0.0f);  // the weights really were quantised
  }
}

// --- hostile bytes ---------------------------------------------------------------------------

/// Three tensors: a 4-bit matrix with a row tail, an f32 bias, a 4-bit matrix.
Bytes sample_file() {
  std::vector<float> a(3 * 70), b(5), c(4 * 16);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(float(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(i);
  for (size_t i = 0; i < c.size(); ++i) c[i] = std::cos(float(i));
  return encode_compact({{"a.weight", floats(a, {3, 70})},
                         {"b.weight", floats(b, {5})},
                         {"c.weight", floats(c, {4, 16})}},
                        {4, 32});
}

/// Where entry i of the documented tensor table starts, and where its fields sit.
struct EntryAt {
  size_t begin, name, dtype, rank, group, dims, offset, bytes, end;
};
EntryAt entry_at(const Bytes& f, int index) {
  size_t p = 32;
  for (int i = 0;; ++i) {
    EntryAt e{};
    e.begin = p;
    const size_t name_len = f[p] | (f[p + 1] << 8);
    e.name = p + 2;
    e.dtype = e.name + name_len;
    e.rank = e.dtype + 1;
    e.group = e.rank + 1;
    e.dims = e.group + 4;
    e.offset = e.dims + 8 * f[e.rank];
    e.bytes = e.offset + 8;
    e.end = e.bytes + 8;
    if (i == index) return e;
    p = e.end;
  }
}

uint64_t get_le(const Bytes& f, size_t pos, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | f[pos + i];
  return v;
}
void set_le(Bytes& f, size_t pos, uint64_t v, int width) {
  for (int i = 0; i < width; ++i) f[pos + i] = uint8_t(v >> (8 * i));
}

/// Rewrites the CRC so a crafted edit reaches the structural checks behind it.
void fix_crc(Bytes& f) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 16; i < f.size(); ++i) {
    c ^= f[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
  }
  set_le(f, 12, c ^ 0xFFFFFFFFu, 4);
}

void expect_parse_error(const Bytes& f, const std::string& needle) {
  expect_error([&] { CompactCheckpoint::parse(f, "bad.compact"); }, needle);
}

TEST(CompactHostile, TruncationAtEverySectionBoundaryIsAClearError) {
  const Bytes f = sample_file();
  ASSERT_NO_THROW(CompactCheckpoint::parse(f, "ok"));
  std::vector<size_t> cuts = {0, 1, 8, 12, 16, 24, 28, 31};
  for (int i = 0; i < 3; ++i) {
    const EntryAt e = entry_at(f, i);
    const uint64_t off = get_le(f, e.offset, 8);
    for (size_t c : {e.begin, e.name, e.dtype, e.rank, e.group, e.dims, e.offset, e.bytes, e.end,
                     size_t(off), size_t(off + get_le(f, e.bytes, 8) - 1)})
      cuts.push_back(c);
  }
  cuts.push_back(f.size() - 1);
  for (size_t cut : cuts) {
    SCOPED_TRACE(cut);
    const Bytes t(f.begin(), f.begin() + cut);
    expect_parse_error(t, cut < 32 ? "too short" : "file truncated?");
  }
}

TEST(CompactHostile, BadMagicVersionAndChecksumAreClearErrors) {
  Bytes f = sample_file();
  f[0] = 'X';
  expect_parse_error(f, "bad magic");
  f = sample_file();
  set_le(f, 8, 2, 4);
  expect_parse_error(f, "compact version 2 is not supported");
  f = sample_file();
  f.back() ^= 0x40;
  expect_parse_error(f, "checksum mismatch");
}

TEST(CompactHostile, LyingTablesAreClearErrorsEvenWithAValidChecksum) {
  const Bytes good = sample_file();
  const EntryAt a = entry_at(good, 0), b = entry_at(good, 1), c = entry_at(good, 2);
  auto crafted = [&](auto edit, const std::string& needle) {
    Bytes f = good;
    edit(f);
    fix_crc(f);
    SCOPED_TRACE(needle);
    expect_parse_error(f, needle);
  };
  crafted([&](Bytes& f) { set_le(f, c.offset, f.size() - 10, 8); }, "outside the data section");
  crafted([&](Bytes& f) { set_le(f, c.offset, ~0ull - 3, 8); }, "outside the data section");
  crafted([&](Bytes& f) { set_le(f, a.dims, 4, 8); }, "needs");  // shape product ≠ byte count
  crafted([&](Bytes& f) { set_le(f, a.dims, ~0ull >> 2, 8); }, "overflows");

  crafted([&](Bytes& f) { f[c.name] = 'a'; }, "appears twice");
  crafted([&](Bytes& f) { set_le(f, 24, 0xFFFFFFFFu, 4); }, "cannot fit");
  crafted([&](Bytes& f) { set_le(f, 28, 0xFFFFFFF0u, 4); }, "runs past the end");
  crafted([&](Bytes& f) { set_le(f, 24, 2, 4); }, "entries end at byte");
  crafted([&](Bytes& f) { f[a.dtype] = 9; }, "unknown dtype code 9");
  crafted([&](Bytes& f) { f[b.rank] = 200; }, "rank 200 exceeds");
  crafted([&](Bytes& f) { set_le(f, a.group, 0, 4); }, "group size 0");
  crafted([&](Bytes& f) { set_le(f, b.group, 32, 4); }, "an f32 tensor has group size 32");
  crafted([&](Bytes& f) { set_le(f, a.begin, 0, 2); }, "empty name");
  crafted([&](Bytes& f) { set_le(f, c.offset, get_le(f, a.offset, 8), 8); }, "overlaps");
  // Sizes whose product overflows beside a zero (fuzz_compact found [0, 97, 1153156986523615234]:
  // the tensor is empty, but its strides would multiply the other two).
  Bytes cube = encode_compact({{"t", floats(std::vector<float>(24, 1.0f), {2, 3, 4})}}, {4, 32});
  const EntryAt t = entry_at(cube, 0);
  set_le(cube, t.dims, 0, 8);
  set_le(cube, t.dims + 8, 97, 8);
  set_le(cube, t.dims + 16, 1153156986523615234ull, 8);
  fix_crc(cube);
  expect_parse_error(cube, "overflows");
  // A scale that is not a finite non-negative number fails when the tensor is decoded.
  Bytes f = good;
  set_le(f, get_le(f, a.offset, 8), 0x7FC00000u, 4);
  fix_crc(f);
  const CompactCheckpoint ck = CompactCheckpoint::parse(f, "nan.compact");
  expect_error([&] { ck.decode("a.weight"); }, "row 0 group 0 has scale nan");
}

TEST(CompactHostile, SeededRandomFlipsAndTruncationsNeverCrash) {
  const Bytes good = sample_file();
  std::mt19937_64 rng(20261202);
  int rejected = 0, accepted = 0;
  for (int iter = 0; iter < 400; ++iter) {
    Bytes f = good;
    const int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) f[rng() % f.size()] ^= uint8_t(1 + rng() % 255);
    if (iter % 4 == 3) f.resize(rng() % f.size());
    // Half the runs fix the checksum up, so the structural checks see the damage too.
    const bool fixed = iter % 2 == 0 && f.size() >= 32;
    if (fixed) fix_crc(f);
    try {
      const CompactCheckpoint ck = CompactCheckpoint::parse(f, "fuzz");
      for (const std::string& name : ck.names()) ck.decode(name);
      ++accepted;
      EXPECT_TRUE(fixed) << "iteration " << iter << ": damage passed the checksum";
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 200);
  std::printf("random damage: %d rejected, %d decoded (checksum fixed up, weights changed)\n",
              rejected, accepted);
}

// --- format detection and the loaders --------------------------------------------------------

void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

TEST(CompactFormat, LoadersTellTheFormatByItsLeadingBytesNotItsName) {
  const TempDir tmp;
  const std::string golden = test::golden_dir("char");
  const Gpt2 f32 = Gpt2::load(golden, Device::cpu());
  fs::copy_file(golden + "/config.json", tmp.file("config.json"));
  // A compact checkpoint under the safetensors name, and alone under its own name.
  save_compact(tmp.file("model.safetensors"), f32.named_parameters(), {8, 32});
  EXPECT_EQ(detect_checkpoint_format(tmp.file("model.safetensors")), CheckpointFormat::Compact);
  EXPECT_EQ(detect_checkpoint_format(golden + "/model.safetensors"), CheckpointFormat::Safetensors);
  const std::vector<uint32_t> ids = {1, 2, 3, 4, 5};
  const auto want = f32.forward(ids).to_floats();
  EXPECT_LE(test::max_abs_diff(Gpt2::load(tmp.str(), Device::cpu()).forward(ids).to_floats(), want),
            0.2f);  // measured 0.085 at 8 bits
  fs::rename(tmp.file("model.safetensors"), tmp.file("model.compact"));
  EXPECT_EQ(Gpt2::checkpoint_path(tmp.str()), tmp.file("model.compact"));
  EXPECT_LE(test::max_abs_diff(Gpt2::load(tmp.str(), Device::cpu()).forward(ids).to_floats(), want),
            0.2f);
  write_bytes(tmp.file("model.compact"), {'h', 'e', 'l', 'l', 'o'});
  expect_error([&] { Gpt2::load(tmp.str(), Device::cpu()); },
               "neither a safetensors file (an 8-byte header length, then '{') nor a compact");
  write_bytes(tmp.file("model.compact"), {});
  expect_error([&] { Gpt2::load(tmp.str(), Device::cpu()); }, "(none: empty file)");
}

// --- forge convert, the real binary ----------------------------------------------------------

using test::CliRun;
using test::forge_cli;
using test::json_of;

TEST(CompactCli, SafetensorsToCompactToSafetensorsKeepsNamesShapesAndTheBound) {
  const TempDir tmp;
  const std::string src = test::golden_dir("tiny") + "/model.safetensors";
  const auto to_compact =
      json_of(forge_cli("convert --input " + src + " --output " + tmp.file("m.compact") +
                        " --to compact --bits 4 --group-size 32 --format json"));
  EXPECT_EQ(to_compact["input"]["format"], "safetensors");
  EXPECT_EQ(to_compact["output"]["format"], "compact");
  EXPECT_GT(to_compact["ratio"].get<double>(), 5.5);  // 32 bits → 5 bits a weight, f32 biases
  bool saw_wte = false;
  for (const auto& k : to_compact["kinds"]) {
    if (k["kind"] == "wte.weight") {
      saw_wte = true;
      EXPECT_EQ(k["stored"], "q4");
      EXPECT_GT(k["max_abs_error"].get<double>(), 0.0);
    }
    if (k["stored"] == "f32") {
      EXPECT_EQ(k["max_abs_error"].get<double>(), 0.0) << k.dump();
    }
  }
  EXPECT_TRUE(saw_wte) << to_compact.dump();

  const auto back =
      json_of(forge_cli("convert --input " + tmp.file("m.compact") + " --output " +
                        tmp.file("m.safetensors") + " --to safetensors --format json"));
  for (const auto& k : back["kinds"]) EXPECT_EQ(k["max_abs_error"].get<double>(), 0.0);

  const SafetensorsFile a = SafetensorsFile::open(src);
  const SafetensorsFile b = SafetensorsFile::open(tmp.file("m.safetensors"));
  ASSERT_EQ(a.names(), b.names());
  for (const std::string& name : a.names()) {
    ASSERT_EQ(a.entry(name).shape, b.entry(name).shape) << name;
    const Shape& s = a.entry(name).shape;
    const auto x = a.read(name, Device::cpu()).to_floats();
    const auto y = b.read(name, Device::cpu()).to_floats();
    if (s.rank() >= 2) {
      expect_within_half_a_scale(x, y, s[-1], 32, 4);
    } else {
      EXPECT_EQ(x, y) << name;
    }
  }
}

TEST(CompactCli, AModelDirectoryWithOnlyACompactCheckpointServesEveryCommand) {
  const TempDir tmp;
  const std::string golden = test::golden_dir("char");
  for (const char* f : {"config.json", "vocab.json"}) fs::copy_file(golden + "/" + f, tmp.file(f));
  ASSERT_EQ(forge_cli("convert --input " + golden + "/model.safetensors --output " +
                      tmp.file("model.compact") + " --to compact --bits 8")
                .status,
            0);
  const std::string model = " --backend cpu --model " + tmp.str();
  const auto info = json_of(forge_cli("info --format json" + model));
  EXPECT_EQ(info["model"]["format"], "compact");
  EXPECT_EQ(info["model"]["size_bytes"], fs::file_size(tmp.file("model.compact")));
  const auto tok = json_of(forge_cli("tokenize --format json --text 'ROMEO:'" + model));
  EXPECT_EQ(tok["ids"], (std::vector<uint32_t>{30, 27, 25, 17, 27, 10}));
  const auto gen = json_of(
      forge_cli("generate --format json --prompt 'ROMEO:' --greedy --max-tokens 8" + model));
  EXPECT_FALSE(gen["ids"].empty());
  const std::string text = " --format json --text 'ROMEO: what light through yonder window'";
  const double q = json_of(forge_cli("score" + text + model))["mean_nll"].get<double>();
  const double f =
      json_of(forge_cli("score" + text + " --backend cpu --model " + golden))["mean_nll"]
          .get<double>();
  EXPECT_NEAR(q, f, 0.02);
}

TEST(CompactCli, ConvertRefusesBadInputClearly) {
  const TempDir tmp;
  write_bytes(tmp.file("junk"), {'{', '}'});
  CliRun r = forge_cli("convert --input " + tmp.file("junk") + " --output " + tmp.file("o") +
                       " --to compact");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("neither a safetensors file"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(tmp.file("o")));
  r = forge_cli("convert --input " + tmp.file("junk") + " --output " + tmp.file("junk") +
                " --to compact");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("are the same file"), std::string::npos) << r.out;
}

TEST(CompactCli, ConvertRefusesEverySpellingOfItsInputAsOutputAndLeavesItIntact) {
  const TempDir tmp;
  const std::string golden = test::golden_dir("char") + "/model.safetensors";
  fs::create_directories(tmp.file("d"));
  fs::copy_file(golden, tmp.file("d/model.safetensors"));
  fs::create_hard_link(tmp.file("d/model.safetensors"), tmp.file("hard.safetensors"));
  fs::create_symlink(tmp.file("d"), tmp.file("link"));
  for (const std::string& output :
       {tmp.file("d/./model.safetensors"), tmp.file("d/../d/model.safetensors"),
        tmp.file("link/model.safetensors"), tmp.file("hard.safetensors")}) {
    const CliRun r = forge_cli("convert --input " + tmp.file("d/model.safetensors") + " --output " +
                               output + " --to compact");
    EXPECT_EQ(r.status, 1) << output;
    EXPECT_NE(r.out.find("are the same file"), std::string::npos) << output << ": " << r.out;
  }
  EXPECT_TRUE(read_regular_file(golden) == read_regular_file(tmp.file("d/model.safetensors")));
}

}  // namespace
}  // namespace forge
