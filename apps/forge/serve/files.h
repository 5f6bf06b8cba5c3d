// Which files `forge serve` may send: the site, the --model directory and every model directory
// under the --models root, each confined to its root and, for models, to the files a page needs.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace forge::serve {

/// The served roots, made canonical once at start so every request compares real paths.
class FileRoots {
 public:
  /// Each directory must exist; errors name the flag.
  FileRoots(const std::string& site, const std::string& model, const std::string& models);

  /// The file a URL path (percent-decoded, starting with '/') names, or empty when none may be
  /// sent: "/model/<file>" is the --model directory, "/models/<dir…>/<file>" a model directory
  /// under the --models root, anything else the site (a directory means its index.html).
  std::filesystem::path resolve(const std::string& url_path) const;

  /// Relative paths ("council/expert-0") of every model directory (one holding config.json)
  /// under the --models root, sorted.
  std::vector<std::string> model_directories() const;

  const std::filesystem::path& site() const { return site_; }
  const std::filesystem::path& model() const { return model_; }
  const std::filesystem::path& models() const { return models_; }

 private:
  std::filesystem::path site_, model_, models_;
};

/// Whether a model directory may serve a file of this name: config.json, vocab.json, merges.txt
/// and checkpoints (*.safetensors, *.compact). READMEs, logs and training state stay private.
bool is_model_file(const std::string& name);

}  // namespace forge::serve
