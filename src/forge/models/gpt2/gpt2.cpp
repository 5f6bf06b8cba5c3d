#include "forge/models/gpt2/gpt2.h"

#include <cmath>
#include <filesystem>
#include <set>
#include <string_view>

#include "forge/core/dropout.h"
#include "forge/core/error.h"
#include "forge/core/random.h"
#include "forge/ops/train_ops.h"
#include "forge/serialization/compact.h"
#include "forge/serialization/file_io.h"
#include "forge/serialization/safetensors.h"

namespace forge {
namespace {

/// A parameter's HF name (without the "transformer." prefix), its slot, shape and init.
struct ParamSpec {
  std::string name;
  Tensor* slot;
  Shape shape;
  enum Init { Normal, ResidualNormal, Zeros, Ones } init;
};

std::vector<ParamSpec> param_specs(const Gpt2Config& c, nn::Embedding& embed,
                                   std::vector<Gpt2Block>& blocks, nn::LayerNorm& ln_f) {
  const int64_t e = c.n_embd;
  std::vector<ParamSpec> specs = {
      {"wte.weight", &embed.wte, {c.vocab_size, e}, ParamSpec::Normal},
      {"wpe.weight", &embed.wpe, {c.n_ctx, e}, ParamSpec::Normal},
  };
  for (size_t l = 0; l < blocks.size(); ++l) {
    Gpt2Block& b = blocks[l];
    const std::string p = "h." + std::to_string(l) + ".";
    const std::vector<ParamSpec> layer = {
        {p + "ln_1.weight", &b.ln_1.weight, {e}, ParamSpec::Ones},
        {p + "ln_1.bias", &b.ln_1.bias, {e}, ParamSpec::Zeros},
        {p + "attn.c_attn.weight", &b.c_attn.weight, {e, 3 * e}, ParamSpec::Normal},
        {p + "attn.c_attn.bias", &b.c_attn.bias, {3 * e}, ParamSpec::Zeros},
        {p + "attn.c_proj.weight", &b.attn_proj.weight, {e, e}, ParamSpec::ResidualNormal},
        {p + "attn.c_proj.bias", &b.attn_proj.bias, {e}, ParamSpec::Zeros},
        {p + "ln_2.weight", &b.ln_2.weight, {e}, ParamSpec::Ones},
        {p + "ln_2.bias", &b.ln_2.bias, {e}, ParamSpec::Zeros},
        {p + "mlp.c_fc.weight", &b.c_fc.weight, {e, 4 * e}, ParamSpec::Normal},
        {p + "mlp.c_fc.bias", &b.c_fc.bias, {4 * e}, ParamSpec::Zeros},
        {p + "mlp.c_proj.weight", &b.mlp_proj.weight, {4 * e, e}, ParamSpec::ResidualNormal},
        {p + "mlp.c_proj.bias", &b.mlp_proj.bias, {e}, ParamSpec::Zeros},
    };
    specs.insert(specs.end(), layer.begin(), layer.end());
  }
  specs.push_back({"ln_f.weight", &ln_f.weight, {e}, ParamSpec::Ones});
  specs.push_back({"ln_f.bias", &ln_f.bias, {e}, ParamSpec::Zeros});
  return specs;
}

constexpr const char* kPrefix = "transformer.";
constexpr int64_t kTensorsPerLayer = 12, kOtherTensors = 4;  // wte, wpe, ln_f.{weight, bias}

/// Tensors HF checkpoints carry that are not parameters: the attention mask buffers, and the LM
/// head that GPT-2 ties to wte.
bool is_ignored_extra(std::string_view name) {
  if (name.starts_with(kPrefix)) name.remove_prefix(std::string_view(kPrefix).size());
  return name == "lm_head.weight" || name.ends_with(".attn.bias") ||
         name.ends_with(".attn.masked_bias");
}

/// The first element of `t` (host memory, f32) that is a NaN or an infinity, or -1.
int64_t first_non_finite(const Tensor& t) {
  const float* values = t.f32();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (!std::isfinite(values[i])) return i;
  }
  return -1;
}

}  // namespace

Gpt2 Gpt2::load(const std::string& dir, const Device& device, const LoadProgress& progress) {
  FORGE_CHECK(std::filesystem::is_directory(dir), "model directory {} does not exist", dir);
  const Gpt2Config config = Gpt2Config::from_json_file(dir + "/config.json");
  return from_checkpoint(config, checkpoint_path(dir), device, progress);
}

std::string Gpt2::checkpoint_path(const std::string& dir) {
  const std::string safetensors = dir + "/model.safetensors";
  const std::string compact = dir + "/model.compact";
  if (std::filesystem::exists(safetensors) || !std::filesystem::exists(compact)) return safetensors;
  return compact;
}

std::vector<std::pair<std::string, Shape>> Gpt2::expected_tensors(const Gpt2Config& config) {
  nn::Embedding embed;
  std::vector<Gpt2Block> blocks(config.n_layer);
  nn::LayerNorm ln_f;
  std::vector<std::pair<std::string, Shape>> out;
  for (const ParamSpec& spec : param_specs(config, embed, blocks, ln_f))
    out.emplace_back(spec.name, spec.shape);
  return out;
}

Gpt2 Gpt2::from_checkpoint(const Gpt2Config& config, const std::string& path, const Device& device,
                           const LoadProgress& progress) {
  if (detect_checkpoint_format(path) == CheckpointFormat::Compact)
    return from_compact(config, CompactCheckpoint::open(path), device, progress);
  return from_safetensors(config, path, device, progress);
}

template <typename File>
Gpt2 Gpt2::from_file(const Gpt2Config& config, const File& file, const std::string& path,
                     const Device& device, const LoadProgress& progress) {
  config.validate();
  // Checked before anything is allocated, so a config that lies about n_layer (10⁹ on a file of
  // 4 layers) fails at once instead of building 10⁹ empty blocks.
  const std::vector<std::string> names = file.names();
  const int64_t needed = kOtherTensors + kTensorsPerLayer * config.n_layer;
  if (int64_t(names.size()) < needed) {
    // Some tensor is missing: name the first, looking at no more layers than the file can hold.
    static constexpr const char* kLayer[] = {
        "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
        "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
        "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
    const auto check = [&](const std::string& name) {
      FORGE_CHECK(file.contains(name) || file.contains(kPrefix + name),
                  "{}: missing tensor {} (or {}{})", path, name, kPrefix, name);
    };
    check("wte.weight");
    check("wpe.weight");
    for (int64_t l = 0; l < config.n_layer; ++l) {
      for (const char* part : kLayer) check("h." + std::to_string(l) + "." + part);
    }
    fail("{} holds {} tensors, but a GPT-2 of n_layer {} has {}", path, names.size(),
         config.n_layer, needed);
  }
  Gpt2 model(config, device);
  model.blocks_.resize(config.n_layer);
  model.ln_f_.eps = config.layer_norm_epsilon;
  for (auto& b : model.blocks_) b.ln_1.eps = b.ln_2.eps = config.layer_norm_epsilon;
  // Weights go through host memory, where a NaN or infinity is found before it reaches the
  // device; on a host-memory device that is the tensor itself.
  const bool host_device = Tensor::empty(Shape{1}, DType::F32, device).buffer().host() != nullptr;
  const Device staging = host_device ? device : Device::cpu();
  std::set<std::string> used;
  const auto specs = param_specs(config, model.embed_, model.blocks_, model.ln_f_);
  for (size_t i = 0; i < specs.size(); ++i) {
    const ParamSpec& spec = specs[i];
    const std::string prefixed = kPrefix + spec.name;
    const std::string& name = file.contains(prefixed) ? prefixed : spec.name;
    FORGE_CHECK(file.contains(name), "{}: missing tensor {} (or {})", path, spec.name, prefixed);
    const Shape& shape = file.entry(name).shape;
    FORGE_CHECK(shape == spec.shape, "{}: tensor {} has shape {}, but the config needs {}", path,
                name, shape.str(), spec.shape.str());
    Tensor t = file.read(name, staging);
    FORGE_CHECK(t.dtype() == DType::F32, "{}: tensor {} must be a float tensor, got {}", path, name,
                dtype_name(t.dtype()));
    const int64_t bad = first_non_finite(t);
    FORGE_CHECK(bad < 0, "{}: tensor {} holds {} at element {}: the checkpoint is damaged", path,
                name, std::isnan(t.f32()[bad]) ? "a NaN" : "an infinity", bad);
    *spec.slot = host_device ? std::move(t) : t.to(device);
    used.insert(name);
    if (progress) progress(static_cast<int64_t>(i + 1), static_cast<int64_t>(specs.size()));
  }
  std::vector<std::string> extra;
  for (const std::string& name : names) {
    if (!used.count(name) && !is_ignored_extra(name)) extra.push_back(name);
  }
  if (!extra.empty()) {
    std::string listed;
    for (size_t i = 0; i < std::min<size_t>(extra.size(), 3); ++i) {
      listed += (i ? ", " : "") + extra[i];
    }
    fail(
        "{} holds {} tensor(s) a GPT-2 of n_layer {} does not use ({}{}): the config does not "
        "describe this checkpoint",
        path, extra.size(), config.n_layer, listed, extra.size() > 3 ? ", ..." : "");
  }
  return model;
}

Gpt2 Gpt2::from_safetensors(const Gpt2Config& config, const std::string& path, const Device& device,
                            const LoadProgress& progress) {
  return from_file(config, SafetensorsFile::open(path), path, device, progress);
}

Gpt2 Gpt2::from_compact(const Gpt2Config& config, const CompactCheckpoint& file,
                        const Device& device, const LoadProgress& progress) {
  return from_file(config, file, file.origin(), device, progress);
}

Gpt2 Gpt2::init_random(const Gpt2Config& config, uint64_t seed, const Device& device) {
  config.validate();
  Gpt2 model(config, device);
  model.blocks_.resize(config.n_layer);
  model.ln_f_.eps = config.layer_norm_epsilon;
  for (auto& b : model.blocks_) b.ln_1.eps = b.ln_2.eps = config.layer_norm_epsilon;
  const float std_normal = 0.02f;
  const float std_residual = std_normal / std::sqrt(2.0f * static_cast<float>(config.n_layer));
  uint64_t stream = 0;
  for (const ParamSpec& spec : param_specs(config, model.embed_, model.blocks_, model.ln_f_)) {
    std::vector<float> values(spec.shape.numel());
    const uint64_t param_seed = hash64(seed, stream++);
    for (size_t i = 0; i < values.size(); ++i) {
      switch (spec.init) {
        case ParamSpec::Normal:
          values[i] = std_normal * normal01(param_seed, i);
          break;
        case ParamSpec::ResidualNormal:
          values[i] = std_residual * normal01(param_seed, i);
          break;
        case ParamSpec::Zeros:
          values[i] = 0.0f;
          break;
        case ParamSpec::Ones:
          values[i] = 1.0f;
          break;
      }
    }
    *spec.slot = Tensor::from_floats(values, spec.shape, device);
  }
  return model;
}

std::vector<std::pair<std::string, Tensor>> Gpt2::named_parameters() const {
  auto& self = const_cast<Gpt2&>(*this);
  std::vector<std::pair<std::string, Tensor>> out;
  for (const ParamSpec& spec : param_specs(config_, self.embed_, self.blocks_, self.ln_f_)) {
    out.emplace_back(kPrefix + spec.name, *spec.slot);
  }
  return out;
}

std::vector<Gpt2Parameter> Gpt2::parameters() const {
  std::vector<Gpt2Parameter> out;
  for (auto& [name, t] : named_parameters()) out.push_back({name, t, t.rank() >= 2});
  return out;
}

int64_t Gpt2::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Gpt2::save_safetensors(const std::string& path) const {
  forge::save_safetensors(path, named_parameters(), {{"format", "pt"}});
}

void Gpt2::save(const std::string& dir) const {
  std::filesystem::create_directories(dir);
  save_safetensors(dir + "/model.safetensors");
  AtomicFileWriter config(dir + "/config.json");
  const std::string json = config_.to_json();
  config.write(json.data(), json.size());
  config.commit();
}

void Gpt2::check_ids(std::span<const uint32_t> ids) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    FORGE_CHECK(ids[i] < config_.vocab_size,
                "token id {} at position {} is outside the vocabulary (size {})", ids[i], i,
                config_.vocab_size);
  }
}

Gpt2::Gpt2(Gpt2Config config, Device device)
    : config_(std::move(config)),
      device_(std::move(device)),
      caches_(std::make_shared<KvArena>(Shape{config_.n_head, config_.n_ctx, config_.head_dim()},
                                        config_.n_layer, device_)) {}

KvCache Gpt2::new_cache() const {
  return caches_->acquire();
}

struct Gpt2::Pass {
  autograd::Tape* tape = nullptr;
  AttentionTrace* trace = nullptr;
  nn::Dropout dropout;
  uint64_t dropout_seed = 0;
  uint64_t site = 0;  // dropout calls so far: each gets its own key
  // Several caches' prompts one after the other (prefill_together): each one's token count.
  // Empty: every sequence has the same count (one token each when there are several caches).
  std::span<const int64_t> lengths;

  nn::Var drop(const nn::Var& x) { return dropout(x, dropout_key(dropout_seed, site++)); }
};

nn::Var Gpt2::attention(const Gpt2Block& block, const nn::Var& x, int64_t batch,
                        std::span<KvCache* const> caches, size_t layer, Pass& pass) const {
  const nn::Var qkv = block.c_attn(x);
  if (caches.size() > 1) {  // several sequences, each against its own cache
    std::vector<Tensor> k, v;
    std::vector<int64_t> pos;
    for (const KvCache* c : caches) {
      k.push_back(c->k[layer]);
      v.push_back(c->v[layer]);
      pos.push_back(c->length);
    }
    if (pass.lengths.empty()) return nn::Var(ops::attention_steps(qkv.value(), k, v, pos));
    return nn::Var(ops::attention_prefills(qkv.value(), k, v, pos, pass.lengths));
  }
  KvCache* cache = caches.empty() ? nullptr : caches[0];
  const int64_t d = config_.head_dim(), rows = qkv.value().dim(0);
  const Backend& backend = device_.backend();
  const bool one_step = cache && !pass.tape && rows == 1 &&
                        backend.supports(Capability::AttentionStep, d, cache->length + 1);
  if (one_step) {  // a decode step: the whole attention is one fused kernel
    Tensor probs;
    const Tensor mixed = ops::attention_step(qkv.value(), cache->k[layer], cache->v[layer],
                                             cache->length, pass.trace ? &probs : nullptr);
    if (pass.trace) pass.trace->push_back(probs);
    return nn::Var(mixed);
  }
  const bool fused_prefill =
      cache && !pass.tape && !pass.trace &&
      backend.supports(Capability::AttentionPrefill, d, cache->length + rows);
  if (fused_prefill) {  // several tokens into the cache, no probabilities asked for
    return nn::Var(
        ops::attention_prefill(qkv.value(), cache->k[layer], cache->v[layer], cache->length));
  }
  const autograd::Heads heads = autograd::split_heads(qkv, batch, config_.n_head);
  const int64_t t = heads.q.value().dim(1);
  nn::Var k = heads.k, v = heads.v;
  if (cache) {
    ops::kv_append(cache->k[layer], heads.k.value(), cache->length);
    ops::kv_append(cache->v[layer], heads.v.value(), cache->length);
    k = nn::Var(cache->k[layer].narrow(1, 0, cache->length + t));
    v = nn::Var(cache->v[layer].narrow(1, 0, cache->length + t));
  }
  const float alpha = 1.0f / std::sqrt(static_cast<float>(config_.head_dim()));
  const nn::Var scores = autograd::matmul(heads.q, k, {.trans_b = true, .alpha = alpha});
  const nn::Var probs = autograd::softmax_causal(scores, k.value().dim(1) - t);
  if (pass.trace) pass.trace->push_back(probs.value());
  const nn::Var mixed = autograd::matmul(pass.drop(probs), v);
  return autograd::merge_heads(mixed, batch);
}

nn::Var Gpt2::project_residual(const nn::Linear& proj, const nn::Var& h, nn::Var&& x,
                               Pass& pass) const {
  // Dropout sits between the projection and the add only when training with it.
  if (pass.dropout.p > 0.0f) return autograd::add(x, pass.drop(proj(h)));
  return proj.add_to(std::move(x), h);
}

nn::Var Gpt2::run(std::span<const uint32_t> ids, int64_t batch, std::span<KvCache* const> caches,
                  Pass& pass) const {
  FORGE_CHECK(!ids.empty(), "empty input: at least one token is needed");
  check_ids(ids);
  const Tensor id_tensor = Tensor::from_ids(std::vector<uint32_t>(ids.begin(), ids.end()),
                                            {int64_t(ids.size())}, device_);
  return run(id_tensor, batch, caches, pass);
}

nn::Var Gpt2::run(const Tensor& ids, int64_t batch, std::span<KvCache* const> caches,
                  Pass& pass) const {
  FORGE_CHECK(ids.dtype() == DType::U32 && ids.rank() == 1 && ids.numel() > 0,
              "token ids must be a non-empty [n] U32 tensor, got {}", ids.describe());
  const int64_t n = ids.numel();
  FORGE_CHECK(batch > 0 && (n % batch == 0 || !pass.lengths.empty()),
              "{} tokens do not fold into {} sequences", n, batch);
  FORGE_CHECK(caches.size() <= 1 || static_cast<int64_t>(caches.size()) == batch,
              "{} caches for {} sequences", caches.size(), batch);
  FORGE_CHECK(caches.size() != 1 || batch == 1, "the KV cache holds a single sequence");
  FORGE_CHECK(caches.empty() || !pass.tape,
              "the KV cache is for inference: a training pass has none");
  // Each cache's token count: one each in a batched step, its prompt's in prefill_together.
  std::vector<int64_t> lengths(pass.lengths.begin(), pass.lengths.end());
  if (lengths.empty()) lengths.assign(std::max<size_t>(caches.size(), 1), n / batch);
  FORGE_CHECK(caches.size() <= 1 || pass.lengths.size() == caches.size() || n == batch,
              "{} caches for {} tokens: a batched step takes one token each", caches.size(), n);
  std::vector<int64_t> positions;  // of every token, when there are several caches
  for (size_t b = 0; b < caches.size(); ++b) {
    const KvCache* c = caches[b];
    FORGE_CHECK(c->length + lengths[b] <= config_.n_ctx,
                "{} tokens after {} cached exceed the context of {} tokens", lengths[b], c->length,
                config_.n_ctx);
    for (int64_t i = 0; i < lengths[b]; ++i) positions.push_back(c->length + i);
  }
  if (pass.trace) pass.trace->clear();
  const int64_t t = n / batch;
  nn::Var x = caches.size() > 1
                  ? embed_.at(ids, positions)
                  : pass.drop(embed_(ids, t, caches.empty() ? 0 : caches[0]->length, pass.tape));
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const Gpt2Block& b = blocks_[l];
    // The residual x is handed over; its reads in the arguments all finish before the add.
    x = project_residual(b.attn_proj, attention(b, b.ln_1(x), batch, caches, l, pass), std::move(x),
                         pass);
    x = project_residual(b.mlp_proj, b.c_fc.gelu(b.ln_2(x)), std::move(x), pass);
  }
  for (size_t b = 0; b < caches.size(); ++b) caches[b]->length += lengths[b];
  return ln_f_(x);
}

Tensor Gpt2::run_inference(std::span<const uint32_t> ids, int64_t batch,
                           std::span<KvCache* const> caches, AttentionTrace* trace) const {
  Pass pass;
  pass.trace = trace;
  return run(ids, batch, caches, pass).value();
}

Tensor Gpt2::hidden(std::span<const uint32_t> ids, int64_t batch, AttentionTrace* trace) const {
  return run_inference(ids, batch, {}, trace);
}

Tensor Gpt2::forward(std::span<const uint32_t> ids, int64_t batch, AttentionTrace* trace) const {
  return logits_from_hidden(run_inference(ids, batch, {}, trace));
}

Tensor Gpt2::prefill(KvCache& cache, std::span<const uint32_t> ids, AttentionTrace* trace) const {
  KvCache* const caches[] = {&cache};
  return run_inference(ids, 1, caches, trace);
}

Tensor Gpt2::hidden_step(KvCache& cache, uint32_t id, AttentionTrace* trace) const {
  KvCache* const caches[] = {&cache};
  return run_inference(std::span<const uint32_t>(&id, 1), 1, caches, trace);
}

Tensor Gpt2::hidden_step(KvCache& cache, const Tensor& id) const {
  FORGE_CHECK(id.numel() == 1, "a cached step takes one id, got {}", id.describe());
  KvCache* const caches[] = {&cache};
  Pass pass;
  return run(id, 1, caches, pass).value();
}

void Gpt2::check_caches(std::span<KvCache* const> caches, std::span<const int64_t> tokens,
                        const char* what) const {
  FORGE_CHECK(!caches.empty(), "{}: no sequences given", what);
  FORGE_CHECK(caches.size() == tokens.size(), "{}: {} caches for {} sequences", what, caches.size(),
              tokens.size());
  const Shape shape{config_.n_head, config_.n_ctx, config_.head_dim()};
  for (size_t b = 0; b < caches.size(); ++b) {
    const KvCache* c = caches[b];
    FORGE_CHECK(c != nullptr, "{}: the cache of sequence {} is null", what, b);
    FORGE_CHECK(c->k.size() == blocks_.size() && c->v.size() == blocks_.size() &&
                    c->k[0].shape() == shape && c->k[0].device() == device_,
                "{}: the cache of sequence {} is not one of this model's (new_cache())", what, b);
    FORGE_CHECK(tokens[b] >= 1, "{}: sequence {} has no tokens", what, b);
    FORGE_CHECK(c->length >= 0 && c->length < config_.n_ctx,
                "{}: the cache of sequence {} is full ({} of {} tokens)", what, b, c->length,
                config_.n_ctx);
    FORGE_CHECK(c->length + tokens[b] <= config_.n_ctx,
                "{}: sequence {}'s {} tokens after {} cached exceed the context of {} tokens", what,
                b, tokens[b], c->length, config_.n_ctx);
    for (size_t a = 0; a < b; ++a) {
      FORGE_CHECK(caches[a] != c, "{}: sequences {} and {} share one cache", what, a, b);
    }
  }
}

void Gpt2::check_step_caches(std::span<KvCache* const> caches, size_t count) const {
  FORGE_CHECK(caches.empty() || caches.size() == count, "hidden_steps: {} caches for {} ids",
              caches.size(), count);
  check_caches(caches, std::vector<int64_t>(count, 1), "hidden_steps");
  for (size_t b = 0; b < caches.size(); ++b) {
    std::string why;
    FORGE_CHECK(device_.backend().supports(Capability::AttentionStep, config_.head_dim(),
                                           caches[b]->length + 1, &why),
                "hidden_steps: sequence {} at position {} cannot take the batched step: {}", b,
                caches[b]->length, why);
  }
}

Tensor Gpt2::hidden_steps(std::span<KvCache* const> caches, std::span<const uint32_t> ids) const {
  check_step_caches(caches, ids.size());
  Pass pass;
  return run(ids, static_cast<int64_t>(ids.size()), caches, pass).value();
}

Tensor Gpt2::hidden_steps(std::span<KvCache* const> caches, const Tensor& ids) const {
  FORGE_CHECK(ids.dtype() == DType::U32 && ids.rank() == 1,
              "hidden_steps: ids must be a [B] U32 tensor, got {}", ids.describe());
  check_step_caches(caches, static_cast<size_t>(ids.numel()));
  Pass pass;
  return run(ids, ids.numel(), caches, pass).value();
}

Tensor Gpt2::prefill_together(std::span<KvCache* const> caches,
                              std::span<const std::vector<uint32_t>> prompts) const {
  std::vector<int64_t> lengths;
  std::vector<uint32_t> ids;
  for (const std::vector<uint32_t>& p : prompts) {
    lengths.push_back(static_cast<int64_t>(p.size()));
    ids.insert(ids.end(), p.begin(), p.end());
  }
  check_caches(caches, lengths, "prefill_together");
  const int64_t b = static_cast<int64_t>(caches.size());
  bool fused = b > 1;
  for (size_t i = 0; i < caches.size(); ++i) {
    fused = fused && device_.backend().supports(Capability::AttentionPrefill, config_.head_dim(),
                                                caches[i]->length + lengths[i]);
  }
  Tensor last = Tensor::empty({b, config_.n_embd}, DType::F32, device_);
  if (!fused) {  // one prompt, or a backend whose fused prefill does not hold them: one by one
    for (int64_t i = 0; i < b; ++i) {
      const Tensor h = prefill(*caches[i], prompts[i]);
      ops::copy_into(last.rows(i, i + 1), h.rows(h.dim(0) - 1, h.dim(0)));
    }
    return last;
  }
  Pass pass;
  pass.lengths = lengths;
  const Tensor hidden = run(ids, b, caches, pass).value();
  int64_t end = 0;
  for (int64_t i = 0; i < b; ++i) {
    end += lengths[i];
    ops::copy_into(last.rows(i, i + 1), hidden.rows(end - 1, end));
  }
  return last;
}

nn::Var Gpt2::token_losses(std::span<const uint32_t> ids, std::span<const uint32_t> targets,
                           int64_t batch, autograd::Tape* tape, const LossOptions& options,
                           float grad_scale) const {
  FORGE_CHECK(targets.size() == ids.size(), "{} targets for {} input tokens", targets.size(),
              ids.size());
  check_ids(targets);
  Pass pass;
  pass.tape = tape;
  pass.dropout.p = options.dropout;
  pass.dropout_seed = options.dropout_seed;
  const nn::Var hidden = run(ids, batch, {}, pass);
  // The tied head: the same wte leaf as the embedding, so its gradient gets both terms.
  const nn::Var logits =
      autograd::matmul(hidden, autograd::param(tape, embed_.wte), {.trans_b = true});
  const Tensor target_tensor = Tensor::from_ids(
      std::vector<uint32_t>(targets.begin(), targets.end()), {int64_t(targets.size())}, device_);
  return autograd::cross_entropy(logits, target_tensor, grad_scale);
}

namespace {

double mean(const Tensor& losses) {
  double sum = 0.0;
  for (float l : losses.to_floats()) sum += l;
  return sum / static_cast<double>(losses.numel());
}

}  // namespace

double Gpt2::loss(std::span<const uint32_t> ids, std::span<const uint32_t> targets,
                  int64_t batch) const {
  return mean(token_losses(ids, targets, batch, nullptr, {}, 0.0f).value());
}

double Gpt2::loss_grads(std::span<const uint32_t> ids, std::span<const uint32_t> targets,
                        int64_t batch, Gpt2Grads& grads, const LossOptions& options) const {
  const std::vector<Gpt2Parameter> params = parameters();
  if (grads.empty()) grads.resize(params.size());
  FORGE_CHECK(grads.size() == params.size(), "loss_grads: {} gradients for {} parameters",
              grads.size(), params.size());
  autograd::Tape tape;
  for (size_t i = 0; i < params.size(); ++i) tape.watch(params[i].tensor, &grads[i]);
  if (options.on_gradient_done) {
    tape.on_gradient_done([&](Tensor* grad) { options.on_gradient_done(grad - grads.data()); });
  }
  const float grad_scale = options.grad_scale / static_cast<float>(ids.size());
  const nn::Var losses = token_losses(ids, targets, batch, &tape, options, grad_scale);
  tape.backward(losses);
  return mean(losses.value());
}

Tensor Gpt2::logits_from_hidden(const Tensor& hidden) const {
  return ops::matmul(hidden, embed_.wte, {.trans_b = true});
}

ops::TopN top_probability_tensors(const Tensor& logits_row, int64_t n) {
  FORGE_CHECK(logits_row.rank() == 2 && logits_row.dim(0) == 1,
              "top_probabilities: expected one logits row [1, vocab], got {}",
              logits_row.describe());
  FORGE_CHECK(n >= 1, "top_probabilities: n must be ≥ 1, got {}", n);
  const int64_t vocab = logits_row.dim(1);
  // A causal softmax whose offset lets the single row see every column is a plain softmax.
  const Tensor probs = ops::softmax_causal(logits_row.reshape({1, 1, vocab}), vocab - 1);
  return ops::topn(probs.reshape({1, vocab}), std::min(n, vocab));
}

std::vector<TokenProbability> top_probabilities(const Tensor& logits_row, int64_t n) {
  const ops::TopN top = top_probability_tensors(logits_row, n);
  std::vector<uint32_t> ids(top.ids.numel());
  std::vector<float> values(ids.size());
  read_together(std::vector<TensorRead>{{top.ids, ids.data()}, {top.values, values.data()}});
  std::vector<TokenProbability> out;
  for (size_t i = 0; i < ids.size(); ++i) out.push_back({ids[i], values[i]});
  return out;
}

}  // namespace forge
