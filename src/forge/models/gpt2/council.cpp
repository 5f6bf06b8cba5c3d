#include "forge/models/gpt2/council.h"

#include <cmath>
#include <cstring>
#include <filesystem>

#include "forge/core/backend.h"
#include "forge/core/error.h"
#include "forge/ops/ops.h"
#include "forge/ops/train_ops.h"

namespace forge {
namespace {

void check_beta(float beta) {
  FORGE_CHECK(std::isfinite(beta) && beta >= 0.0f, "--beta must be finite and ≥ 0, got {}", beta);
}

std::vector<float> wte_of(const Gpt2& model) {
  for (const auto& [name, t] : model.named_parameters()) {
    if (name.ends_with("wte.weight")) return t.to_floats();
  }
  fail("a GPT-2 without wte");
}

}  // namespace

std::string expert_directory(const std::string& path) {
  namespace fs = std::filesystem;
  FORGE_CHECK(fs::exists(path), "expert {} does not exist", path);
  if (fs::is_directory(path)) return path;
  const std::string dir = fs::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

Gpt2 load_expert(const std::string& path, const Device& device) {
  const std::string dir = expert_directory(path);
  if (dir == path) return Gpt2::load(dir, device);
  Gpt2Config config = Gpt2Config::from_json_file(dir + "/config.json");
  config.validate();
  return Gpt2::from_checkpoint(config, path, device);
}

CouncilMerge council_merge(const Gpt2& head, const Tensor& hidden, float beta) {
  check_beta(beta);
  FORGE_CHECK(hidden.rank() == 2 && hidden.dim(0) > 0 && hidden.dim(1) == head.config().n_embd,
              "council_merge: hidden must be [experts, {}], got {}", head.config().n_embd,
              hidden.describe());
  const int64_t e = hidden.dim(0);
  CouncilMerge m;
  m.expert_logits = head.logits_from_hidden(hidden);
  m.entropies = ops::entropy(m.expert_logits);
  // softmax over the experts: one unmasked row of e scores (offset e − 1 masks nothing).
  const Tensor scores = ops::scale(m.entropies, -beta).reshape({1, 1, e});
  m.weights = ops::softmax_causal(scores, e - 1).reshape({1, e});
  m.hidden = ops::matmul(m.weights, hidden);
  m.logits = head.logits_from_hidden(m.hidden);
  return m;
}

Council::Council(std::vector<Gpt2> experts, const CouncilOptions& options)
    : experts_(std::move(experts)), options_(options), sampler_(options.sampling) {
  FORGE_CHECK(!experts_.empty(), "a council needs at least one expert");
  check_beta(options.beta);
  const Gpt2Config& a = experts_[0].config();
  const std::vector<float> wte = wte_of(experts_[0]);
  for (size_t i = 1; i < experts_.size(); ++i) {
    const Gpt2Config& b = experts_[i].config();
    FORGE_CHECK(experts_[i].device() == experts_[0].device(),
                "council: expert {} is on another device", i + 1);
    FORGE_CHECK(b.vocab_size == a.vocab_size && b.n_embd == a.n_embd && b.n_ctx == a.n_ctx,
                "council: expert {} has vocabulary {}, width {}, context {}; expert 1 has {}, "
                "{}, {}",
                i + 1, b.vocab_size, b.n_embd, b.n_ctx, a.vocab_size, a.n_embd, a.n_ctx);
    FORGE_CHECK(
        std::memcmp(wte_of(experts_[i]).data(), wte.data(), wte.size() * sizeof(float)) == 0,
        "council: expert {}'s wte differs from expert 1's, so their hidden states are "
        "in different bases: fine-tune the experts from one ancestor with --freeze "
        "wte,wpe",
        i + 1);
  }
  for (const Gpt2& x : experts_) caches_.push_back(x.new_cache());
}

void Council::set_beta(float beta) {
  check_beta(beta);
  options_.beta = beta;
}

void Council::set_sampling(const SamplingOptions& sampling) {
  sampler_ = Sampler(sampling);  // checks the options now, not at the next start()
  options_.sampling = sampling;
}

CouncilStep Council::start(std::span<const uint32_t> prompt) {
  const Gpt2Config& c = config();
  FORGE_CHECK(!prompt.empty(), "empty prompt: give at least one token");
  FORGE_CHECK(static_cast<int64_t>(prompt.size()) <= c.n_ctx,
              "prompt of {} tokens exceeds the experts' context of {} tokens", prompt.size(),
              c.n_ctx);
  experts_[0].check_ids(prompt);
  sampler_ = Sampler(options_.sampling);
  DispatchScope scope(experts_[0].device());
  std::vector<Tensor> newest;
  for (size_t i = 0; i < experts_.size(); ++i) {
    caches_[i] = experts_[i].new_cache();
    const Tensor h = experts_[i].prefill(caches_[i], prompt);
    newest.push_back(h.rows(h.dim(0) - 1, h.dim(0)));
  }
  return merge(newest);
}

CouncilStep Council::step(uint32_t id) {
  FORGE_CHECK(length() > 0, "council: start() a sequence before stepping it");
  FORGE_CHECK(length() < config().n_ctx, "council: the context of {} tokens is full",
              config().n_ctx);
  experts_[0].check_ids({&id, 1});
  DispatchScope scope(experts_[0].device());
  std::vector<Tensor> newest;
  for (size_t i = 0; i < experts_.size(); ++i) {
    newest.push_back(experts_[i].hidden_step(caches_[i], id));
  }
  return merge(newest);
}

CouncilStep Council::merge(const std::vector<Tensor>& newest) {
  const int64_t e = static_cast<int64_t>(experts_.size()), c = config().n_embd;
  const Tensor hidden = Tensor::empty({e, c}, DType::F32, experts_[0].device());
  for (int64_t i = 0; i < e; ++i) ops::copy_into(hidden.rows(i, i + 1), newest[i]);
  const CouncilMerge m = council_merge(experts_[0], hidden, options_.beta);
  const Tensor expert_ids = ops::argmax(m.expert_logits);

  CouncilStep out;
  out.weights.resize(e);
  out.entropies.resize(e);
  out.expert_ids.resize(e);
  std::vector<TensorRead> reads{
      {m.weights, out.weights.data()},
      {m.entropies, out.entropies.data()},
      {expert_ids, out.expert_ids.data()},
  };
  // Greedy reduces on the device; sampling reads the merged row and draws from it here.
  const Tensor choice = sampler_.greedy() ? ops::argmax(m.logits) : Tensor();
  std::vector<float> row;
  if (choice.defined()) {
    reads.push_back({choice, &out.id});
  } else {
    row.resize(m.logits.numel());
    reads.push_back({m.logits, row.data()});
  }
  if (options_.read_hidden) {
    out.hidden.resize(e * c);
    reads.push_back({hidden, out.hidden.data()});
  }
  read_together(reads);
  if (!choice.defined()) out.id = sampler_.sample(std::span<const float>(row));
  return out;
}

}  // namespace forge
