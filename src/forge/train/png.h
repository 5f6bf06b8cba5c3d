// A minimal PNG writer (8-bit RGB, zlib "stored" blocks, so no compressor is needed) and the
// loss-curve plot drawn with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace forge::train {

/// rgb holds width·height·3 bytes, rows top to bottom. The file is written atomically.
void write_png(const std::string& path, int width, int height, const std::vector<uint8_t>& rgb);

struct LossPoint {
  int64_t step;
  double loss;
};
/// Training (blue) and validation (orange) loss against step on a light grid, written as PNG.
void write_loss_plot(const std::string& path, const std::vector<LossPoint>& train,
                     const std::vector<LossPoint>& validation);

}  // namespace forge::train
