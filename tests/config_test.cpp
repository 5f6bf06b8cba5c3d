// Gpt2Config: the golden HF configs, the n_positions/n_ctx synonyms, and configs that are
// malformed, mistyped or describe a model Forge does not implement.
#include "forge/models/gpt2/config.h"

#include <gtest/gtest.h>

#include "forge/core/error.h"
#include "test_support.h"

namespace forge {
namespace {

using test::expect_error;

/// A minimal valid config with `extra` spliced in (later keys win in nlohmann's parser, but
/// the cases below only add keys the base lacks).
std::string config_with(const std::string& extra) {
  return R"({"n_layer": 2, "n_head": 2, "n_embd": 8, "vocab_size": 16)" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

TEST(Gpt2Config, GoldenTinyAndCharConfigsParseToTheirHyperParameters) {
  const Gpt2Config tiny = Gpt2Config::from_json_file(test::golden_dir("tiny") + "/config.json");
  EXPECT_EQ(tiny.n_layer, 2);
  EXPECT_EQ(tiny.n_head, 4);
  EXPECT_EQ(tiny.n_embd, 64);
  EXPECT_EQ(tiny.head_dim(), 16);
  EXPECT_EQ(tiny.n_ctx, 128);
  EXPECT_EQ(tiny.vocab_size, 50257);
  EXPECT_EQ(tiny.layer_norm_epsilon, 1e-5f);
  EXPECT_EQ(tiny.eos_token_id, 50256);

  const Gpt2Config chr = Gpt2Config::from_json_file(test::golden_dir("char") + "/config.json");
  EXPECT_EQ(chr.n_head, 2);
  EXPECT_EQ(chr.n_embd, 32);
  EXPECT_EQ(chr.n_ctx, 64);
  EXPECT_EQ(chr.vocab_size, 65);
  EXPECT_EQ(chr.eos_token_id, 64);
}

TEST(Gpt2Config, EitherNPositionsOrNCtxAloneSetsTheContext) {
  EXPECT_EQ(Gpt2Config::from_json(config_with(R"("n_ctx": 32)")).n_ctx, 32);
  EXPECT_EQ(Gpt2Config::from_json(config_with(R"("n_positions": 48)")).n_ctx, 48);
  EXPECT_EQ(Gpt2Config::from_json(config_with(R"("n_positions": 40, "n_ctx": 40)")).n_ctx, 40);
}

TEST(Gpt2Config, AbsentFieldsTakeHfDefaults) {
  const Gpt2Config c = Gpt2Config::from_json("{}");
  EXPECT_EQ(c.n_layer, 12);
  EXPECT_EQ(c.n_head, 12);
  EXPECT_EQ(c.n_embd, 768);
  EXPECT_EQ(c.n_ctx, 1024);
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.layer_norm_epsilon, 1e-5f);
  EXPECT_EQ(c.eos_token_id, -1);
  EXPECT_EQ(Gpt2Config::from_json(config_with(R"("eos_token_id": null)")).eos_token_id, -1);
}

TEST(Gpt2Config, ToJsonWritesHfKeysAndReadsBackIdentically) {
  Gpt2Config c = Gpt2Config::from_json_file(test::golden_dir("tiny") + "/config.json");
  c.layer_norm_epsilon = 1e-6f;
  const std::string text = c.to_json();
  for (const char* key : {"\"model_type\": \"gpt2\"", "\"n_positions\": 128", "\"n_ctx\": 128",
                          "\"activation_function\": \"gelu_new\"", "\"layer_norm_epsilon\": 1e-06",
                          "\"vocab_size\": 50257", "\"eos_token_id\": 50256"}) {
    EXPECT_NE(text.find(key), std::string::npos) << key << " missing from\n" << text;
  }
  const Gpt2Config back = Gpt2Config::from_json(text);
  EXPECT_EQ(back.n_layer, c.n_layer);
  EXPECT_EQ(back.n_head, c.n_head);
  EXPECT_EQ(back.n_embd, c.n_embd);
  EXPECT_EQ(back.n_ctx, c.n_ctx);
  EXPECT_EQ(back.vocab_size, c.vocab_size);
  EXPECT_EQ(back.layer_norm_epsilon, c.layer_norm_epsilon);
  EXPECT_EQ(back.eos_token_id, c.eos_token_id);
  c.eos_token_id = -1;
  EXPECT_EQ(c.to_json().find("eos_token_id"), std::string::npos);
}

TEST(Gpt2Config, ConflictingNPositionsAndNCtxIsAnError) {
  expect_error(
      [] { Gpt2Config::from_json(config_with(R"("n_positions": 64, "n_ctx": 32)"), "cfg"); },
      "cfg: n_positions 64 and n_ctx 32 disagree");
}

TEST(Gpt2Config, MalformedJsonNamesTheOrigin) {
  expect_error([] { Gpt2Config::from_json("{\"n_layer\": 2,", "bad.json"); },
               "bad.json: not valid JSON");
  expect_error([] { Gpt2Config::from_json("", "empty.json"); }, "empty.json: not valid JSON");
  expect_error([] { Gpt2Config::from_json("[2, 4]", "list.json"); },
               "list.json: must be a JSON object, got array");
  expect_error([] { Gpt2Config::from_json_file("/nonexistent/forge/config.json"); },
               "cannot open GPT-2 config /nonexistent/forge/config.json");
}

TEST(Gpt2Config, WrongJsonTypesNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("n_positions": "1024")", R"('n_positions' must be an integer, got "1024")"},
      {R"("n_ctx": 64.5)", "'n_ctx' must be an integer, got 64.5"},
      {R"("eos_token_id": [1])", "'eos_token_id' must be an integer, got array"},
      {R"("layer_norm_epsilon": "1e-5")", R"('layer_norm_epsilon' must be a number, got "1e-5")"},
      {R"("activation_function": 1)", "'activation_function' must be a string"},
      {R"("scale_attn_weights": 1)", "'scale_attn_weights' must be a boolean"},
      {R"("n_positions": 18446744073709551615)", "'n_positions' = 18446744073709551615 is out"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.first);
    expect_error([&] { Gpt2Config::from_json(config_with(c.first), "cfg.json"); },
                 "cfg.json: " + c.second);
  }
  expect_error([] { Gpt2Config::from_json(R"({"n_layer": true})", "cfg.json"); },
               "cfg.json: 'n_layer' must be an integer, got true");
}

TEST(Gpt2Config, DeeplyNestedOrHugeValuesFailWithAShortMessage) {
  const std::string deep =
      "{\"n_layer\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  expect_error([&] { Gpt2Config::from_json(deep, "deep.json"); },
               "deep.json: JSON nested deeper than 64 levels");
  const std::string huge = R"({"model_type": ")" + std::string(1 << 20, 'x') + "\"}";
  try {
    Gpt2Config::from_json(huge, "huge.json");
    ADD_FAILURE() << "huge model_type accepted";
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u);
    EXPECT_NE(std::string(e.what()).find("huge.json: model_type \"xxxx"), std::string::npos);
  }
}

TEST(Gpt2Config, RepeatedKeysAndSizesThatOverflowAreRefused) {
  expect_error([&] { Gpt2Config::from_json(R"({"n_layer": 2, "n_layer": 4})", "twice.json"); },
               "twice.json: key \"n_layer\" appears twice in one object");
  // 2^62: 4 · n_embd and n_embd² overflow int64.
  expect_error(
      [&] {
        Gpt2Config::from_json(R"({"n_embd": 4611686018427387904, "n_head": 1, "n_inner": 0})",
                              "big.json");
      },
      "big.json: n_inner 0 is not supported");
  expect_error(
      [&] { Gpt2Config::from_json(R"({"n_embd": 4611686018427387904, "n_head": 1})", "big.json"); },
      "overflows 64 bits");
  expect_error(
      [&] {
        Gpt2Config::from_json(R"({"n_layer": 1000000000000, "n_embd": 1024, "n_head": 16})",
                              "deep.json");
      },
      "overflows 64 bits");
}

TEST(Gpt2Config, ActivationOtherThanGeluNewIsRefusedNamingTheTanhGelu) {
  expect_error([] { Gpt2Config::from_json(config_with(R"("activation_function": "gelu")"), "c"); },
               "c: activation_function 'gelu' is not supported: Forge implements GPT-2's "
               "tanh-approximated GELU, 'gelu_new', only");
  EXPECT_NO_THROW(Gpt2Config::from_json(config_with(R"("activation_function": "gelu_new")")));
}

TEST(Gpt2Config, OptionsThatChangeTheModelAreRefused) {
  expect_error([] { Gpt2Config::from_json(config_with(R"("model_type": "llama")"), "c"); },
               "c: model_type \"llama\" is not \"gpt2\"");
  expect_error([] { Gpt2Config::from_json(config_with(R"("n_inner": 20)"), "c"); },
               "c: n_inner 20 is not supported: Forge's MLP is 4 * n_embd wide (n_embd 8)");
  expect_error(
      [] { Gpt2Config::from_json(config_with(R"("scale_attn_by_inverse_layer_idx": true)"), "c"); },
      "c: scale_attn_by_inverse_layer_idx = true is not supported");
  EXPECT_NO_THROW(Gpt2Config::from_json(config_with(R"("n_inner": null)")));
  EXPECT_NO_THROW(Gpt2Config::from_json(config_with(R"("n_inner": 32)")));
}

TEST(Gpt2Config, NEmbdNotDivisibleByNHeadIsRefused) {
  expect_error([] { Gpt2Config::from_json(R"({"n_embd": 10, "n_head": 4})", "c.json"); },
               "c.json: n_embd 10 is not divisible by n_head 4");
  Gpt2Config c;
  c.n_head = 5;
  expect_error([&] { c.validate(); }, "n_embd 768 is not divisible by n_head 5");
}

TEST(Gpt2Config, NonPositiveOrOutOfRangeFieldsAreRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"n_layer": 0})", "n_layer must be positive, got 0"},
      {R"({"n_head": -2})", "n_head must be positive, got -2"},
      {R"({"n_embd": 0})", "n_embd must be positive, got 0"},
      {R"({"n_positions": 0})", "n_positions (n_ctx) must be positive, got 0"},
      {R"({"vocab_size": -1})", "vocab_size must be positive, got -1"},
      {R"({"vocab_size": 8589934592})", "vocab_size 8589934592 does not fit u32"},
      {R"({"layer_norm_epsilon": 0})", "layer_norm_epsilon 0 must be positive"},
      {R"({"layer_norm_epsilon": 1e300})",
       "layer_norm_epsilon 1e+300 must be positive and fit f32"},
      {R"({"eos_token_id": 50257})", "eos_token_id 50257 is outside the vocabulary of 50257"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.first);
    expect_error([&] { Gpt2Config::from_json(c.first, "c.json"); }, "c.json: " + c.second);
  }
}

}  // namespace
}  // namespace forge
