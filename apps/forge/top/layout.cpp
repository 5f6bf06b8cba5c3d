#include "layout.h"

#include <curses.h>
#include <fmt/format.h>
#include <langinfo.h>

#include <algorithm>
#include <clocale>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "forge/core/error.h"

namespace forge::top {
namespace {

bool g_utf8 = false;
bool g_color = false;

int attr_of(Ink ink) {
  if (!g_color) {
    switch (ink) {
      case Ink::Title:
        return A_BOLD;
      case Ink::Selected:
        return A_REVERSE;
      case Ink::Dim:
        return A_DIM;
      case Ink::Bad:
        return A_BOLD;
      default:
        return A_NORMAL;
    }
  }
  switch (ink) {
    case Ink::Normal:
      return A_NORMAL;
    case Ink::Dim:
      return A_DIM;
    case Ink::Title:
      return A_BOLD | COLOR_PAIR(1);
    case Ink::Good:
      return COLOR_PAIR(2);
    case Ink::Bad:
      return COLOR_PAIR(3) | A_BOLD;
    case Ink::Train:
      return COLOR_PAIR(4) | A_BOLD;
    case Ink::Validation:
      return COLOR_PAIR(5) | A_BOLD;
    case Ink::Selected:
      return A_REVERSE;
  }
  return A_NORMAL;
}

/// Bytes of `text` that fit in `width` columns: one column per UTF-8 character.
size_t fit(std::string_view text, int width) {
  size_t i = 0;
  for (int col = 0; i < text.size() && col < width; ++col) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t n = c < 0x80 ? 1 : c >> 5 == 6 ? 2 : c >> 4 == 14 ? 3 : c >> 3 == 30 ? 4 : 1;
    if (!g_utf8) n = 1;
    i = std::min(text.size(), i + n);
  }
  return i;
}

}  // namespace

Screen::Screen() {
  std::setlocale(LC_ALL, "");
  g_utf8 = std::strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
  FORGE_CHECK(initscr() != nullptr, "forge top needs a terminal (TERM={})",
              std::getenv("TERM") ? std::getenv("TERM") : "unset");
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);
  const char* no_color = std::getenv("NO_COLOR");
  g_color = has_colors() && !(no_color && *no_color);
  if (g_color) {
    start_color();
    use_default_colors();
    init_pair(1, COLOR_CYAN, -1);
    init_pair(2, COLOR_GREEN, -1);
    init_pair(3, COLOR_RED, -1);
    init_pair(4, COLOR_BLUE, -1);
    init_pair(5, COLOR_YELLOW, -1);
  }
}

Screen::~Screen() {
  endwin();
}
int Screen::rows() const {
  return LINES;
}
int Screen::cols() const {
  return COLS;
}

int Screen::key(int ms) const {
  timeout(ms);
  return getch();
}

std::pair<Rect, Rect> split_panes(int rows, int cols, int status_lines, double left_share,
                                  double top_share) {
  const int top = 1, h = rows - top - status_lines;
  if (cols >= kWideCols) {
    const int lw = std::max(20, int(cols * left_share));
    return {{top, 0, h, lw}, {top, lw, h, cols - lw}};
  }
  const int th = std::max(5, int(h * top_share));
  return {{top, 0, th, cols}, {top + th, 0, h - th, cols}};
}

void put(int y, int x, std::string_view text, int width, Ink ink) {
  if (width <= 0 || y < 0 || y >= LINES || x < 0 || x >= COLS) return;
  width = std::min(width, COLS - x);
  const std::string line(text.substr(0, fit(text, width)));
  attron(attr_of(ink));
  mvaddstr(y, x, line.c_str());
  attroff(attr_of(ink));
}

Rect frame(const Rect& r, std::string_view title) {
  if (r.h < 2 || r.w < 2) return {r.y, r.x, 0, 0};
  attron(attr_of(Ink::Dim));
  mvhline(r.y, r.x + 1, ACS_HLINE, r.w - 2);
  mvhline(r.y + r.h - 1, r.x + 1, ACS_HLINE, r.w - 2);
  mvvline(r.y + 1, r.x, ACS_VLINE, r.h - 2);
  mvvline(r.y + 1, r.x + r.w - 1, ACS_VLINE, r.h - 2);
  mvaddch(r.y, r.x, ACS_ULCORNER);
  mvaddch(r.y, r.x + r.w - 1, ACS_URCORNER);
  mvaddch(r.y + r.h - 1, r.x, ACS_LLCORNER);
  mvaddch(r.y + r.h - 1, r.x + r.w - 1, ACS_LRCORNER);
  attroff(attr_of(Ink::Dim));
  put(r.y, r.x + 2, fmt::format(" {} ", title), r.w - 4, Ink::Title);
  return {r.y + 1, r.x + 1, r.h - 2, r.w - 2};
}

std::string sparkline(const std::vector<double>& values, int width) {
  static const char* const kBars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  static const char kAscii[] = "_.-=+*#@";
  const size_t n = std::min(values.size(), size_t(std::max(0, width)));
  double top = 0;
  for (size_t i = values.size() - n; i < values.size(); ++i) top = std::max(top, values[i]);
  std::string out;
  for (size_t i = values.size() - n; i < values.size(); ++i) {
    const int level = top > 0 ? std::clamp(int(values[i] / top * 7.999), 0, 7) : 0;
    out += g_utf8 ? std::string(kBars[level]) : std::string(1, kAscii[level]);
  }
  return out;
}

void chart(const Rect& r, const std::vector<Series>& series, std::string_view x_label) {
  constexpr int kAxis = 8;  // columns for the y tick values
  if (r.h < 4 || r.w < kAxis + 8) return;
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const Series& s : series)
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(y)) continue;
      x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
    }
  if (!(x_lo <= x_hi)) {
    put(r.y, r.x, "(no points yet)", r.w, Ink::Dim);
    return;
  }
  if (y_hi - y_lo < 1e-9) y_lo -= 0.5, y_hi += 0.5;
  if (x_hi - x_lo < 1e-9) x_hi = x_lo + 1;
  const int plot_h = r.h - 1, plot_w = r.w - kAxis;
  for (int row = 0; row < plot_h; ++row) {
    const bool tick = row == 0 || row == plot_h - 1 || row == plot_h / 2;
    const double value = y_hi - (y_hi - y_lo) * row / std::max(1, plot_h - 1);
    put(r.y + row, r.x, tick ? fmt::format("{:>7.3f}", value) : "", kAxis - 1, Ink::Dim);
    put(r.y + row, r.x + kAxis - 1, g_utf8 ? "│" : "|", 1, Ink::Dim);
  }
  for (const Series& s : series)
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(y)) continue;
      const int col = int(std::lround((x - x_lo) / (x_hi - x_lo) * (plot_w - 1)));
      const int row = int(std::lround((y_hi - y) / (y_hi - y_lo) * (plot_h - 1)));
      put(r.y + row, r.x + kAxis + col, s.mark, 1, s.ink);
    }
  const std::string lo = fmt::format("{:.0f}", x_lo), hi = fmt::format("{:.0f} {}", x_hi, x_label);
  put(r.y + plot_h, r.x + kAxis, lo, plot_w, Ink::Dim);
  put(r.y + plot_h, r.x + r.w - int(hi.size()), hi, int(hi.size()), Ink::Dim);
}

std::string human_bytes(double bytes) {
  if (bytes >= 1e9) return fmt::format("{:.2f} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.1f} MB", bytes / 1e6);
  return fmt::format("{:.0f} kB", bytes / 1e3);
}

std::string human_count(double n) {
  if (n >= 1e9) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f} M", n / 1e6);
  return fmt::format("{:.1f} k", n / 1e3);
}

std::string human_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long t = std::lround(seconds);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, t % 3600 / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

}  // namespace forge::top
