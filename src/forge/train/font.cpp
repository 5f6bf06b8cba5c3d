#include "forge/train/font.h"

#include <fontconfig/fontconfig.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

namespace forge::train {
namespace {

struct PatternDeleter {
  void operator()(FcPattern* p) const { FcPatternDestroy(p); }
};
using Pattern = std::unique_ptr<FcPattern, PatternDeleter>;

}  // namespace

FontLookup find_plot_font() {
  if (const char* env = std::getenv("FORGE_FONT"); env && *env) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(env, ec)) return {env, ""};
    return {"", std::string("FORGE_FONT=") + env + " is not a file"};
  }
  FcConfig* config = FcInitLoadConfigAndFonts();
  if (!config) return {"", "fontconfig could not load its configuration"};
  const std::unique_ptr<FcConfig, decltype(&FcConfigDestroy)> owned(config, FcConfigDestroy);
  Pattern pattern(FcNameParse(reinterpret_cast<const FcChar8*>("DejaVu Sans:style=Book")));
  FcConfigSubstitute(config, pattern.get(), FcMatchPattern);
  FcDefaultSubstitute(pattern.get());
  FcResult result = FcResultNoMatch;
  const Pattern match(FcFontMatch(config, pattern.get(), &result));
  FcChar8* file = nullptr;
  if (!match || FcPatternGetString(match.get(), FC_FILE, 0, &file) != FcResultMatch || !file)
    return {"", "fontconfig found no font (install fonts-dejavu-core or set FORGE_FONT)"};
  return {reinterpret_cast<const char*>(file), ""};
}

}  // namespace forge::train
