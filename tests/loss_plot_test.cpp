// The training plot a person reads: a PNG of the documented size with text drawn in the title,
// tick and legend regions, and an SVG beside it with the same tick labels, units and legend.
#include "forge/train/loss_plot.h"

#include <gtest/gtest.h>
#include <png.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "forge/serialization/file_io.h"
#include "forge/train/font.h"

namespace forge {
namespace {
namespace fs = std::filesystem;

struct Decoded {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  bool dark(int x, int y) const {  // ink, not background, grid or the light legend box
    const uint8_t* p = &rgb[(size_t(y) * size_t(width) + size_t(x)) * 3];
    return p[0] < 128 && p[1] < 128 && p[2] < 128;
  }
  int dark_in(int x0, int y0, int x1, int y1) const {
    int n = 0;
    for (int y = y0; y < y1; ++y)
      for (int x = x0; x < x1; ++x) n += dark(x, y);
    return n;
  }
};

Decoded read_png(const std::string& path) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  EXPECT_TRUE(png_image_begin_read_from_file(&image, path.c_str())) << image.message;
  image.format = PNG_FORMAT_RGB;
  Decoded d;
  d.width = int(image.width);
  d.height = int(image.height);
  d.rgb.resize(PNG_IMAGE_SIZE(image));
  EXPECT_TRUE(png_image_finish_read(&image, nullptr, d.rgb.data(), 0, nullptr)) << image.message;
  return d;
}

std::vector<train::LossPoint> curve(int n, double from, double to) {
  std::vector<train::LossPoint> out;
  for (int i = 1; i <= n; ++i) out.push_back({i * 10, from + (to - from) * i / n});
  return out;
}

TEST(LossPlot, NiceTicksCoverTheRangeAtRoundValues) {
  EXPECT_EQ(train::nice_ticks(0, 1000, 8), (std::vector<double>{0, 200, 400, 600, 800, 1000}));
  const std::vector<double> y = train::nice_ticks(1.23, 3.9, 6);
  ASSERT_GE(y.size(), 3u);
  EXPECT_LE(y.front(), 1.23);
  EXPECT_GE(y.back(), 3.9 - 1e-9);
  EXPECT_EQ(train::tick_label(2.5, 0.5), "2.5");
  EXPECT_EQ(train::tick_label(400, 200), "400");
}

TEST(LossPlot, PngHasTextInTheAxisRegionsAndTheSvgHasLabelsAndLegend) {
  ASSERT_FALSE(train::find_plot_font().path.empty())
      << "no font: " << train::find_plot_font().reason << " (scripts/setup.sh installs one)";
  const fs::path dir =
      fs::temp_directory_path() / ("forge_loss_plot_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string png = (dir / "loss.png").string();
  const auto train_curve = curve(50, 4.2, 1.6), val_curve = curve(5, 4.0, 1.9);
  train::write_loss_plot(png, train_curve, val_curve);

  const Decoded d = read_png(png);
  ASSERT_EQ(d.width, 800);
  ASSERT_EQ(d.height, 500);
  // Plot area: x 78..776, y 56..438 (loss_plot.cpp's margins).
  EXPECT_GT(d.dark_in(0, 56, 70, 438), 150) << "y tick labels";
  EXPECT_GT(d.dark_in(78, 446, 776, 500), 150) << "x tick labels and the axis label";
  EXPECT_GT(d.dark_in(200, 0, 600, 40), 100) << "title";
  EXPECT_GT(d.dark_in(650, 66, 766, 116), 60) << "legend";
  // A blank region stays blank: the text is where the layout puts it, not everywhere.
  EXPECT_EQ(d.dark_in(90, 70, 300, 90), 0);

  ASSERT_TRUE(fs::exists(dir / "loss.svg")) << "no SVG beside the PNG";
  const std::string svg = read_regular_file(dir / "loss.svg");
  for (const char* text : {">Training loss<", ">train<", ">validation<", ">step<", "nats/token",
                           ">0<", ">500<", ">2.0<", ">4.0<"})
    EXPECT_NE(svg.find(text), std::string::npos) << text << " missing from the SVG";
  fs::remove_all(dir);
}

TEST(LossPlot, AMissingFontStillWritesBothFiles) {
  const fs::path dir =
      fs::temp_directory_path() / ("forge_loss_plot_nofont_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  setenv("FORGE_FONT", (dir / "missing.ttf").c_str(), 1);
  EXPECT_NE(train::find_plot_font().reason.find("is not a file"), std::string::npos);
  train::write_loss_plot((dir / "loss.png").string(), curve(5, 3, 2), {});
  unsetenv("FORGE_FONT");
  const Decoded d = read_png((dir / "loss.png").string());
  EXPECT_EQ(d.width, 800);
  // Without text the regions the other test finds ink in are empty: it measures the text.
  EXPECT_EQ(d.dark_in(0, 56, 70, 438), 0);
  EXPECT_EQ(d.dark_in(200, 0, 600, 40), 0);
  EXPECT_TRUE(fs::exists(dir / "loss.svg"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace forge
