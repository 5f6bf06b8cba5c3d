// forge top's screen: the ncurses session (restored on every exit path), where the panes go for
// the terminal's size, and the drawing primitives the panes share (clipped text, boxes,
// sparklines, line charts). Colour follows NO_COLOR and the terminal's abilities.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace forge::top {

struct Rect {
  int y = 0, x = 0, h = 0, w = 0;
};

/// The ncurses session: initscr on construction, endwin on destruction (also when an exception
/// unwinds), so the terminal is restored however forge top ends.
class Screen {
 public:
  Screen();
  ~Screen();
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;
  int rows() const;
  int cols() const;
  /// The next key, waiting at most `ms` (-1 when none came).
  int key(int ms) const;
};

/// The smallest window forge top draws in; below it says so instead.
inline constexpr int kMinCols = 40, kMinRows = 12;
/// Below this width the panes stack vertically instead of standing side by side.
inline constexpr int kWideCols = 80;

/// The two panes of a tab under the header line and above the status lines: side by side
/// (left `left_share` of the width) on a wide terminal, stacked (top `top_share` of the
/// height) on a narrow one.
std::pair<Rect, Rect> split_panes(int rows, int cols, int status_lines, double left_share,
                                  double top_share);

enum class Ink { Normal, Dim, Title, Good, Bad, Train, Validation, Selected };

/// Text at (y, x), cut to `width` columns (UTF-8 aware).
void put(int y, int x, std::string_view text, int width, Ink ink = Ink::Normal);
/// A box with `title` in its top edge; the inside is the rect shrunk by one.
Rect frame(const Rect& r, std::string_view title);
/// `values` (newest last) as a bar per column, scaled to their maximum.
std::string sparkline(const std::vector<double>& values, int width);

struct Series {
  std::vector<std::pair<double, double>> points;  // (x, y)
  Ink ink;
  const char* mark;
};
/// A line chart of `series` in `r` with y tick values at the left and the x range below.
void chart(const Rect& r, const std::vector<Series>& series, std::string_view x_label);

/// "1.2 MB", "3.4 GB".
std::string human_bytes(double bytes);
/// "3.25 M", "124.4 M".
std::string human_count(double n);
/// "1m05s", "2h10m".
std::string human_duration(double seconds);

}  // namespace forge::top
