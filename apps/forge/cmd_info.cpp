// forge info: what a model holds and which backends this machine offers.
#include <cstdio>
#include <filesystem>

#include "cli.h"
#include "forge/backend/webgpu/dawn_loader.h"
#include "forge/backend/webgpu/webgpu_backend.h"
#include "forge/models/gpt2/config.h"
#include "forge/serialization/compact.h"

namespace forge::cli {
namespace {

struct InfoArgs {
  CommonOptions common;
  std::string model_dir;
};

nlohmann::json backends_json(const CommonOptions& common) {
  CommonOptions cpu = common;
  cpu.backend = "cpu";
  nlohmann::json list = nlohmann::json::array();
  list.push_back({{"backend", "cpu"}, {"name", open_device(cpu).name()}});
  std::string why;
  if (!webgpu_available(&why)) {
    list.push_back({{"backend", "webgpu"}, {"name", "unavailable"}, {"reason", why}});
    return list;
  }
  const gpu::DawnProcs& dawn = gpu::dawn();
  for (const gpu::AdapterInfo& a : webgpu_adapters()) {
    list.push_back({{"backend", "webgpu"},
                    {"name", a.name},
                    {"library", dawn.path},
                    {"index", a.index},
                    {"api", a.backend},
                    {"type", a.type},
                    {"vendor", a.vendor},
                    {"subgroup_size", {a.subgroup_min, a.subgroup_max}},
                    {"limits",
                     {{"max_storage_binding", a.limits.max_storage_binding},
                      {"max_buffer", a.limits.max_buffer},
                      {"max_workgroup_storage", a.limits.max_workgroup_storage},
                      {"max_invocations", a.limits.max_invocations},
                      {"max_workgroups_per_dim", a.limits.max_workgroups_per_dim},
                      {"max_storage_buffers_per_stage", a.limits.max_storage_buffers_per_stage},
                      {"min_storage_offset_alignment", a.limits.min_storage_offset_alignment}}},
                    {"features", a.features}});
  }
  return list;
}

void run_info(const InfoArgs& args) {
  nlohmann::json out = {{"backends", backends_json(args.common)}};
  // Which of the places the shipped default model was found in (cli.h's find_tree_dir).
  const bool default_model_used = args.model_dir == default_model().path;
  const std::string found = default_model_used && !default_model().found.empty()
                                ? "  (the default, found " + default_model().found + ")"
                                : "";
  if (std::filesystem::exists(args.model_dir + "/config.json")) {
    const Gpt2Config c = Gpt2Config::from_json_file(args.model_dir + "/config.json");
    const LoadedModel loaded = load_model(args.model_dir, Device::cpu(), args.common.json());
    const std::string weights = Gpt2::checkpoint_path(args.model_dir);
    out["model"] = {{"dir", args.model_dir},
                    {"parameters", loaded.model->num_parameters()},
                    {"n_layer", c.n_layer},
                    {"n_head", c.n_head},
                    {"n_embd", c.n_embd},
                    {"n_ctx", c.n_ctx},
                    {"vocab_size", c.vocab_size},
                    {"size_bytes", std::filesystem::file_size(weights)},
                    {"format", checkpoint_format_name(detect_checkpoint_format(weights))},
                    {"tokenizer", loaded.tokenizer ? loaded.tokenizer->kind() : "none"}};
    if (default_model_used) out["model"]["found"] = default_model().found;
  }
  if (args.common.json()) {
    print_json(out);
    return;
  }
  if (out.contains("model")) {
    const auto& m = out["model"];
    std::printf("model      %s%s\n", args.model_dir.c_str(), found.c_str());
    std::printf("parameters %lld\n", m["parameters"].get<long long>());
    std::printf("shape      %lld layers, %lld heads, %lld wide, context %lld, vocabulary %lld\n",
                m["n_layer"].get<long long>(), m["n_head"].get<long long>(),
                m["n_embd"].get<long long>(), m["n_ctx"].get<long long>(),
                m["vocab_size"].get<long long>());
    std::printf("on disk    %.2f MB (%s)\n", m["size_bytes"].get<double>() / 1e6,
                m["format"].get<std::string>().c_str());
    std::printf("tokenizer  %s\n", m["tokenizer"].get<std::string>().c_str());
  } else if (default_model_used) {
    std::printf("model      (none: models/forge-char is in none of:%s)\n",
                default_model().tried.c_str());
  } else {
    std::printf("model      (none at %s)\n", args.model_dir.c_str());
  }
  for (const auto& b : out["backends"]) {
    std::printf("backend    %s: %s\n", b["backend"].get<std::string>().c_str(),
                b["name"].get<std::string>().c_str());
    if (b.contains("reason"))
      std::printf("           %s\n", b["reason"].get<std::string>().c_str());
    if (b.contains("library"))
      std::printf("           Dawn %s\n", b["library"].get<std::string>().c_str());
    if (b.contains("limits")) {
      std::printf("           #%d %s %s, subgroups %u-%u\n", b["index"].get<int>(),
                  b["api"].get<std::string>().c_str(), b["type"].get<std::string>().c_str(),
                  b["subgroup_size"][0].get<unsigned>(), b["subgroup_size"][1].get<unsigned>());
      for (const auto& [key, value] : b["limits"].items()) {
        std::printf("           %s %s\n", key.c_str(), value.dump().c_str());
      }
      std::string features;
      for (const auto& f : b["features"]) features += f.get<std::string>() + " ";
      std::printf("           features: %s\n", features.c_str());
    }
  }
}

}  // namespace

void register_info(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand("info", "model parameters, size and available backends");
  add_common_options(*cmd, args->common);
  add_model_option(*cmd, args->model_dir);
  cmd->callback([args] { run_info(*args); });
}

}  // namespace forge::cli
