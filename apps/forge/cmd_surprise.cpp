// forge surprise: how surprised the model is by every token of a text, in bits (−log₂ p of the
// token that actually follows), with the alternatives it expected instead. One windowed
// teacher-forced pass (forge/models/gpt2/score.h); on a terminal the text comes back as a heat
// map, in a pipe as a table, and --format json has every number.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <numeric>
#include <optional>

#include "cli.h"
#include "forge/core/error.h"
#include "forge/models/gpt2/score.h"
#include "forge/serialization/file_io.h"
#include "progress.h"

namespace forge::cli {
namespace {

struct SurpriseArgs {
  CommonOptions common;
  std::string model_dir, text, file;
  int64_t top = 5;
  std::optional<int64_t> stride;  // unset: half the context
  bool no_color = false;
};

/// One scored token: where it starts in the text (bytes) and what it cost.
struct Position {
  size_t offset;
  uint32_t id;
  std::string text;
  double bits;
  std::vector<TokenProbability> top;
};

/// The heat map's colours: a 256-colour background from `from_bits` up, dark and cool for what
/// the model expected, hot for what surprised it.
struct Band {
  double from_bits;
  int colour;
};
constexpr Band kBands[] = {{0, 236}, {0.5, 238}, {1, 24},  {2, 30},  {3, 65},
                           {4, 136}, {6, 166},   {8, 160}, {12, 196}};

int band_colour(double bits) {
  int colour = kBands[0].colour;
  for (const Band& band : kBands)
    if (bits >= band.from_bits) colour = band.colour;
  return colour;
}

std::string background(int colour) {
  return fmt::format("\x1b[48;5;{}m\x1b[38;5;15m", colour);
}
constexpr const char* kReset = "\x1b[0m";

/// True when `s` ends inside a UTF-8 character (a BPE token may hold part of one), where an
/// escape sequence must not go.
bool ends_mid_character(std::string_view s) {
  size_t continuation = 0;
  for (size_t i = s.size(); i > 0 && continuation < 4; --i) {
    const auto byte = static_cast<unsigned char>(s[i - 1]);
    if ((byte & 0xC0) != 0x80) {
      const size_t length = byte < 0x80    ? 1
                            : byte >= 0xF0 ? 4
                            : byte >= 0xE0 ? 3
                            : byte >= 0xC0 ? 2
                                           : 1;
      return continuation + 1 < length;
    }
    ++continuation;
  }
  return false;
}

/// A JSON-quoted string, so newlines and other invisible characters show.
std::string json_quoted(std::string_view text) {
  return nlohmann::json(std::string(text))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

size_t count_characters(std::string_view text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

void print_heat_map(std::string_view first, const std::vector<Position>& positions) {
  std::string out(first);
  int current = -1;
  for (const Position& p : positions) {
    const int band = band_colour(p.bits);
    const std::string colour = background(band);
    if (band != current && !ends_mid_character(out)) {
      out += colour;
      current = band;
    }
    // A coloured newline would paint to the end of the line: reset across it.
    for (char c : p.text) {
      if (c == '\n') {
        out += kReset;
        out += '\n';
        out += colour;
        current = band;
      } else {
        out += c;
      }
    }
  }
  out += kReset;
  std::printf("%s\n\n", out.c_str());
  std::string legend = "bits ";
  for (size_t i = 0; i < std::size(kBands); ++i) {
    const std::string range =
        i + 1 < std::size(kBands)
            ? fmt::format(" {:g}-{:g} ", kBands[i].from_bits, kBands[i + 1].from_bits)
            : fmt::format(" {:g}+ ", kBands[i].from_bits);
    legend += background(kBands[i].colour) + range + kReset;
  }
  std::printf("%s\n", legend.c_str());
}

std::string alternatives(const Tokenizer& tokenizer, const std::vector<TokenProbability>& top) {
  std::string out;
  for (const TokenProbability& t : top) {
    if (!out.empty()) out += ' ';
    out +=
        fmt::format("{} {:.3f}", json_quoted(tokenizer.decode(std::span(&t.id, 1))), t.probability);
  }
  return out;
}

void print_table(const Tokenizer& tokenizer, const std::vector<Position>& positions) {
  std::printf("%8s %7s  %-10s %s\n", "offset", "bits", "token", "expected");
  for (const Position& p : positions)
    std::printf("%8zu %7.3f  %-10s %s\n", p.offset, p.bits, json_quoted(p.text).c_str(),
                alternatives(tokenizer, p.top).c_str());
}

/// Indices of the (up to) n highest-bit positions, most surprising first, ties by position.
std::vector<size_t> most_surprising(const std::vector<Position>& positions, size_t n) {
  std::vector<size_t> order(positions.size());
  std::iota(order.begin(), order.end(), size_t{0});
  n = std::min(n, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                    [&](size_t a, size_t b) {
                      return positions[a].bits > positions[b].bits ||
                             (positions[a].bits == positions[b].bits && a < b);
                    });
  order.resize(n);
  return order;
}

/// Up to `bytes` bytes of text before `offset`, starting on a character.
std::string_view context_before(std::string_view text, size_t offset, size_t bytes) {
  size_t begin = offset > bytes ? offset - bytes : 0;
  while (begin < offset && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) ++begin;
  return text.substr(begin, offset - begin);
}

void run_surprise(const SurpriseArgs& args) {
  FORGE_CHECK(args.text.empty() != args.file.empty(), "give exactly one of --text and --file");
  FORGE_CHECK(args.top >= 0, "--top must be ≥ 0, got {}", args.top);
  const std::string text = args.text.empty() ? read_regular_file(args.file) : args.text;
  const Device device = open_device(args.common);
  const LoadedModel loaded = load_model(args.model_dir, device, args.common.json());
  FORGE_CHECK(loaded.tokenizer != nullptr, "{} has no vocab.json, so its text cannot be read",
              args.model_dir);
  const Tokenizer& tokenizer = *loaded.tokenizer;
  const std::vector<uint32_t> ids = tokenizer.encode(text);

  SequenceScores scores;
  {
    ProgressLine progress("scoring", args.common.json());
    ScoreOptions options;
    options.stride = args.stride;
    options.top_k = args.top;
    options.on_progress = [&](int64_t done, int64_t total) {
      progress.update(done, total, "tokens");
    };
    scores = score_sequence(*loaded.model, ids, options);
  }

  const std::string first = tokenizer.decode(std::span(ids.data(), 1));
  std::vector<Position> positions;
  size_t offset = first.size();
  double total_bits = 0.0;
  for (size_t i = 0; i < scores.nll.size(); ++i) {
    Position p{offset,
               ids[i + 1],
               tokenizer.decode(std::span(&ids[i + 1], 1)),
               scores.nll[i] / std::numbers::ln2,
               {}};
    if (!scores.top.empty()) p.top = scores.top[i];
    offset += p.text.size();
    total_bits += p.bits;
    positions.push_back(std::move(p));
  }
  const size_t characters = count_characters(std::string_view(text).substr(first.size()));
  const double bits_per_char = total_bits / static_cast<double>(std::max<size_t>(characters, 1));
  const std::vector<size_t> worst = most_surprising(positions, 10);

  if (args.common.json()) {
    nlohmann::json list = nlohmann::json::array();
    for (const Position& p : positions) {
      nlohmann::json top = nlohmann::json::array();
      for (const TokenProbability& t : p.top)
        top.push_back({{"id", t.id},
                       {"text", tokenizer.decode(std::span(&t.id, 1))},
                       {"probability", t.probability}});
      list.push_back(
          {{"offset", p.offset}, {"id", p.id}, {"text", p.text}, {"bits", p.bits}, {"top", top}});
    }
    print_json({{"stride", scores.stride},
                {"windows", scores.windows},
                {"first", {{"id", ids[0]}, {"text", first}}},
                {"positions", list},
                {"tokens_scored", positions.size()},
                {"characters", characters},
                {"total_bits", total_bits},
                {"mean_bits_per_char", bits_per_char},
                {"mean_bits_per_token", total_bits / static_cast<double>(positions.size())},
                {"most_surprising", worst}});
    return;
  }

  const char* no_color = std::getenv("NO_COLOR");
  const bool color =
      !args.no_color && isatty(STDOUT_FILENO) && (no_color == nullptr || no_color[0] == '\0');
  if (color) {
    print_heat_map(first, positions);
  } else {
    print_table(tokenizer, positions);
  }
  std::printf("\nmean %.4f bits/char over %zu characters (%zu tokens, stride %lld, %lld windows)\n",
              bits_per_char, characters, positions.size(), static_cast<long long>(scores.stride),
              static_cast<long long>(scores.windows));
  std::printf("most surprising:\n%8s %7s  %-10s %-30s %s\n", "offset", "bits", "token", "after",
              "expected");
  for (size_t i : worst) {
    const Position& p = positions[i];
    std::printf("%8zu %7.3f  %-10s %-30s %s\n", p.offset, p.bits, json_quoted(p.text).c_str(),
                json_quoted(context_before(text, p.offset, 24)).c_str(),
                alternatives(tokenizer, p.top).c_str());
  }
}

}  // namespace

void register_surprise(CLI::App& app) {
  auto args = std::make_shared<SurpriseArgs>();
  CLI::App* cmd = app.add_subcommand(
      "surprise", "surprisal in bits of every token of a text, with the model's alternatives");
  add_common_options(*cmd, args->common);
  add_model_option(*cmd, args->model_dir);
  cmd->add_option("--text", args->text, "text to read");
  cmd->add_option("--file", args->file, "file whose text to read");
  cmd->add_option("--top", args->top, "alternatives shown per position (default 5)");
  cmd->add_option("--stride", args->stride,
                  "new tokens per window past the context (default half the context)");
  cmd->add_flag("--no-color", args->no_color,
                "no heat map even on a terminal (so does a non-empty NO_COLOR)");
  cmd->callback([args] { run_surprise(*args); });
}

}  // namespace forge::cli
