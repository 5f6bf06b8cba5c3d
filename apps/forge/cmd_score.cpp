// forge score: per-token negative log-likelihood and perplexity of a text.
#include <cmath>
#include <cstdio>

#include "cli.h"
#include "forge/core/error.h"
#include "progress.h"

namespace forge::cli {
namespace {

struct ScoreArgs {
  CommonOptions common;
  std::string model_dir, text, file, ids;
};

/// NLL of each token after the first, in windows of the context length: window w predicts
/// tokens [w·(n_ctx−1)+1, …) from up to n_ctx tokens of history.
std::vector<double> token_nlls(const Gpt2& model, const std::vector<uint32_t>& ids,
                               ProgressLine& progress) {
  const size_t ctx = static_cast<size_t>(model.config().n_ctx);
  // Windows advance by ctx − 1 tokens: a context of 1 would never advance.
  FORGE_CHECK(ctx >= 2,
              "scoring predicts each token from those before it, so it needs a model context "
              "(n_positions) of at least 2; this model's is {}",
              ctx);
  std::vector<double> nll;
  for (size_t start = 0; start + 1 < ids.size(); start += ctx - 1) {
    const size_t end = std::min(ids.size(), start + ctx);
    const std::span<const uint32_t> window(ids.data() + start, end - start);
    const std::vector<float> logits = model.forward(window).to_floats();
    const size_t vocab = static_cast<size_t>(model.config().vocab_size);
    for (size_t i = 0; i + 1 < window.size(); ++i) {
      const float* row = logits.data() + i * vocab;
      double max = row[0];
      for (size_t j = 1; j < vocab; ++j) max = std::max<double>(max, row[j]);
      double sum = 0.0;
      for (size_t j = 0; j < vocab; ++j) sum += std::exp(row[j] - max);
      nll.push_back(std::log(sum) + max - row[window[i + 1]]);
    }
    progress.update(int64_t(nll.size()), int64_t(ids.size() - 1), "tokens");
  }
  return nll;
}

void run_score(const ScoreArgs& args) {
  const int given = !args.text.empty() + !args.file.empty() + !args.ids.empty();
  FORGE_CHECK(given == 1, "give exactly one of --text, --file and --ids");
  const Device device = open_device(args.common);
  const LoadedModel loaded = load_model(args.model_dir, device, args.common.json());
  std::vector<uint32_t> ids;
  if (!args.ids.empty()) {
    ids = parse_ids(args.ids);
  } else {
    FORGE_CHECK(loaded.tokenizer != nullptr, "{} has no vocab.json: use --ids", args.model_dir);
    ids = loaded.tokenizer->encode(args.text.empty() ? read_file(args.file) : args.text);
  }
  FORGE_CHECK(ids.size() >= 2, "scoring needs at least two tokens, got {}", ids.size());
  std::vector<double> nll;
  {
    ProgressLine progress("scoring", args.common.json());
    nll = token_nlls(*loaded.model, ids, progress);
  }
  double total = 0.0;
  for (double v : nll) total += v;
  const double mean = total / static_cast<double>(nll.size());
  if (args.common.json()) {
    print_json({{"ids", ids},
                {"nll", nll},
                {"mean_nll", mean},
                {"perplexity", std::exp(mean)},
                {"tokens_scored", nll.size()}});
    return;
  }
  for (size_t i = 0; i < nll.size(); ++i) {
    const std::string piece =
        loaded.tokenizer ? loaded.tokenizer->decode(std::span(&ids[i + 1], 1)) : "";
    std::printf("%6zu %8u %9.4f  %s\n", i + 1, ids[i + 1], nll[i],
                nlohmann::json(piece)
                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                    .c_str());
  }
  std::printf("mean_nll %.6f  perplexity %.4f  tokens %zu\n", mean, std::exp(mean), nll.size());
}

}  // namespace

void register_score(CLI::App& app) {
  auto args = std::make_shared<ScoreArgs>();
  CLI::App* cmd = app.add_subcommand("score", "per-token NLL, mean NLL and perplexity of a text");
  add_common_options(*cmd, args->common);
  add_model_option(*cmd, args->model_dir);
  cmd->add_option("--text", args->text, "text to score");
  cmd->add_option("--file", args->file, "file whose text to score");
  cmd->add_option("--ids", args->ids, "token ids to score: 1,2,3");
  cmd->callback([args] { run_score(*args); });
}

}  // namespace forge::cli
