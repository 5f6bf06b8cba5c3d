#include "forge/train/image.h"

#include <ft2build.h>
#include FT_FREETYPE_H
#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "forge/core/error.h"
#include "forge/serialization/file_io.h"

namespace forge::train {

Image::Image(int width, int height, Rgb background) : width_(width), height_(height) {
  FORGE_CHECK(width > 0 && height > 0, "an image of {}×{} pixels", width, height);
  rgb_.resize(size_t(width) * size_t(height) * 3);
  for (size_t i = 0; i < rgb_.size(); i += 3)
    std::copy(background.begin(), background.end(), &rgb_[i]);
}

void Image::set(int x, int y, Rgb c) {
  blend(x, y, c, 255);
}

void Image::blend(int x, int y, Rgb c, int coverage) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_ || coverage <= 0) return;
  uint8_t* p = &rgb_[(size_t(y) * size_t(width_) + size_t(x)) * 3];
  const int a = std::min(coverage, 255);
  for (int k = 0; k < 3; ++k) p[k] = static_cast<uint8_t>((c[k] * a + p[k] * (255 - a)) / 255);
}

void Image::fill_rect(int x0, int y0, int x1, int y1, Rgb c) {
  for (int y = std::max(0, y0); y <= std::min(height_ - 1, y1); ++y)
    for (int x = std::max(0, x0); x <= std::min(width_ - 1, x1); ++x) set(x, y, c);
}

void Image::line(double x0, double y0, double x1, double y1, Rgb c, int thickness) {
  const int n = std::max(1, int(std::ceil(std::max(std::abs(x1 - x0), std::abs(y1 - y0)))));
  const int lo = -(thickness - 1) / 2, hi = thickness / 2;
  for (int k = 0; k <= n; ++k) {
    const double t = double(k) / n;
    const int x = int(std::lround(x0 + (x1 - x0) * t)), y = int(std::lround(y0 + (y1 - y0) * t));
    for (int dy = lo; dy <= hi; ++dy)
      for (int dx = lo; dx <= hi; ++dx) set(x + dx, y + dy, c);
  }
}

void write_png(const std::string& path, const Image& image) {
  // libpng writes to a FILE*; the bytes go to memory first, so the file appears atomically.
  // Everything with a destructor exists before setjmp, so libpng's longjmp skips none.
  std::vector<uint8_t> bytes;
  std::vector<png_bytep> rows(size_t(image.height()));
  for (int y = 0; y < image.height(); ++y)
    rows[size_t(y)] =
        const_cast<png_bytep>(image.pixels().data() + size_t(y) * size_t(image.width()) * 3);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  FORGE_CHECK(png != nullptr, "{}: libpng could not start", path);
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    fail("{}: libpng failed to encode the image", path);
  }
  png_set_write_fn(
      png, &bytes,
      [](png_structp p, png_bytep data, png_size_t n) {
        auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(p));
        out->insert(out->end(), data, data + n);
      },
      nullptr);
  png_set_IHDR(png, info, uint32_t(image.width()), uint32_t(image.height()), 8, PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_rows(png, info, rows.data());
  png_write_png(png, info, PNG_TRANSFORM_IDENTITY, nullptr);
  png_destroy_write_struct(&png, &info);
  AtomicFileWriter file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

struct TextRenderer::Face {
  FT_Library library = nullptr;
  FT_Face face = nullptr;
  ~Face() {
    if (face) FT_Done_Face(face);
    if (library) FT_Done_FreeType(library);
  }
};

TextRenderer::TextRenderer(const std::string& font_path, int pixel_size)
    : face_(std::make_unique<Face>()) {
  FORGE_CHECK(FT_Init_FreeType(&face_->library) == 0, "FreeType could not start");
  FORGE_CHECK(FT_New_Face(face_->library, font_path.c_str(), 0, &face_->face) == 0,
              "{}: FreeType cannot read this as a font", font_path);
  FORGE_CHECK(FT_Set_Pixel_Sizes(face_->face, 0, FT_UInt(pixel_size)) == 0,
              "{}: cannot be set to {} pixels", font_path, pixel_size);
}

TextRenderer::~TextRenderer() = default;

int TextRenderer::ascent() const {
  return int(face_->face->size->metrics.ascender >> 6);
}

int TextRenderer::width(const std::string& text) const {
  int w = 0;
  for (unsigned char ch : text) {
    if (FT_Load_Char(face_->face, ch, FT_LOAD_DEFAULT) == 0)
      w += int(face_->face->glyph->advance.x >> 6);
  }
  return w;
}

void TextRenderer::draw(Image& image, int x, int y, const std::string& text, Rgb c) const {
  for (unsigned char ch : text) {
    if (FT_Load_Char(face_->face, ch, FT_LOAD_RENDER) != 0) continue;
    const FT_GlyphSlot g = face_->face->glyph;
    const FT_Bitmap& b = g->bitmap;
    for (unsigned row = 0; row < b.rows; ++row)
      for (unsigned col = 0; col < b.width; ++col)
        image.blend(x + g->bitmap_left + int(col), y - g->bitmap_top + int(row), c,
                    b.buffer[row * unsigned(b.pitch) + col]);
    x += int(g->advance.x >> 6);
  }
}

}  // namespace forge::train
