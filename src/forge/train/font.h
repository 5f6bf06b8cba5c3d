// The font plots are lettered with, found at run time: $FORGE_FONT when set, else fontconfig's
// best match for "DejaVu Sans" (Debian's fonts-dejavu-core). No font is not an error: the caller
// gets the reason and draws without text.
#pragma once

#include <string>

namespace forge::train {

struct FontLookup {
  std::string path;    // empty when none was found
  std::string reason;  // why none was found
};
FontLookup find_plot_font();

}  // namespace forge::train
