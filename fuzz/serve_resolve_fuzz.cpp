// forge serve's URL-path resolution (serve::FileRoots::resolve, apps/forge/serve/files.h) on
// arbitrary paths, against a tree built once under $TMPDIR that holds what must never be
// sent: a file outside every root, symlinks out of the roots, hidden files, and model-directory
// files a page does not need. A resolved path must be a regular file inside its root and, in a
// model directory, one of the files a page needs.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_check.h"
#include "serve/files.h"

namespace {

namespace fs = std::filesystem;

void touch(const fs::path& path) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << path.filename().string();
}

// The tree, removed again when the harness exits.
struct Tree {
  fs::path root;
  Tree() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp ? tmp : "/tmp") + "/forge-fuzz-serve-XXXXXX";
    FORGE_FUZZ_CHECK(::mkdtemp(pattern.data()) != nullptr, "mkdtemp");
    root = fs::canonical(pattern);
    touch(root / "secret");
    for (const char* f : {"index.html", "app.js", "sub/index.html", "sub/page.css", ".hidden"})
      touch(root / "site" / f);
    fs::create_symlink(root / "secret", root / "site/leak");
    fs::create_directory_symlink(root / "model", root / "site/model-dir");
    for (const char* f :
         {"config.json", "vocab.json", "merges.txt", "model.safetensors", "README.md", "log.csv"})
      touch(root / "model" / f);
    fs::create_symlink(root / "secret", root / "model/x.safetensors");
    for (const char* f : {"a/config.json", "a/model.compact", "a/notes.txt", "b/c/config.json",
                          "b/c/vocab.json", "nocfg/model.safetensors", ".private/config.json"})
      touch(root / "models" / f);
    fs::create_directory_symlink(root / "model", root / "models/out");
  }
  ~Tree() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

bool under(const fs::path& path, const fs::path& root) {
  const fs::path relative = path.lexically_relative(root);
  return !relative.empty() && *relative.begin() != "..";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tree tree;
  static const forge::serve::FileRoots roots((tree.root / "site").string(),
                                             (tree.root / "model").string(),
                                             (tree.root / "models").string());
  const std::string url(reinterpret_cast<const char*>(data), size);
  const fs::path file = roots.resolve(url);
  if (file.empty()) return 0;
  std::error_code ec;
  FORGE_FUZZ_CHECK(fs::is_regular_file(fs::symlink_status(file, ec)), "a regular file, no link");
  FORGE_FUZZ_CHECK(fs::canonical(file, ec) == file, "the real path");
  const std::string name = file.filename().string();
  FORGE_FUZZ_CHECK(name != "secret" && name[0] != '.', "nothing outside or hidden");
  if (under(file, roots.site())) return 0;
  FORGE_FUZZ_CHECK(under(file, roots.model()) || under(file, roots.models()),
                   "inside a served root");
  FORGE_FUZZ_CHECK(forge::serve::is_model_file(name), "only the files a page needs");
  FORGE_FUZZ_CHECK(fs::exists(file.parent_path() / "config.json"), "from a model directory");
  return 0;
}
