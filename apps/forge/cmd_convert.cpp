// forge convert: safetensors ↔ compact checkpoints, with the quantisation error it costs.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cli.h"
#include "forge/core/error.h"
#include "forge/serialization/compact.h"
#include "forge/serialization/safetensors.h"
#include "progress.h"

namespace forge::cli {
namespace {

struct ConvertArgs {
  std::string input, output, to, format = "text";
  CompactOptions compact;
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// Every tensor of a checkpoint, in file order, with how each was stored (F32, F16 in safetensors;
/// f32, q8, q4 in compact).
NamedTensors read_checkpoint(const std::string& path, CheckpointFormat format, bool quiet,
                             std::vector<std::string>* stored = nullptr) {
  const Device cpu = Device::cpu();
  NamedTensors tensors;
  ProgressLine progress("reading " + path, quiet);
  if (format == CheckpointFormat::Compact) {
    const CompactCheckpoint file = CompactCheckpoint::open(path);
    for (const std::string& name : file.names()) {
      tensors.emplace_back(name, file.read(name, cpu));
      if (stored) stored->push_back(compact_dtype_name(file.entry(name).dtype));
      progress.update(int64_t(tensors.size()), int64_t(file.names().size()), "tensors");
    }
  } else {
    const SafetensorsFile file = SafetensorsFile::open(path);
    for (const std::string& name : file.names()) {
      tensors.emplace_back(name, file.read(name, cpu));
      if (stored) stored->push_back(file.entry(name).dtype);
      progress.update(int64_t(tensors.size()), int64_t(file.names().size()), "tensors");
    }
  }
  return tensors;
}

/// "transformer.h.11.attn.c_attn.weight" → "h.N.attn.c_attn.weight": one row per kind of tensor.
std::string tensor_kind(std::string name) {
  const std::string prefix = "transformer.";
  if (name.starts_with(prefix)) name.erase(0, prefix.size());
  std::string kind, part;
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i < name.size() && name[i] != '.') {
      part += name[i];
      continue;
    }
    const bool number = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    kind += (kind.empty() ? "" : ".") + (number ? std::string("N") : part);
    part.clear();
  }
  return kind;
}

struct KindError {
  int64_t tensors = 0, elements = 0;
  std::string stored;
  double max_abs = 0, sum_abs = 0, sum_abs_value = 0;
};

/// Whether two paths name one file: the same path once normalised (d/./m, links, ..), or the
/// same inode (a hard link).
bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec) && !ec) return true;
  return fs::exists(a) && fs::exists(b) && fs::equivalent(a, b, ec);
}

void run_convert(const ConvertArgs& args) {
  // The output is written to a temporary and renamed over --output (save_* are atomic), so an
  // error never leaves it half-written; this check keeps the rename off the input.
  FORGE_CHECK(!same_file(args.input, args.output), "--input {} and --output {} are the same file",
              args.input, args.output);
  const CheckpointFormat in_format = detect_checkpoint_format(args.input);
  const NamedTensors tensors = read_checkpoint(args.input, in_format, args.format == "json");
  const CheckpointFormat out_format =
      args.to == "compact" ? CheckpointFormat::Compact : CheckpointFormat::Safetensors;
  if (out_format == CheckpointFormat::Compact) {
    save_compact(args.output, tensors, args.compact);
  } else {
    save_safetensors(args.output, tensors, {{"format", "pt"}});
  }

  // The error is measured on what the written file decodes to, not on an in-memory copy.
  std::vector<std::string> stored;
  const NamedTensors read_back =
      read_checkpoint(args.output, out_format, args.format == "json", &stored);
  FORGE_CHECK(read_back.size() == tensors.size(), "{}: reads back {} tensors, {} were written",
              args.output, read_back.size(), tensors.size());
  std::map<std::string, std::pair<Tensor, std::string>> written;
  for (size_t i = 0; i < read_back.size(); ++i)
    written.emplace(read_back[i].first, std::make_pair(read_back[i].second, stored[i]));
  std::map<std::string, KindError> kinds;
  std::vector<std::string> order;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string& name = tensors[i].first;
    const auto it = written.find(name);
    FORGE_CHECK(it != written.end(), "{}: tensor '{}' was written but does not read back",
                args.output, name);
    const std::string kind = tensor_kind(name);
    if (!kinds.count(kind)) order.push_back(kind);
    KindError& k = kinds[kind];
    k.stored = it->second.second;
    const std::vector<float> a = tensors[i].second.to_floats();
    const std::vector<float> b = it->second.first.to_floats();
    ++k.tensors;
    k.elements += static_cast<int64_t>(a.size());
    for (size_t j = 0; j < a.size(); ++j) {
      const double e = std::fabs(static_cast<double>(a[j]) - b[j]);
      k.max_abs = std::max(k.max_abs, e);
      k.sum_abs += e;
      k.sum_abs_value += std::fabs(a[j]);
    }
  }

  const uint64_t in_bytes = std::filesystem::file_size(args.input);
  const uint64_t out_bytes = std::filesystem::file_size(args.output);
  nlohmann::json out = {
      {"input",
       {{"path", args.input}, {"format", checkpoint_format_name(in_format)}, {"bytes", in_bytes}}},
      {"output",
       {{"path", args.output},
        {"format", checkpoint_format_name(out_format)},
        {"bytes", out_bytes}}},
      {"ratio", static_cast<double>(in_bytes) / static_cast<double>(out_bytes)},
      {"kinds", nlohmann::json::array()}};
  if (out_format == CheckpointFormat::Compact) {
    out["output"]["bits"] = args.compact.bits;
    out["output"]["group_size"] = args.compact.group_size;
  }
  for (const std::string& kind : order) {
    const KindError& k = kinds[kind];
    const double n = static_cast<double>(std::max<int64_t>(k.elements, 1));
    out["kinds"].push_back({{"kind", kind},
                            {"tensors", k.tensors},
                            {"elements", k.elements},
                            {"stored", k.stored},
                            {"max_abs_error", k.max_abs},
                            {"mean_abs_error", k.sum_abs / n},
                            {"mean_abs_value", k.sum_abs_value / n}});
  }
  if (args.format == "json") {
    print_json(out);
    return;
  }
  std::printf("input   %s (%s, %llu bytes)\n", args.input.c_str(),
              checkpoint_format_name(in_format), static_cast<unsigned long long>(in_bytes));
  std::printf("output  %s (%s", args.output.c_str(), checkpoint_format_name(out_format));
  if (out_format == CheckpointFormat::Compact)
    std::printf(", %d-bit, groups of %lld", args.compact.bits,
                static_cast<long long>(args.compact.group_size));
  std::printf(", %llu bytes): %.2fx smaller\n", static_cast<unsigned long long>(out_bytes),
              out["ratio"].get<double>());
  std::printf("%-28s %7s %6s %12s %12s %12s\n", "kind", "tensors", "stored", "max |err|",
              "mean |err|", "mean |x|");
  for (const auto& k : out["kinds"]) {
    std::printf("%-28s %7lld %6s %12.3e %12.3e %12.3e\n", k["kind"].get<std::string>().c_str(),
                k["tensors"].get<long long>(), k["stored"].get<std::string>().c_str(),
                k["max_abs_error"].get<double>(), k["mean_abs_error"].get<double>(),
                k["mean_abs_value"].get<double>());
  }
}

}  // namespace

void register_convert(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* cmd = app.add_subcommand(
      "convert", "convert a checkpoint between safetensors and the compact quantised format");
  cmd->add_option("--input", args->input, "checkpoint to read (safetensors or compact)")
      ->required();
  cmd->add_option("--output", args->output, "checkpoint to write (replaced atomically)")
      ->required();
  cmd->add_option("--to", args->to, "format to write: compact or safetensors")
      ->required()
      ->check(CLI::IsMember({"compact", "safetensors"}));
  cmd->add_option("--bits", args->compact.bits, "compact: bits per weight, 4 or 8")
      ->check(CLI::IsMember({4, 8}))
      ->capture_default_str();
  cmd->add_option("--group-size", args->compact.group_size,
                  "compact: weights per scale along each row")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--format", args->format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->callback([args] { run_convert(*args); });
}

}  // namespace forge::cli
