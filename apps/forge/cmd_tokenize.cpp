// forge tokenize: text → token ids (and each token's text).
#include <cstdio>

#include "cli.h"
#include "forge/core/error.h"

namespace forge::cli {
namespace {

struct TokenizeArgs {
  CommonOptions common;
  std::string model_dir, text, file;
};

void run_tokenize(const TokenizeArgs& args) {
  FORGE_CHECK(args.text.empty() != args.file.empty(), "give exactly one of --text and --file");
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_directory(args.model_dir);
  const std::vector<uint32_t> ids =
      tokenizer->encode(args.text.empty() ? read_file(args.file) : args.text);
  std::vector<std::string> pieces;
  for (uint32_t id : ids) pieces.push_back(tokenizer->decode(std::span(&id, 1)));
  if (args.common.json()) {
    print_json({{"ids", ids},
                {"tokens", pieces},
                {"count", ids.size()},
                {"tokenizer", tokenizer->kind()}});
    return;
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    std::printf("%u\t%s\n", ids[i],
                nlohmann::json(pieces[i])
                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                    .c_str());
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
