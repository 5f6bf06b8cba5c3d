// The training-loss plot forge train writes: a PNG (libpng, FreeType text) and an SVG beside it
// with the same layout: a title, both axes with tick values and units (step; nats/token), a
// grid, and a legend naming the training and validation curves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace forge::train {

struct LossPoint {
  int64_t step;
  double loss;
};

/// Ticks at 1, 2 or 5 × 10^k covering [lo, hi], about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target);
/// A tick's label: as few digits as its spacing needs.
std::string tick_label(double value, double spacing);

/// Writes `png_path` and the SVG beside it (the same name ending in .svg). Without a font (see
/// find_plot_font) the PNG is drawn without text and a warning says so once; the SVG always has it.
void write_loss_plot(const std::string& png_path, const std::vector<LossPoint>& train,
                     const std::vector<LossPoint>& validation);

}  // namespace forge::train
