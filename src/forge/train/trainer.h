// Training GPT-2 from a token stream: random windows, AdamW with warmup + cosine decay and
// gradient clipping, gradient accumulation, periodic validation, atomic checkpoints, and a
// resume that continues bit for bit. Everything random is a pure function of (seed, step), so
// a checkpoint needs only the parameters, the optimiser state and the step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "forge/models/gpt2/gpt2.h"
#include "forge/optim/adamw.h"
#include "forge/train/loss_plot.h"

namespace forge::train {
class DataParallel;
}

namespace forge::train {

struct TrainConfig {
  // The model.
  int64_t n_layer = 4, n_head = 4, n_embd = 256, n_ctx = 128;
  float dropout = 0.0f;
  // The optimiser and its schedule: linear warmup to lr, cosine decay to min_lr at `steps`.
  int64_t steps = 1000;
  int64_t warmup_steps = 100;
  float lr = 1e-3f, min_lr = 1e-4f;
  float weight_decay = 0.1f, beta1 = 0.9f, beta2 = 0.95f, grad_clip = 1.0f;
  // The data: `batch` windows of n_ctx tokens per micro-batch, `accumulation` micro-batches per
  // step; validation over eval_batches batches every eval_interval steps.
  int64_t batch = 16, accumulation = 1;
  int64_t eval_interval = 100, eval_batches = 8, log_interval = 10;
  double val_fraction = 0.1;
  uint64_t seed = 1337;
  // Parameters that get no update (frozen_parameters() says how names match).
  std::vector<std::string> freeze;

  nlohmann::json to_json() const;
  /// Fields absent from `j` keep their values in `base`; unknown keys are an error naming them.
  /// Every field is a number except freeze, an array of strings.
  static TrainConfig from_json(const nlohmann::json& j, TrainConfig base);
  /// Throws forge::Error naming the first field out of range.
  void validate() const;
  /// The learning rate at step s (0-based).
  float lr_at(int64_t step) const;
};

/// Which of model.parameters() `names` freeze: a name selects the parameters whose HF name,
/// without the "transformer." prefix, is the name or starts with it and a dot ("wte" is
/// wte.weight, "h.0" all of block 0). Throws forge::Error naming a name that selects nothing.
std::vector<bool> frozen_parameters(const Gpt2& model, const std::vector<std::string>& names);

/// What a finished (or paused) run reports.
struct TrainSummary {
  int64_t step = 0;
  double last_train_loss = 0, best_val_loss = 0;
  double tokens_per_s = 0, wall_s = 0;
};

/// A progress report after each logged step.
struct Progress {
  int64_t step, steps;
  double train_loss, lr, tokens_per_s, eta_s;
  double val_loss;  // NaN when this step did not evaluate
};

/// Trains a model on `tokens` (split into train and validation by val_fraction, validation
/// last) and writes into `out_dir`:
///   config.json, model.safetensors   the best model by validation loss (HF layout)
/// Frozen parameters (config.freeze) get no update: their gradients are dropped before the
/// grad-norm clip and AdamW neither moves nor decays them.
///   train_log.csv, loss.png/.svg     step, lr, losses, throughput; the curve (loss_plot.h)
///   checkpoint/                      the latest state: model, optimizer.safetensors
///                                    (adam.m.*, adam.v.*, step), train_state.json
/// Files are replaced atomically (write, fsync, rename), except that train_log.csv grows by one
/// appended row at a time; nothing is written before run(), so a
/// Trainer that constructs has validated every setting. The caller writes the vocabulary.
class Trainer {
 public:
  /// A fresh run from a random initialisation (seeded by config.seed). With `dp`, this process
  /// is one rank of a data-parallel run (distributed.h); only rank 0 writes files.
  Trainer(TrainConfig config, int64_t vocab_size, std::vector<uint32_t> tokens, std::string out_dir,
          const Device& device, DataParallel* dp = nullptr);
  /// A fine-tune: starts from `model`'s weights with a new optimizer state at step 0. The
  /// config's n_layer, n_head, n_embd and n_ctx must be the model's.
  static std::unique_ptr<Trainer> from_model(TrainConfig config, Gpt2 model,
                                             std::vector<uint32_t> tokens, std::string out_dir,
                                             DataParallel* dp = nullptr);
  /// Continues the run whose checkpoint is in out_dir/checkpoint; `steps` > 0 replaces the
  /// total step count (the schedule then stretches to it).
  static std::unique_ptr<Trainer> resume(std::vector<uint32_t> tokens, std::string out_dir,
                                         const Device& device, int64_t steps = 0,
                                         DataParallel* dp = nullptr);

  /// Runs until config.steps, or until `stop_after` steps are done (> 0), then checkpoints.
  TrainSummary run(const std::function<void(const Progress&)>& on_progress = {},
                   int64_t stop_after = 0);

  const Gpt2& model() const { return *model_; }
  const TrainConfig& config() const { return config_; }
  int64_t step() const { return step_; }
  /// How many ranks trained the run up to the checkpoint it resumed from (1 for a new run).
  int64_t checkpoint_ranks() const { return checkpoint_ranks_; }
  /// Mean validation loss over the fixed validation windows.
  double validation_loss() const;

 private:
  Trainer(TrainConfig config, std::vector<uint32_t> tokens, std::string out_dir,
          std::unique_ptr<Gpt2> model, DataParallel* dp);
  /// Rank 0 of a data-parallel run, or a run of one process: the one that writes files.
  bool writes_files() const;
  /// Writes the log's header (a new run; rank 0 only). run() calls it, so that constructing a
  /// Trainer (which validates everything) writes nothing.
  void start_log();
  /// AdamW over the parameters config.freeze leaves trainable.
  void make_optimizer();
  /// Windows of n_ctx + 1 tokens starting at `starts`, as (inputs, targets).
  void windows(const std::vector<int64_t>& starts, std::vector<uint32_t>& inputs,
               std::vector<uint32_t>& targets) const;
  /// Reads back train_log.csv up to the resumed step and rewrites it without the later rows.
  void resume_log();
  double train_step();
  void save_checkpoint(double wall_s) const;
  void save_best() const;
  /// One row onto train_log.csv, appended (the rows before it are never rewritten).
  void append_log(int64_t step, double lr, double train_loss, double val_loss, double tok_s,
                  double wall_s);

  TrainConfig config_;
  std::vector<uint32_t> tokens_;
  std::string tokens_digest_;  // SHA-256 of tokens_, saved so a resume can tell they changed
  int64_t train_end_ = 0;      // tokens [0, train_end_) train, the rest validate
  std::string out_dir_;
  std::unique_ptr<Gpt2> model_;
  std::unique_ptr<optim::AdamW> adamw_;
  std::vector<size_t> trainable_;  // indices into model_->parameters() that AdamW updates
  int64_t step_ = 0;
  double best_val_ = 0;
  double wall_before_ = 0;  // training time of earlier sessions of this run
  std::vector<LossPoint> train_curve_, val_curve_;
  DataParallel* dp_ = nullptr;
  int64_t checkpoint_ranks_ = 1;
  bool new_log_ = false;  // a new run: run() starts train_log.csv
};

}  // namespace forge::train
