#include "model_pane.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

namespace forge::top {
namespace {

std::string short_dir(const std::string& dir) {
  const std::filesystem::path p(dir);
  const std::string name = p.filename().string();
  const std::string parent = p.parent_path().filename().string();
  return parent.empty() ? name : parent + "/" + name;
}

/// The last `rows` lines of `text` wrapped at `width` columns.
std::vector<std::string> wrap_tail(const std::string& text, int width, int rows) {
  std::vector<std::string> lines(1);
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      lines.emplace_back();
      continue;
    }
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80 && int(lines.back().size()) >= width)
      lines.emplace_back();
    lines.back() += c == '\t' || c == '\r' ? ' ' : c;
  }
  if (int(lines.size()) > rows) lines.erase(lines.begin(), lines.end() - rows);
  return lines;
}

void draw_tensors(const ModelSummary& m, const ModelsTab& tab, const Rect& r) {
  put(r.y, r.x, fmt::format("{:<34} {:<16} {:>5} {:>10}", "tensor", "shape", "dtype", "bytes"), r.w,
      Ink::Title);
  const size_t first = std::min(tab.tensor_scroll, m.tensors.empty() ? 0 : m.tensors.size() - 1);
  for (int row = 1; row < r.h && first + size_t(row - 1) < m.tensors.size(); ++row) {
    const TensorSummary& t = m.tensors[first + size_t(row - 1)];
    put(r.y + row, r.x,
        fmt::format("{:<34} {:<16} {:>5} {:>10}", t.name, t.shape.str(), t.dtype, t.bytes), r.w);
  }
}

}  // namespace

std::vector<double> rate_buckets(const std::vector<double>& token_times_s) {
  if (token_times_s.empty()) return {};
  constexpr double kBucket = 0.25;
  const double t0 = token_times_s.front();
  std::vector<double> buckets(size_t((token_times_s.back() - t0) / kBucket) + 1, 0.0);
  for (double t : token_times_s) buckets[size_t((t - t0) / kBucket)] += 1.0 / kBucket;
  return buckets;
}

void draw_model_list(const std::vector<ScanEntry>& entries, bool scanning, const ModelsTab& tab,
                     const Rect& area) {
  const Rect in =
      frame(area, fmt::format("models ({}{})", entries.size(), scanning ? ", scanning" : ""));
  if (in.h <= 0) return;
  if (entries.empty()) {
    put(in.y, in.x, scanning ? "scanning..." : "no models found (use --path DIR)", in.w, Ink::Dim);
    return;
  }
  const size_t first = tab.selected >= size_t(in.h) ? tab.selected - size_t(in.h) + 1 : 0;
  for (int row = 0; row < in.h && first + size_t(row) < entries.size(); ++row) {
    const size_t i = first + size_t(row);
    const ScanEntry& e = entries[i];
    std::string right;
    if (e.summary) {
      right =
          fmt::format("{:>9} {}", human_count(double(e.summary->parameters)), e.summary->precision);
    } else {
      right = "  error";
    }
    const int name_w = std::max(1, in.w - int(right.size()) - 1);
    std::string line = fmt::format("{:<{}.{}} {}", short_dir(e.dir), name_w, name_w, right);
    put(in.y + row, in.x, line, in.w,
        i == tab.selected ? Ink::Selected
        : e.summary       ? Ink::Normal
                          : Ink::Bad);
  }
}

void draw_model_detail(const ScanEntry* entry, const ModelsTab& tab, const GenerationView& run,
                       const Rect& area) {
  // The details (at most 10 lines) on top, the generation pane below.
  const int detail_h = std::min(area.h / 2, 10);
  const Rect info =
      frame({area.y, area.x, detail_h, area.w}, tab.show_tensors ? "tensors" : "model");
  if (info.h > 0 && entry) {
    if (!entry->summary) {
      put(info.y, info.x, entry->dir, info.w);
      const std::vector<std::string> lines = wrap_tail(entry->error, info.w, info.h - 1);
      for (size_t i = 0; i < lines.size(); ++i)
        put(info.y + 1 + int(i), info.x, lines[i], info.w, Ink::Bad);
    } else if (tab.show_tensors) {
      draw_tensors(*entry->summary, tab, info);
    } else {
      const ModelSummary& m = *entry->summary;
      const std::vector<std::string> lines = {
          m.dir,
          fmt::format("parameters {} ({})", m.parameters, human_count(double(m.parameters))),
          fmt::format("shape      {} layers x {} heads x {} wide", m.config.n_layer,
                      m.config.n_head, m.config.n_embd),
          fmt::format("context    {}  vocabulary {} ({})", m.config.n_ctx, m.config.vocab_size,
                      m.tokenizer),
          fmt::format("on disk    {} ({} {}, {} tensors)", human_bytes(double(m.size_bytes)),
                      m.container, m.precision, m.tensors.size()),
      };
      for (size_t i = 0; i < lines.size() && int(i) < info.h; ++i)
        put(info.y + int(i), info.x, lines[i], info.w);
    }
  }
  const Rect gen_area{area.y + detail_h, area.x, area.h - detail_h, area.w};
  const Rect g = frame(gen_area, "generate (" + tab.backend + ")");
  if (g.h <= 0) return;
  put(g.y, g.x, "prompt> " + tab.prompt + (tab.editing_prompt ? "_" : ""), g.w,
      tab.editing_prompt ? Ink::Selected : Ink::Normal);
  std::string status = phase_name(run.phase);
  if (run.phase != RunPhase::Idle) {
    status += fmt::format("  {} tokens  {:.1f} tok/s ", run.tokens, run.tokens_per_s);
    status += sparkline(rate_buckets(run.token_times_s), 16);
    status += fmt::format("  TTFT {:.0f} ms  load {:.2f} s", run.ttft_s * 1e3, run.load_s);
  }
  put(g.y + 1, g.x, status, g.w, run.phase == RunPhase::Failed ? Ink::Bad : Ink::Good);
  put(g.y + 2, g.x, run.device.empty() ? "" : "device " + run.device, g.w, Ink::Dim);
  const std::string body = run.phase == RunPhase::Failed ? run.error : run.text;
  const std::vector<std::string> lines = wrap_tail(body, g.w, g.h - 3);
  for (size_t i = 0; i < lines.size(); ++i) put(g.y + 3 + int(i), g.x, lines[i], g.w);
}

void draw_metrics(const Metrics& m, int y, int width) {
  std::string line = fmt::format("process CPU {:.0f}%  memory {}  ", m.cpu_percent,
                                 human_bytes(double(m.rss_bytes)));
  line +=
      m.gpu ? fmt::format("GPU {} {}%  {} / {}", m.gpu_name, m.gpu_util_percent,
                          human_bytes(double(m.gpu_mem_used)), human_bytes(double(m.gpu_mem_total)))
            : "GPU: " + m.gpu_note;
  put(y, 0, line, width, Ink::Dim);
}

}  // namespace forge::top
