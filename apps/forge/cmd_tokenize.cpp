// forge tokenize: text → token ids (and each token's text).
#include <cstdio>

#include "cli.h"
#include "forge/core/error.h"
#include "forge/serialization/file_io.h"

namespace forge::cli {
namespace {

struct TokenizeArgs {
  CommonOptions common;
  std::string model_dir, text, file;
};

// One token's text as a JSON string (invalid UTF-8 pieces of a multi-byte character are replaced).
std::string json_string(const std::string& piece) {
  return nlohmann::json(piece).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Streams the JSON object (keys in the order print_json would sort them) so that memory stays
// the ids alone: a nlohmann array of 200 M pieces would need tens of gigabytes.
void print_tokens_json(const Tokenizer& tokenizer, const std::vector<uint32_t>& ids) {
  std::printf("{\"count\":%zu,\"ids\":[", ids.size());
  for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? ",%u" : "%u", ids[i]);
  std::printf("],\"tokenizer\":%s,\"tokens\":[", json_string(tokenizer.kind()).c_str());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) std::putchar(',');
    std::fputs(json_string(tokenizer.decode(std::span(&ids[i], 1))).c_str(), stdout);
  }
  std::puts("]}");
}

void run_tokenize(const TokenizeArgs& args) {
  FORGE_CHECK(args.text.empty() != args.file.empty(), "give exactly one of --text and --file");
  check_model_found(args.model_dir);
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_directory(args.model_dir);
  const std::vector<uint32_t> ids =
      tokenizer->encode(args.text.empty() ? read_regular_file(args.file) : args.text);
  if (args.common.json()) {
    print_tokens_json(*tokenizer, ids);
    return;
  }
  for (const uint32_t& id : ids) {
    std::printf("%u\t%s\n", id, json_string(tokenizer->decode(std::span(&id, 1))).c_str());
  }
  std::fprintf(stderr, "%zu tokens (%s)\n", ids.size(), tokenizer->kind().c_str());
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("tokenize", "text to token ids with a model's tokenizer");
  add_common_options(*cmd, args->common);
  add_model_option(*cmd, args->model_dir);
  cmd->add_option("--text", args->text, "text to tokenize");
  cmd->add_option("--file", args->file, "file to tokenize");
  cmd->callback([args] { run_tokenize(*args); });
}

}  // namespace forge::cli
