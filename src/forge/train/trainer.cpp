#include "forge/train/trainer.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>
#include <type_traits>

#include "forge/core/error.h"
#include "forge/core/random.h"
#include "forge/serialization/file_io.h"
#include "forge/serialization/json_parse.h"
#include "forge/train/distributed.h"
#include "forge/train/run_dir.h"
#include "forge/train/sha256.h"

namespace forge::train {
namespace fs = std::filesystem;
namespace {

constexpr uint64_t kDropoutStream = 0xD50F'0A11'D50F'0A11ull;  // keeps dropout keys apart from data
constexpr const char* kLogHeader = "step,lr,train_loss,val_loss,tokens_per_s,elapsed_s\n";

void write_text(const std::string& path, const std::string& text) {
  AtomicFileWriter file(path);
  file.write(text.data(), text.size());
  file.commit();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// What a resume compares: the config without `steps` (which --steps may change) and the ids.
std::string config_digest(const TrainConfig& c) {
  nlohmann::json j = c.to_json();
  j.erase("steps");
  return sha256_hex(j.dump());
}

std::string tokens_digest(const std::vector<uint32_t>& tokens) {
  return sha256_hex(std::string_view(reinterpret_cast<const char*>(tokens.data()),
                                     tokens.size() * sizeof(uint32_t)));
}

Gpt2Config model_config(const TrainConfig& c, int64_t vocab_size) {
  Gpt2Config g;
  g.n_layer = c.n_layer;
  g.n_head = c.n_head;
  g.n_embd = c.n_embd;
  g.n_ctx = c.n_ctx;
  g.vocab_size = vocab_size;
  return g;
}

/// Calls f(name, field) for every field of a TrainConfig, in the order the JSON lists them:
/// the one list that to_json and from_json share.
template <class Config, class F>
void for_each_field(Config& c, F&& f) {
  f("n_layer", c.n_layer);
  f("n_head", c.n_head);
  f("n_embd", c.n_embd);
  f("n_ctx", c.n_ctx);
  f("dropout", c.dropout);
  f("steps", c.steps);
  f("warmup_steps", c.warmup_steps);
  f("lr", c.lr);
  f("min_lr", c.min_lr);
  f("weight_decay", c.weight_decay);
  f("beta1", c.beta1);
  f("beta2", c.beta2);
  f("grad_clip", c.grad_clip);
  f("batch", c.batch);
  f("accumulation", c.accumulation);
  f("eval_interval", c.eval_interval);
  f("eval_batches", c.eval_batches);
  f("log_interval", c.log_interval);
  f("val_fraction", c.val_fraction);
  f("seed", c.seed);
  f("freeze", c.freeze);
}

// Each reader checks the JSON value first, as converting an out-of-range number is undefined
// behaviour.
void read_field(std::string_view key, const nlohmann::json& value, int64_t& out) {
  FORGE_CHECK(value.is_number_integer() &&
                  (!value.is_number_unsigned() ||
                   value.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max())),
              "training config: {} must be an integer, got {}", key, value.dump());
  out = value.get<int64_t>();
}

void read_field(std::string_view key, const nlohmann::json& value, uint64_t& out) {
  FORGE_CHECK(
      value.is_number_integer() && (value.is_number_unsigned() || value.get<int64_t>() >= 0),
      "training config: {} must be an integer in [0, 2^64), got {}", key, value.dump());
  out = value.get<uint64_t>();
}

template <class T>
requires std::is_floating_point_v<T>
void read_field(std::string_view key, const nlohmann::json& value, T& out) {
  FORGE_CHECK(value.is_number() && std::isfinite(value.get<double>()) &&
                  std::fabs(value.get<double>()) <= std::numeric_limits<T>::max(),
              "training config: {} must be a finite number, got {}", key, value.dump());
  out = static_cast<T>(value.get<double>());
}

void read_field(std::string_view key, const nlohmann::json& value, std::vector<std::string>& out) {
  FORGE_CHECK(value.is_array(), "training config: {} must be an array of names", key);
  out.clear();
  for (const auto& name : value) {
    FORGE_CHECK(name.is_string(), "training config: {} must be an array of names", key);
    out.push_back(name);
  }
}

}  // namespace

nlohmann::json TrainConfig::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for_each_field(*this, [&](const char* name, const auto& field) {
    // Floats as their shortest decimal form, so 0.9f reads back as 0.9 rather than 0.899999976.
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, float>)
      j[name] = std::stod(fmt::format("{}", field));
    else
      j[name] = field;
  });
  return j;
}

TrainConfig TrainConfig::from_json(const nlohmann::json& j, TrainConfig c) {
  FORGE_CHECK(j.is_object(), "training config must be a JSON object, got {}", j.type_name());
  for (const auto& item : j.items()) {
    bool known = false;
    for_each_field(c, [&](const char* name, auto& field) {
      if (item.key() != name) return;
      read_field(item.key(), item.value(), field);
      known = true;
    });
    FORGE_CHECK(known, "training config: unknown key {}", item.key());
  }
  return c;
}

void TrainConfig::validate() const {
  FORGE_CHECK(n_layer > 0 && n_head > 0 && n_embd > 0 && n_ctx > 1,
              "training config: n_layer, n_head, n_embd must be positive and n_ctx > 1");
  FORGE_CHECK(n_embd % n_head == 0, "training config: n_embd {} does not divide into {} heads",
              n_embd, n_head);
  FORGE_CHECK(dropout >= 0.0f && dropout < 1.0f, "training config: dropout {} outside [0, 1)",
              dropout);
  FORGE_CHECK(steps > 0 && warmup_steps >= 0, "training config: steps must be positive");
  FORGE_CHECK(lr > 0 && min_lr >= 0 && min_lr <= lr,
              "training config: need 0 ≤ min_lr ≤ lr and lr > 0 (lr {}, min_lr {})", lr, min_lr);
  FORGE_CHECK(batch > 0 && accumulation > 0,
              "training config: batch and accumulation must be "
              "positive");
  FORGE_CHECK(eval_interval > 0 && eval_batches > 0 && log_interval > 0,
              "training config: eval_interval, eval_batches and log_interval must be positive");
  FORGE_CHECK(val_fraction > 0 && val_fraction < 1,
              "training config: val_fraction {} outside (0, 1)", val_fraction);
}

float TrainConfig::lr_at(int64_t s) const {
  if (s < warmup_steps) return lr * static_cast<float>(s + 1) / static_cast<float>(warmup_steps);
  const double progress =
      std::min(1.0, double(s - warmup_steps) / double(std::max<int64_t>(1, steps - warmup_steps)));
  return static_cast<float>(min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(M_PI * progress)));
}

std::vector<bool> frozen_parameters(const Gpt2& model, const std::vector<std::string>& names) {
  const std::vector<Gpt2Parameter> params = model.parameters();
  std::vector<bool> frozen(params.size(), false);
  for (const std::string& name : names) {
    bool found = false;
    for (size_t i = 0; i < params.size(); ++i) {
      std::string_view have = params[i].name;
      if (have.starts_with("transformer."))
        have.remove_prefix(std::string_view("transformer.").size());
      if (have == name ||
          (have.starts_with(name) && have.size() > name.size() && have[name.size()] == '.')) {
        frozen[i] = found = true;
      }
    }
    FORGE_CHECK(found, "--freeze: {} names no parameter (e.g. wte, wpe, h.0, h.0.attn, ln_f)",
                name);
  }
  return frozen;
}

Trainer::Trainer(TrainConfig config, std::vector<uint32_t> tokens, std::string out_dir,
                 std::unique_ptr<Gpt2> model, DataParallel* dp)
    : config_(config),
      tokens_(std::move(tokens)),
      tokens_digest_(tokens_digest(tokens_)),
      out_dir_(std::move(out_dir)),
      model_(std::move(model)),
      best_val_(std::numeric_limits<double>::infinity()),
      dp_(dp) {
  config_.validate();
  if (dp_) dp_->check_accumulation(config_.accumulation);
  const int64_t n = static_cast<int64_t>(tokens_.size());
  train_end_ = n - static_cast<int64_t>(std::llround(double(n) * config_.val_fraction));
  FORGE_CHECK(train_end_ > config_.n_ctx + 1 && n - train_end_ > config_.n_ctx + 1,
              "the corpus ({} tokens) is too small for windows of {} tokens in both the training "
              "and the validation split",
              n, config_.n_ctx + 1);
  model_->check_ids(tokens_);
  make_optimizer();
}

Trainer::Trainer(TrainConfig config, int64_t vocab_size, std::vector<uint32_t> tokens,
                 std::string out_dir, const Device& device, DataParallel* dp)
    : Trainer(config, std::move(tokens), std::move(out_dir),
              std::make_unique<Gpt2>(Gpt2::init_random(
                  (config.validate(), model_config(config, vocab_size)), config.seed, device)),
              dp) {
  new_log_ = true;
}

std::unique_ptr<Trainer> Trainer::from_model(TrainConfig config, Gpt2 model,
                                             std::vector<uint32_t> tokens, std::string out_dir,
                                             DataParallel* dp) {
  const Gpt2Config& m = model.config();
  FORGE_CHECK(config.n_layer == m.n_layer && config.n_head == m.n_head &&
                  config.n_embd == m.n_embd && config.n_ctx == m.n_ctx,
              "fine-tuning a model of {} layers × {} heads × {} wide, context {}, with a config "
              "of {} × {} × {}, context {}",
              m.n_layer, m.n_head, m.n_embd, m.n_ctx, config.n_layer, config.n_head, config.n_embd,
              config.n_ctx);
  std::unique_ptr<Trainer> t(new Trainer(config, std::move(tokens), std::move(out_dir),
                                         std::make_unique<Gpt2>(std::move(model)), dp));
  t->new_log_ = true;
  return t;
}

void Trainer::start_log() {
  if (!writes_files()) return;
  fs::create_directories(out_dir_);
  write_text(out_dir_ + "/train_log.csv", kLogHeader);
}

void Trainer::make_optimizer() {
  const std::vector<Gpt2Parameter> params = model_->parameters();
  const std::vector<bool> frozen = frozen_parameters(*model_, config_.freeze);
  std::vector<optim::ParamRef> refs;
  trainable_.clear();
  for (size_t i = 0; i < params.size(); ++i) {
    if (frozen[i]) continue;
    trainable_.push_back(i);
    refs.push_back({params[i].name, params[i].tensor, params[i].decay});
  }
  FORGE_CHECK(!refs.empty(), "--freeze leaves no parameter to train");
  adamw_ = std::make_unique<optim::AdamW>(
      refs, optim::AdamWOptions{.beta1 = config_.beta1,
                                .beta2 = config_.beta2,
                                .eps = 1e-8f,
                                .weight_decay = config_.weight_decay});
}

std::unique_ptr<Trainer> Trainer::resume(std::vector<uint32_t> tokens, std::string out_dir,
                                         const Device& device, int64_t steps, DataParallel* dp) {
  if (!dp || dp->rank() == 0) remove_stale_temporaries(out_dir);
  const std::optional<std::string> found = find_checkpoint(out_dir);
  FORGE_CHECK(found, "{} has no checkpoint to resume from", out_dir);
  const std::string dir = *found;
  const std::string state_path = dir + "/train_state.json";
  const nlohmann::json state = parse_json_limited(read_regular_file(state_path), state_path);
  const auto field = [&](const char* key, bool (nlohmann::json::*is)() const) {
    FORGE_CHECK(state.contains(key) && (state[key].*is)(),
                "{}: \"{}\" is missing or of the wrong type; the checkpoint is damaged", state_path,
                key);
    return state[key];
  };
  TrainConfig config;
  try {
    config = TrainConfig::from_json(field("config", &nlohmann::json::is_object), TrainConfig{});
    config.validate();
  } catch (const Error& e) {
    fail("{}: {}", state_path, e.what());
  }
  if (state.contains("sha256")) {
    const nlohmann::json& sha = state["sha256"];
    FORGE_CHECK(sha.is_object() && sha.value("config", "") == config_digest(config),
                "{}: the config differs from the one saved with this checkpoint (its SHA-256 "
                "does not match): the state was edited or damaged",
                state_path);
    FORGE_CHECK(sha.value("tokens", "") == tokens_digest(tokens),
                "--resume: the corpus's tokens differ from those the run in {} was trained on "
                "(SHA-256 mismatch): the corpus or the vocabulary changed since it started",
                out_dir);
  }
  const int64_t step = field("step", &nlohmann::json::is_number_integer).get<int64_t>();
  const nlohmann::json best = state.value("best_val_loss", nlohmann::json());
  FORGE_CHECK(best.is_null() || best.is_number(),
              "{}: \"best_val_loss\" must be a number or null; the checkpoint is damaged",
              state_path);
  const double wall_s = field("wall_s", &nlohmann::json::is_number).get<double>();
  const nlohmann::json ranks = state.value("ranks", nlohmann::json(1));
  FORGE_CHECK(step >= 0 && ranks.is_number_integer() && ranks.get<int64_t>() > 0,
              "{}: step {} or ranks {} out of range; the checkpoint is damaged", state_path, step,
              ranks.dump());
  if (steps > 0) config.steps = steps;
  auto model = std::make_unique<Gpt2>(Gpt2::load(dir, device));
  const Gpt2Config& m = model->config();
  FORGE_CHECK(config.n_layer == m.n_layer && config.n_head == m.n_head &&
                  config.n_embd == m.n_embd && config.n_ctx == m.n_ctx,
              "{}: the config's model ({} layers × {} heads × {} wide, context {}) is not the "
              "checkpoint's ({} × {} × {}, context {} in {}/config.json)",
              state_path, config.n_layer, config.n_head, config.n_embd, config.n_ctx, m.n_layer,
              m.n_head, m.n_embd, m.n_ctx, dir);
  std::unique_ptr<Trainer> t(
      new Trainer(config, std::move(tokens), std::move(out_dir), std::move(model), dp));
  t->adamw_->load(dir + "/optimizer.safetensors");
  t->step_ = step;
  FORGE_CHECK(t->adamw_->steps() == t->step_, "{}: optimizer step {} differs from step {}", dir,
              t->adamw_->steps(), t->step_);
  t->best_val_ = best.is_null() ? std::numeric_limits<double>::infinity() : best.get<double>();
  t->wall_before_ = wall_s;
  t->checkpoint_ranks_ = ranks.get<int64_t>();
  t->resume_log();
  return t;
}

void Trainer::resume_log() {
  // Keep the log up to the checkpoint: later rows belong to the interrupted session.
  const std::string path = out_dir_ + "/train_log.csv";
  std::string text = read_regular_file(path);
  // A row counts once its newline is written: drop what a kill mid-append may have left.
  text.resize(text.find_last_of('\n') + 1);
  std::istringstream log(text);
  std::string line, kept = kLogHeader;
  std::getline(log, line);
  for (int64_t number = 2; std::getline(log, line); ++number) {
    std::istringstream row(line);
    std::string field[4];
    for (auto& f : field) std::getline(row, f, ',');
    const auto number_at = [&](const std::string& text, const char* what) {
      double value = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      FORGE_CHECK(ec == std::errc() && end == text.data() + text.size() && !text.empty(),
                  "{}: line {}: {} \"{}\" is not a number", path, number, what, text);
      return value;
    };
    const double step = number_at(field[0], "the step");
    FORGE_CHECK(step == std::floor(step) && step >= 0 && step <= 1e15,
                "{}: line {}: step {} is not a step number", path, number, field[0]);
    if (step > double(step_)) break;
    kept += line + "\n";
    train_curve_.push_back({static_cast<int64_t>(step), number_at(field[2], "the train loss")});
    if (!field[3].empty()) {
      val_curve_.push_back(
          {static_cast<int64_t>(step), number_at(field[3], "the validation loss")});
    }
  }
  if (writes_files()) write_text(path, kept);
}

void Trainer::windows(const std::vector<int64_t>& starts, std::vector<uint32_t>& inputs,
                      std::vector<uint32_t>& targets) const {
  inputs.clear();
  targets.clear();
  for (int64_t s : starts) {
    inputs.insert(inputs.end(), tokens_.begin() + s, tokens_.begin() + s + config_.n_ctx);
    targets.insert(targets.end(), tokens_.begin() + s + 1, tokens_.begin() + s + 1 + config_.n_ctx);
  }
}

double Trainer::train_step() {
  Gpt2Grads grads;
  double loss = 0.0;
  std::vector<uint32_t> inputs, targets;
  const uint64_t positions = static_cast<uint64_t>(train_end_ - config_.n_ctx);
  std::optional<GradientSync> sync;  // data parallel: sums the gradients over the ranks
  if (dp_) sync.emplace(*dp_, grads, parameter_sizes(*model_), step_);
  for (int64_t a = 0; a < config_.accumulation; ++a) {
    if (dp_ && !dp_->owns(a)) continue;  // another rank's share of the global batch
    const uint64_t micro = static_cast<uint64_t>(step_ * config_.accumulation + a);
    std::vector<int64_t> starts;
    for (int64_t b = 0; b < config_.batch; ++b) {
      starts.push_back(static_cast<int64_t>(
          hash64(config_.seed, micro * static_cast<uint64_t>(config_.batch) + b) % positions));
    }
    windows(starts, inputs, targets);
    const LossOptions options{.dropout = config_.dropout,
                              .dropout_seed = hash64(config_.seed ^ kDropoutStream, micro),
                              .grad_scale = 1.0f / static_cast<float>(config_.accumulation),
                              .on_gradient_done = sync ? sync->hook(a, config_.accumulation)
                                                       : std::function<void(size_t)>{}};
    loss += model_->loss_grads(inputs, targets, config_.batch, grads, options);
  }
  if (sync) loss = sync->finish(loss);
  std::vector<Tensor> trainable;  // the frozen parameters' gradients are dropped here
  for (size_t i : trainable_) trainable.push_back(i < grads.size() ? grads[i] : Tensor());
  const optim::GradNorm clip = optim::clip_grad_norm(trainable, config_.grad_clip);
  adamw_->step(trainable, config_.lr_at(step_), clip.coefficient);
  ++step_;
  return loss / static_cast<double>(config_.accumulation);
}

double Trainer::validation_loss() const {
  const int64_t count = config_.eval_batches * config_.batch;
  const int64_t span = static_cast<int64_t>(tokens_.size()) - train_end_ - config_.n_ctx - 1;
  std::vector<uint32_t> inputs, targets;
  double total = 0.0;
  for (int64_t e = 0; e < config_.eval_batches; ++e) {
    if (dp_ && !dp_->owns(e)) continue;
    std::vector<int64_t> starts;
    for (int64_t b = 0; b < config_.batch; ++b) {
      starts.push_back(train_end_ +
                       span * (e * config_.batch + b) / std::max<int64_t>(1, count - 1));
    }
    windows(starts, inputs, targets);
    total += model_->loss(inputs, targets, config_.batch);
  }
  if (dp_) total = dp_->sum(total, fmt::format("the validation of step {}", step_));
  return total / static_cast<double>(config_.eval_batches);
}

bool Trainer::writes_files() const {
  return !dp_ || dp_->rank() == 0;
}

void Trainer::save_checkpoint(double wall_s) const {
  if (!writes_files()) return;
  const nlohmann::json state = {
      {"step", step_},
      {"best_val_loss", std::isfinite(best_val_) ? nlohmann::json(best_val_) : nlohmann::json()},
      {"wall_s", wall_s},
      {"ranks", dp_ ? dp_->size() : 1},
      {"config", config_.to_json()},
      {"sha256", {{"config", config_digest(config_)}, {"tokens", tokens_digest_}}}};
  train::save_checkpoint(
      out_dir_,
      [&](const std::string& dir) {
        model_->save(dir);
        adamw_->save(dir + "/optimizer.safetensors");
      },
      state.dump(2) + "\n");
}

void Trainer::save_best() const {
  if (!writes_files()) return;
  model_->save(out_dir_);
  write_text(out_dir_ + "/train_config.json", config_.to_json().dump(2) + "\n");
}

void Trainer::append_log(int64_t step, double lr, double train_loss, double val_loss, double tok_s,
                         double wall_s) {
  if (!writes_files()) return;
  append_to_file(
      out_dir_ + "/train_log.csv",
      fmt::format("{},{:.6g},{:.6f},{},{:.1f},{:.1f}\n", step, lr, train_loss,
                  std::isnan(val_loss) ? "" : fmt::format("{:.6f}", val_loss), tok_s, wall_s));
}

TrainSummary Trainer::run(const std::function<void(const Progress&)>& on_progress,
                          int64_t stop_after) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t first = step_;
  const double tokens_per_step =
      double(config_.batch) * double(config_.n_ctx) * double(config_.accumulation);
  TrainSummary summary;
  double last_loss = NAN;
  bool saved = false;
  if (new_log_) start_log();
  new_log_ = false;
  if (dp_) dp_->check_parameters(*model_, step_, true);
  while (step_ < config_.steps && (stop_after <= 0 || step_ - first < stop_after)) {
    const float lr = config_.lr_at(step_);
    last_loss = train_step();
    if (dp_) dp_->check_parameters(*model_, step_, false);
    saved = false;
    const bool last = step_ == config_.steps;
    const bool evaluate = step_ % config_.eval_interval == 0 || last;
    if (step_ % config_.log_interval != 0 && !evaluate) continue;
    const double elapsed = seconds_since(t0);
    const double tok_s = double(step_ - first) * tokens_per_step / std::max(1e-9, elapsed);
    double val = NAN;
    if (evaluate) {
      val = validation_loss();
      val_curve_.push_back({step_, val});
      if (val < best_val_) {
        best_val_ = val;
        save_best();
      }
    }
    train_curve_.push_back({step_, last_loss});
    append_log(step_, lr, last_loss, val, tok_s, wall_before_ + elapsed);
    if (evaluate) {
      if (writes_files()) write_loss_plot(out_dir_ + "/loss.png", train_curve_, val_curve_);
      save_checkpoint(wall_before_ + seconds_since(t0));
      saved = true;
    }
    if (on_progress) {
      const double per_step = elapsed / double(step_ - first);
      on_progress({step_, config_.steps, last_loss, lr, tok_s,
                   per_step * double(config_.steps - step_), val});
    }
  }
  const double elapsed = seconds_since(t0);
  if (!saved && step_ > first) save_checkpoint(wall_before_ + elapsed);
  summary.step = step_;
  summary.last_train_loss = last_loss;
  summary.best_val_loss = best_val_;
  summary.wall_s = wall_before_ + elapsed;
  summary.tokens_per_s = double(step_ - first) * tokens_per_step / std::max(1e-9, elapsed);
  return summary;
}

}  // namespace forge::train
