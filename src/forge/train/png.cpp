#include "forge/train/png.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "forge/core/error.h"
#include "forge/serialization/file_io.h"

namespace forge::train {
namespace {

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc = 0) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t adler32(const std::vector<uint8_t>& data) {
  uint32_t a = 1, b = 0;
  for (uint8_t byte : data) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  return (b << 16) | a;
}

void put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

void chunk(std::vector<uint8_t>& png, const char* type, const std::vector<uint8_t>& body) {
  put32(png, static_cast<uint32_t>(body.size()));
  const size_t start = png.size();
  png.insert(png.end(), type, type + 4);
  png.insert(png.end(), body.begin(), body.end());
  put32(png, crc32(png.data() + start, png.size() - start));
}

}  // namespace

void write_png(const std::string& path, int width, int height, const std::vector<uint8_t>& rgb) {
  FORGE_CHECK(width > 0 && height > 0 && rgb.size() == size_t(width) * height * 3,
              "write_png {}: {} bytes for a {}×{} RGB image", path, rgb.size(), width, height);
  // Scanlines, each behind filter byte 0 (none).
  std::vector<uint8_t> raw;
  raw.reserve((size_t(width) * 3 + 1) * height);
  for (int y = 0; y < height; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), rgb.begin() + size_t(y) * width * 3,
               rgb.begin() + size_t(y + 1) * width * 3);
  }
  // zlib: header 78 01, stored deflate blocks of ≤ 65535 bytes, Adler-32 of the raw data.
  std::vector<uint8_t> z = {0x78, 0x01};
  for (size_t at = 0; at < raw.size() || at == 0; at += 65535) {
    const size_t len = std::min<size_t>(65535, raw.size() - at);
    z.push_back(at + len == raw.size() ? 1 : 0);
    z.push_back(len & 0xFF);
    z.push_back(len >> 8);
    z.push_back(~len & 0xFF);
    z.push_back((~len >> 8) & 0xFF);
    z.insert(z.end(), raw.begin() + at, raw.begin() + at + len);
    if (at + len == raw.size()) break;
  }
  put32(z, adler32(raw));

  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<uint8_t> ihdr;
  put32(ihdr, width);
  put32(ihdr, height);
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8-bit, RGB, deflate, adaptive filter, no interlace
  chunk(png, "IHDR", ihdr);
  chunk(png, "IDAT", z);
  chunk(png, "IEND", {});
  AtomicFileWriter file(path);
  file.write(png.data(), png.size());
  file.commit();
}

void write_loss_plot(const std::string& path, const std::vector<LossPoint>& train,
                     const std::vector<LossPoint>& validation) {
  constexpr int kW = 640, kH = 400, kMargin = 30;
  std::vector<uint8_t> rgb(size_t(kW) * kH * 3, 255);
  auto dot = [&](int x, int y, std::array<uint8_t, 3> c) {
    if (x < 0 || y < 0 || x >= kW || y >= kH) return;
    std::copy(c.begin(), c.end(), rgb.begin() + (size_t(y) * kW + x) * 3);
  };
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
  if (hi - lo < 1e-9) hi = lo + 1;
  const int plot_w = kW - 2 * kMargin, plot_h = kH - 2 * kMargin;
  auto px = [&](int64_t step) { return kMargin + int(double(step) / double(last) * plot_w); };
  auto py = [&](double loss) { return kMargin + int((hi - loss) / (hi - lo) * plot_h); };
  for (int i = 0; i <= 10; ++i) {  // grid: ten divisions each way
    for (int x = kMargin; x <= kMargin + plot_w; ++x)
      dot(x, kMargin + plot_h * i / 10, {225, 225, 225});
    for (int y = kMargin; y <= kMargin + plot_h; ++y)
      dot(kMargin + plot_w * i / 10, y, {225, 225, 225});
  }
  auto line = [&](const std::vector<LossPoint>& series, std::array<uint8_t, 3> c) {
    for (size_t i = 1; i < series.size(); ++i) {
      const int x0 = px(series[i - 1].step), y0 = py(series[i - 1].loss);
      const int x1 = px(series[i].step), y1 = py(series[i].loss);
      const int n = std::max({std::abs(x1 - x0), std::abs(y1 - y0), 1});
      for (int k = 0; k <= n; ++k) {
        const int x = x0 + (x1 - x0) * k / n, y = y0 + (y1 - y0) * k / n;
        dot(x, y, c);
        dot(x, y + 1, c);
      }
    }
  };
  line(train, {31, 119, 180});
  line(validation, {255, 127, 14});
  write_png(path, kW, kH, rgb);
}

}  // namespace forge::train
