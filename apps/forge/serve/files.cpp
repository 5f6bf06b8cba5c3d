#include "serve/files.h"

#include <algorithm>

#include "forge/core/error.h"

namespace forge::serve {
namespace {

namespace fs = std::filesystem;

fs::path canonical_directory(const std::string& dir, const char* flag) {
  std::error_code ec;
  const fs::path path = fs::canonical(dir, ec);
  FORGE_CHECK(!ec && fs::is_directory(path), "{} {}: not a directory", flag, dir);
  return path;
}

// The URL path's segments, or nothing when one could step outside its root or name a hidden
// file: checked before touching the file system, so no spelling of ".." (raw, %2e%2e,
// %2f-joined) survives; empty segments ("a//b") are refused too, a trailing '/' is kept as "".
bool split_segments(const std::string& rest, std::vector<std::string>& segments) {
  size_t begin = 0;
  while (begin <= rest.size()) {
    size_t end = rest.find('/', begin);
    if (end == std::string::npos) end = rest.size();
    std::string segment = rest.substr(begin, end - begin);
    if (segment.empty() && end != rest.size()) return false;
    if (!segment.empty() &&
        (segment[0] == '.' || segment.find_first_of(std::string("\\\0", 2)) != std::string::npos))
      return false;
    segments.push_back(std::move(segment));
    begin = end + 1;
  }
  return true;
}

// `path` when it is a regular file whose real path (every symlink followed) lies inside `root`
// (itself canonical), else empty: a symlink may point within its root, never out of it, and
// FIFOs, devices and directories are never opened.
fs::path inside(const fs::path& root, const fs::path& path) {
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  if (ec || !fs::is_regular_file(real, ec)) return {};
  const fs::path relative = real.lexically_relative(root);
  if (relative.empty() || *relative.begin() == "..") return {};
  return real;
}

// The file `name` in the model directory `dir` under `root`: a page's file, in a directory whose
// own config.json is served too.
fs::path model_file(const fs::path& root, const fs::path& dir, const std::string& name) {
  if (!is_model_file(name) || inside(root, dir / "config.json").empty()) return {};
  return inside(root, dir / name);
}

}  // namespace

bool is_model_file(const std::string& name) {
  auto ends_with = [&](const std::string& suffix) {
    return name.size() > suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return name == "config.json" || name == "vocab.json" || name == "merges.txt" ||
         ends_with(".safetensors") || ends_with(".compact");
}

FileRoots::FileRoots(const std::string& site, const std::string& model, const std::string& models)
    : site_(canonical_directory(site, "--site")),
      model_(canonical_directory(model, "--model")),
      models_(canonical_directory(models, "--models")) {}

fs::path FileRoots::resolve(const std::string& url_path) const {
  std::vector<std::string> segments;
  if (url_path.empty() || url_path[0] != '/' || !split_segments(url_path.substr(1), segments))
    return {};
  if (segments.size() == 2 && segments[0] == "model")
    return model_file(model_, model_, segments[1]);
  if (segments.size() >= 3 && segments[0] == "models") {
    fs::path dir = models_;
    for (size_t i = 1; i + 1 < segments.size(); ++i) dir /= segments[i];
    return model_file(models_, dir, segments.back());
  }
  if (segments[0] == "model" || segments[0] == "models") return {};
  fs::path path = site_;
  for (const std::string& segment : segments) path /= segment;
  std::error_code ec;
  if (segments.back().empty() || fs::is_directory(path, ec)) path /= "index.html";
  return inside(site_, path);
}

std::vector<std::string> FileRoots::model_directories() const {
  std::vector<std::string> found;
  std::error_code ec;
  // Symlinked directories are not entered: a link cycle or a link out of the root is no model.
  for (fs::recursive_directory_iterator it(models_, ec), end; !ec && it != end; it.increment(ec)) {
    if (it.depth() > 8) it.disable_recursion_pending();
    const fs::path name = it->path().filename();
    if (name.string()[0] == '.') {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (name == "config.json" && !inside(models_, it->path()).empty())
      found.push_back(it->path().parent_path().lexically_relative(models_).generic_string());
  }
  std::sort(found.begin(), found.end());
  found.erase(std::remove(found.begin(), found.end(), "."), found.end());
  return found;
}

}  // namespace forge::serve
