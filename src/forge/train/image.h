// An RGB canvas for plots: lines, rectangles, text rasterised by FreeType, written as PNG by
// libpng. Coordinates are pixels from the top left.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace forge::train {

using Rgb = std::array<uint8_t, 3>;

class Image {
 public:
  Image(int width, int height, Rgb background);
  int width() const { return width_; }
  int height() const { return height_; }
  const std::vector<uint8_t>& pixels() const { return rgb_; }  // rows top to bottom

  void set(int x, int y, Rgb c);
  void fill_rect(int x0, int y0, int x1, int y1, Rgb c);  // inclusive corners
  /// A line `thickness` pixels wide.
  void line(double x0, double y0, double x1, double y1, Rgb c, int thickness = 1);
  /// Blends `c` at `coverage` ∈ [0, 255] over the pixel.
  void blend(int x, int y, Rgb c, int coverage);

 private:
  int width_, height_;
  std::vector<uint8_t> rgb_;
};

/// Writes `image` as an 8-bit RGB PNG, atomically.
void write_png(const std::string& path, const Image& image);

/// Text in one font at one pixel size. Every glyph is drawn by FreeType with anti-aliasing.
class TextRenderer {
 public:
  /// Throws forge::Error naming the file when FreeType cannot open it as a font.
  TextRenderer(const std::string& font_path, int pixel_size);
  ~TextRenderer();
  TextRenderer(const TextRenderer&) = delete;
  TextRenderer& operator=(const TextRenderer&) = delete;

  /// The advance width of `text` (ASCII / Latin-1 code points) in pixels.
  int width(const std::string& text) const;
  int ascent() const;
  /// Draws `text` with its baseline at y, starting at x.
  void draw(Image& image, int x, int y, const std::string& text, Rgb c) const;

 private:
  struct Face;
  std::unique_ptr<Face> face_;
};

}  // namespace forge::train
