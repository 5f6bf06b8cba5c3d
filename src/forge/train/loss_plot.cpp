#include "forge/train/loss_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>

#include "forge/serialization/file_io.h"
#include "forge/train/font.h"
#include "forge/train/image.h"

namespace forge::train {
namespace {

constexpr int kWidth = 800, kHeight = 500;
constexpr int kLeft = 78, kRight = 24, kTop = 56, kBottom = 62;  // the plot area's margins
constexpr Rgb kWhite = {255, 255, 255}, kInk = {34, 34, 34}, kGrid = {228, 228, 228},
              kTrain = {31, 119, 180}, kValidation = {255, 127, 14};
constexpr const char* kTitle = "Training loss";
constexpr const char* kXLabel = "step";
constexpr const char* kYLabel = "loss (nats/token)";

/// Where everything goes, shared by the PNG and the SVG so they show the same plot.
struct Layout {
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  std::vector<double> x_ticks, y_ticks;
  double x_spacing = 1, y_spacing = 1;
  double px(double step) const {
    return kLeft + (step - x_lo) / (x_hi - x_lo) * (kWidth - kLeft - kRight);
  }
  double py(double loss) const {
    return kTop + (y_hi - loss) / (y_hi - y_lo) * (kHeight - kTop - kBottom);
  }
};

Layout make_layout(const std::vector<LossPoint>& train, const std::vector<LossPoint>& validation) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  int64_t last = 1;
  for (const auto* series : {&train, &validation}) {
    for (const LossPoint& p : *series) {
      if (!std::isfinite(p.loss)) continue;
      lo = std::min(lo, p.loss);
      hi = std::max(hi, p.loss);
      last = std::max(last, p.step);
    }
  }
  if (!(lo <= hi)) lo = 0, hi = 1;
  if (hi - lo < 1e-6) lo -= 0.5, hi += 0.5;
  Layout l;
  l.y_ticks = nice_ticks(lo, hi, 6);
  l.y_spacing = l.y_ticks.size() > 1 ? l.y_ticks[1] - l.y_ticks[0] : 1;
  l.y_lo = std::min(lo, l.y_ticks.front());
  l.y_hi = std::max(hi, l.y_ticks.back());
  l.x_ticks = nice_ticks(0, double(last), 8);
  l.x_spacing = l.x_ticks.size() > 1 ? l.x_ticks[1] - l.x_ticks[0] : 1;
  l.x_hi = std::max(double(last), l.x_ticks.back());
  return l;
}

void draw_png(const std::string& path, const Layout& l, const std::vector<LossPoint>& train,
              const std::vector<LossPoint>& validation) {
  Image image(kWidth, kHeight, kWhite);
  const int x0 = kLeft, x1 = kWidth - kRight, y0 = kTop, y1 = kHeight - kBottom;
  for (double t : l.x_ticks) image.line(l.px(t), y0, l.px(t), y1, kGrid);
  for (double t : l.y_ticks) image.line(x0, l.py(t), x1, l.py(t), kGrid);
  image.line(x0, y1, x1, y1, kInk);
  image.line(x0, y0, x0, y1, kInk);
  for (double t : l.x_ticks) image.line(l.px(t), y1, l.px(t), y1 + 5, kInk);
  for (double t : l.y_ticks) image.line(x0 - 5, l.py(t), x0, l.py(t), kInk);
  auto curve = [&](const std::vector<LossPoint>& s, Rgb c) {
    for (size_t i = 1; i < s.size(); ++i) {
      if (!std::isfinite(s[i - 1].loss) || !std::isfinite(s[i].loss)) continue;
      image.line(l.px(double(s[i - 1].step)), l.py(s[i - 1].loss), l.px(double(s[i].step)),
                 l.py(s[i].loss), c, 2);
    }
    if (s.size() == 1)
      image.fill_rect(int(l.px(double(s[0].step))) - 2, int(l.py(s[0].loss)) - 2,
                      int(l.px(double(s[0].step))) + 2, int(l.py(s[0].loss)) + 2, c);
  };
  curve(train, kTrain);
  curve(validation, kValidation);
  // The legend: a box in the plot's top right corner.
  const int lx = x1 - 150, ly = y0 + 10;
  image.fill_rect(lx, ly, x1 - 10, ly + 50, kWhite);
  for (int x = lx; x <= x1 - 10; ++x) image.set(x, ly, kGrid), image.set(x, ly + 50, kGrid);
  for (int y = ly; y <= ly + 50; ++y) image.set(lx, y, kGrid), image.set(x1 - 10, y, kGrid);
  image.line(lx + 10, ly + 15, lx + 40, ly + 15, kTrain, 3);
  image.line(lx + 10, ly + 35, lx + 40, ly + 35, kValidation, 3);

  const FontLookup font = find_plot_font();
  std::unique_ptr<TextRenderer> small, large;
  std::string why = font.reason;
  if (!font.path.empty()) {
    try {
      small = std::make_unique<TextRenderer>(font.path, 14);
      large = std::make_unique<TextRenderer>(font.path, 20);
    } catch (const std::exception& e) {
      small.reset();
      why = e.what();
    }
  }
  static std::atomic<bool> warned{false};
  if (!small) {
    if (!warned.exchange(true))
      std::fprintf(stderr, "forge: the PNG plots have no text (%s); the SVG beside each has\n",
                   why.c_str());
  } else {
    large->draw(image, (kWidth - large->width(kTitle)) / 2, 32, kTitle, kInk);
    for (double t : l.x_ticks) {
      const std::string s = tick_label(t, l.x_spacing);
      small->draw(image, int(l.px(t)) - small->width(s) / 2, y1 + 22, s, kInk);
    }
    for (double t : l.y_ticks) {
      const std::string s = tick_label(t, l.y_spacing);
      small->draw(image, x0 - 9 - small->width(s), int(l.py(t)) + 5, s, kInk);
    }
    small->draw(image, (x0 + x1 - small->width(kXLabel)) / 2, kHeight - 14, kXLabel, kInk);
    small->draw(image, 8, y0 - 10, kYLabel, kInk);
    small->draw(image, lx + 48, ly + 20, "train", kInk);
    small->draw(image, lx + 48, ly + 40, "validation", kInk);
  }
  write_png(path, image);
}

void write_svg(const std::string& path, const Layout& l, const std::vector<LossPoint>& train,
               const std::vector<LossPoint>& validation) {
  const int x0 = kLeft, x1 = kWidth - kRight, y0 = kTop, y1 = kHeight - kBottom;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"14\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"#fff\"/>\n"
      "<text x=\"{2}\" y=\"32\" font-size=\"20\" text-anchor=\"middle\">{3}</text>\n",
      kWidth, kHeight, kWidth / 2, kTitle);
  for (double t : l.x_ticks)
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#e4e4e4\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        l.px(t), y0, y1 + 5, y1 + 22, tick_label(t, l.x_spacing));
  for (double t : l.y_ticks)
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#e4e4e4\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        x0 - 5, l.py(t), x1, x0 - 9, l.py(t) + 5, tick_label(t, l.y_spacing));
  svg += fmt::format(
      "<path d=\"M{0} {1}V{2}H{3}\" fill=\"none\" stroke=\"#222\"/>\n"
      "<text x=\"{4}\" y=\"{5}\" text-anchor=\"middle\">{6}</text>\n"
      "<text x=\"8\" y=\"{7}\">{8}</text>\n",
      x0, y0, y1, x1, (x0 + x1) / 2, kHeight - 14, kXLabel, y0 - 10, kYLabel);
  auto curve = [&](const std::vector<LossPoint>& s, const char* colour) {
    std::string points;
    for (const LossPoint& p : s)
      if (std::isfinite(p.loss))
        points += fmt::format("{:.1f},{:.1f} ", l.px(double(p.step)), l.py(p.loss));
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                       points, colour);
  };
  curve(train, "#1f77b4");
  curve(validation, "#ff7f0e");
  const int lx = x1 - 150, ly = y0 + 10;
  svg += fmt::format(
      "<g><rect x=\"{0}\" y=\"{1}\" width=\"140\" height=\"50\" fill=\"#fff\" stroke=\"#e4e4e4\"/>"
      "<line x1=\"{2}\" y1=\"{3}\" x2=\"{4}\" y2=\"{3}\" stroke=\"#1f77b4\" stroke-width=\"3\"/>"
      "<text x=\"{5}\" y=\"{6}\">train</text>"
      "<line x1=\"{2}\" y1=\"{7}\" x2=\"{4}\" y2=\"{7}\" stroke=\"#ff7f0e\" stroke-width=\"3\"/>"
      "<text x=\"{5}\" y=\"{8}\">validation</text></g>\n</svg>\n",
      lx, ly, lx + 10, ly + 15, lx + 40, lx + 48, ly + 20, ly + 35, ly + 40);
  AtomicFileWriter file(path);
  file.write(svg.data(), svg.size());
  file.commit();
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double spacing = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    spacing = m * magnitude;
    if (spacing >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::floor(lo / spacing) * spacing; t <= hi + spacing * 0.999; t += spacing)
    ticks.push_back(std::abs(t) < spacing * 1e-9 ? 0.0 : t);
  return ticks;
}

std::string tick_label(double value, double spacing) {
  const int digits = spacing >= 1 ? 0 : int(std::ceil(-std::log10(spacing) - 1e-9));
  return fmt::format("{:.{}f}", value, digits);
}

void write_loss_plot(const std::string& png_path, const std::vector<LossPoint>& train,
                     const std::vector<LossPoint>& validation) {
  const Layout layout = make_layout(train, validation);
  draw_png(png_path, layout, train, validation);
  write_svg(std::filesystem::path(png_path).replace_extension(".svg").string(), layout, train,
            validation);
}

}  // namespace forge::train
