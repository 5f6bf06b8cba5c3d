// forge top's models tab: the scanner's list, the selected model's details (or its tensors),
// and the generation pane with live throughput and the machine's load.
#pragma once

#include <string>
#include <vector>

#include "generation.h"
#include "layout.h"
#include "metrics.h"
#include "scanner.h"

namespace forge::top {

struct ModelsTab {
  size_t selected = 0;
  bool show_tensors = false;
  size_t tensor_scroll = 0;
  std::string prompt = "The ";
  std::string backend = "cpu";
  bool editing_prompt = false;
};

/// The list of models found (`scanning`: the walk goes on) in `area`.
void draw_model_list(const std::vector<ScanEntry>& entries, bool scanning, const ModelsTab& tab,
                     const Rect& area);
/// The selected entry's details, or its tensors, above the generation pane, in `area`.
void draw_model_detail(const ScanEntry* entry, const ModelsTab& tab, const GenerationView& run,
                       const Rect& area);
/// One status line: the process's CPU and memory and, through NVML, the GPU's.
void draw_metrics(const Metrics& m, int y, int width);

/// Tokens per second in each 250 ms since the run's first token, for the sparkline.
std::vector<double> rate_buckets(const std::vector<double>& token_times_s);

}  // namespace forge::top
