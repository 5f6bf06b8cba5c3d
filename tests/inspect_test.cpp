// forge::inspect_model describes a model from its config and checkpoint header, and refuses
// exactly what Gpt2::load refuses, with the loader's message: the scanner of forge top relies
// on both.
#include "forge/models/gpt2/inspect.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "forge/models/gpt2/gpt2.h"
#include "forge/serialization/compact.h"
#include "test_support.h"

namespace forge {
namespace {
namespace fs = std::filesystem;

Gpt2Config tiny() {
  Gpt2Config c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.n_ctx = 32;
  c.vocab_size = 11;
  return c;
}

void write(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

/// The message Gpt2::load fails with for `dir`, or "" when it loads.
std::string load_error(const std::string& dir) {
  try {
    Gpt2::load(dir, Device::cpu());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class InspectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("forge_inspect_test_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    const Gpt2 model = Gpt2::init_random(tiny(), 7, Device::cpu());
    model.save((root_ / "good").string());
    write(root_ / "good/vocab.json", R"({"a":0,"b":1,"c":2})");
    fs::create_directories(root_ / "compact4");
    fs::copy_file(root_ / "good/config.json", root_ / "compact4/config.json");
    save_compact((root_ / "compact4/model.compact").string(), model.named_parameters(), {4, 32});
    parameters_ = model.num_parameters();
  }
  void TearDown() override { fs::remove_all(root_); }

  /// A copy of good/ with its checkpoint replaced by `bytes`.
  std::string bad_copy(const std::string& name, const std::string& file, const std::string& bytes) {
    fs::create_directories(root_ / name);
    fs::copy_file(root_ / "good/config.json", root_ / name / "config.json");
    write(root_ / name / file, bytes);
    return (root_ / name).string();
  }

  fs::path root_;
  int64_t parameters_ = 0;
};

TEST_F(InspectTest, DescribesSafetensorsAndCompactWithoutLoading) {
  const ModelSummary s = inspect_model((root_ / "good").string());
  EXPECT_EQ(s.parameters, parameters_);
  EXPECT_EQ(s.config.n_layer, 2);
  EXPECT_EQ(s.config.n_embd, 16);
  EXPECT_EQ(s.container, "safetensors");
  EXPECT_EQ(s.precision, "f32");
  EXPECT_EQ(s.tokenizer, "char");
  EXPECT_EQ(s.size_bytes, fs::file_size(root_ / "good/model.safetensors"));
  ASSERT_EQ(s.tensors.size(), 2u + 12u * 2u + 2u);
  bool found = false;
  for (const TensorSummary& t : s.tensors) {
    if (t.name != "transformer.h.0.mlp.c_fc.weight") continue;
    found = true;
    EXPECT_EQ(t.shape, Shape({16, 64}));
    EXPECT_EQ(t.dtype, "F32");
    EXPECT_EQ(t.bytes, 16u * 64u * 4u);
  }
  EXPECT_TRUE(found);

  const ModelSummary q = inspect_model((root_ / "compact4").string());
  EXPECT_EQ(q.parameters, parameters_);
  EXPECT_EQ(q.container, "compact");
  EXPECT_EQ(q.precision, "4-bit");
  EXPECT_EQ(q.tokenizer, "none");
}

TEST_F(InspectTest, RefusesWhatTheLoaderRefusesWithItsMessage) {
  const std::string good = read_regular_file(root_ / "good/model.safetensors");
  std::string flipped = read_regular_file(root_ / "compact4/model.compact");
  flipped[flipped.size() / 2] ^= 0x20;
  Gpt2Config deeper = tiny();
  deeper.n_layer = 3;
  std::vector<std::string> dirs = {
      bad_copy("garbage", "model.safetensors", "this is not a checkpoint at all"),
      bad_copy("truncated", "model.safetensors", good.substr(0, good.size() / 2)),
      bad_copy("short_header", "model.safetensors", good.substr(0, 12)),
      bad_copy("flipped", "model.compact", flipped),
      bad_copy("no_checkpoint", "README.md", "a model card and nothing else"),
  };
  fs::create_directories(root_ / "deeper");
  fs::copy_file(root_ / "good/model.safetensors", root_ / "deeper/model.safetensors");
  write(root_ / "deeper/config.json", deeper.to_json());
  dirs.push_back((root_ / "deeper").string());
  fs::create_directories(root_ / "bad_config");
  fs::copy_file(root_ / "good/model.safetensors", root_ / "bad_config/model.safetensors");
  write(root_ / "bad_config/config.json", "{\"n_layer\": ");
  dirs.push_back((root_ / "bad_config").string());

  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    EXPECT_TRUE(is_model_directory(dir));
    const std::string expected = load_error(dir);
    ASSERT_FALSE(expected.empty()) << "the loader accepts it";
    try {
      inspect_model(dir);
      ADD_FAILURE() << "inspect_model accepted it";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), expected);
    }
  }
}

TEST_F(InspectTest, AnOrdinaryDirectoryIsNotAModel) {
  fs::create_directories(root_ / "notes");
  write(root_ / "notes/todo.txt", "buy milk");
  EXPECT_FALSE(is_model_directory((root_ / "notes").string()));
  test::expect_error([&] { inspect_model((root_ / "missing").string()); }, "does not exist");
}

}  // namespace
}  // namespace forge
