// forge score: per-token negative log-likelihood and perplexity of a text, windowed past the
// context (score.h).
#include <cmath>
#include <cstdio>
#include <optional>

#include "cli.h"
#include "forge/core/error.h"
#include "forge/models/gpt2/score.h"
#include "forge/serialization/file_io.h"
#include "progress.h"

namespace forge::cli {
namespace {

struct ScoreArgs {
  CommonOptions common;
  std::string model_dir, text, file, ids;
  std::optional<int64_t> stride;  // unset: half the context
};

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
    ids = loaded.tokenizer->encode(args.text.empty() ? read_regular_file(args.file) : args.text);
  }
  SequenceScores scores;
  {
    ProgressLine progress("scoring", args.common.json());
    ScoreOptions options;
    options.stride = args.stride;
    options.on_progress = [&](int64_t done, int64_t total) {
      progress.update(done, total, "tokens");
    };
    scores = score_sequence(*loaded.model, ids, options);
  }
  const std::vector<double>& nll = scores.nll;
  double total = 0.0;
  for (double v : nll) total += v;
  const double mean = total / static_cast<double>(nll.size());
  if (args.common.json()) {
    print_json({{"ids", ids},
                {"stride", scores.stride},
                {"windows", scores.windows},
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
  cmd->add_option("--stride", args->stride,
                  "new tokens per window past the context (default half the context: each token "
                  "sees at least n_ctx - stride of history)");
  cmd->callback([args] { run_score(*args); });
}

}  // namespace forge::cli
