#include "forge/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <queue>

#include "forge/core/error.h"
#include "forge/tokenizer/pretokenizer.h"
#include "forge/tokenizer/utf8.h"
#include "forge/tokenizer/vocab_file.h"

namespace forge {
namespace {

// Pieces longer than this merge through a heap (O(n log n)) instead of rescanning every pair
// after each merge (O(n²), but faster for the short pieces real text is made of).
constexpr size_t kShortPiece = 64;

// Up to 8 bytes as a little-endian word, zero above: without a variable-length memcpy.
uint64_t load_head(const char* p, size_t n) {
  uint64_t v = 0;
  if (n >= 8) {
    std::memcpy(&v, p, 8);
  } else if (n >= 4) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + n - 4, 4);  // overlaps lo: the shared bytes are equal
    v = lo | (static_cast<uint64_t>(hi) << (8 * (n - 4)));
  } else if (n > 0) {
    const auto b = [&](size_t i) {
      return static_cast<uint64_t>(static_cast<unsigned char>(p[i]));
    };
    v = b(0) | (b(n / 2) << (8 * (n / 2))) | (b(n - 1) << (8 * (n - 1)));
  }
  return v;
}

struct ByteKey {
  uint64_t head;  // the first 8 bytes
  uint64_t hash;
};

ByteKey byte_key(std::string_view s) {
  const uint64_t head = load_head(s.data(), s.size());
  uint64_t h = (head ^ (s.size() * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
  for (size_t i = 8; i < s.size(); i += 8) {
    h = ((h ^ (h >> 31)) ^ load_head(s.data() + i, std::min<size_t>(8, s.size() - i))) *
        0x94D049BB133111EBull;
  }
  return {head, h ^ (h >> 32)};
}

// Where the ids of pieces that needed merging already are in one encode call's output, by
// piece content: words repeat. Local to the call, so encode stays thread-safe.
class MergedPieces {
 public:
  struct Entry {
    std::string_view piece;  // empty: a free slot
    uint64_t hash;
    uint32_t start, count;
  };

  const Entry* find(std::string_view piece, uint64_t hash) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = hash & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      const Entry& e = slots_[i];
      if (e.piece.empty()) return nullptr;
      if (e.hash == hash && e.piece == piece) return &e;
    }
  }

  void insert(const Entry& entry) {
    if (2 * (used_ + 1) > slots_.size()) grow();
    place(entry);
    ++used_;
  }

 private:
  void place(const Entry& entry) {
    size_t i = entry.hash & (slots_.size() - 1);
    while (!slots_[i].piece.empty()) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = entry;
  }
  void grow() {
    std::vector<Entry> old(std::max<size_t>(1024, 2 * slots_.size()));
    old.swap(slots_);
    for (const Entry& e : old) {
      if (!e.piece.empty()) place(e);
    }
  }

  std::vector<Entry> slots_;
  size_t used_ = 0;
};

// GPT-2 spells each byte as a printable character: the printable Latin-1 bytes as themselves,
// the other 68 as U+0100 onwards, in byte order.
std::array<char32_t, 256> byte_alphabet() {
  std::array<char32_t, 256> alphabet{};
  char32_t next = 256;
  for (unsigned b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    alphabet[b] = printable ? b : next++;
  }
  return alphabet;
}

// A vocabulary or merges entry in the byte alphabet → its bytes; nullopt if it is not one.
std::optional<std::string> alphabet_to_bytes(std::string_view spelled) {
  static const std::vector<int> to_byte = [] {
    std::vector<int> table(0x144, -1);
    const auto alphabet = byte_alphabet();
    for (unsigned b = 0; b < 256; ++b) table[alphabet[b]] = static_cast<int>(b);
    return table;
  }();
  std::string bytes;
  const auto* p = reinterpret_cast<const unsigned char*>(spelled.data());
  const auto* end = p + spelled.size();
  while (p < end) {
    const utf8::Step step = utf8::decode(p, end);
    if (step.status != utf8::Status::kValid || step.cp >= to_byte.size() || to_byte[step.cp] < 0) {
      return std::nullopt;
    }
    bytes += static_cast<char>(to_byte[step.cp]);
    p += step.len;
  }
  return bytes;
}

size_t table_size(size_t entries) {
  return std::bit_ceil(std::max<size_t>(16, entries * 2));
}

}  // namespace

std::unique_ptr<Gpt2BpeTokenizer> Gpt2BpeTokenizer::load(const std::string& vocab_path,
                                                         const std::string& merges_path) {
  std::unique_ptr<Gpt2BpeTokenizer> t(new Gpt2BpeTokenizer());
  const std::vector<std::string> vocab = read_vocab_json(vocab_path);
  const auto n = static_cast<uint32_t>(vocab.size());

  t->tokens_.assign(table_size(n), TokenSlot{0, 0, kNone});
  t->token_mask_ = t->tokens_.size() - 1;
  std::vector<bool> special(n, false);
  t->offsets_.reserve(n + 1);
  for (uint32_t id = 0; id < n; ++id) {
    t->offsets_.push_back(static_cast<uint32_t>(t->arena_.size()));
    if (is_special_token(vocab[id])) {
      special[id] = true;
      t->arena_ += vocab[id];
      if (vocab[id] == "<|endoftext|>") t->eos_ = id;
      continue;
    }
    const std::optional<std::string> bytes = alphabet_to_bytes(vocab[id]);
    FORGE_CHECK(bytes && !bytes->empty(),
                "{}: token '{}' (id {}) is not spelled in GPT-2's byte alphabet", vocab_path,
                vocab[id], id);
    t->arena_ += *bytes;
  }
  t->offsets_.push_back(static_cast<uint32_t>(t->arena_.size()));
  for (uint32_t id = 0; id < n; ++id) {
    if (special[id]) continue;
    const uint32_t other = t->find_token(t->token_bytes(id));
    FORGE_CHECK(other == kNone, "{}: tokens '{}' (id {}) and '{}' (id {}) are the same bytes",
                vocab_path, vocab[other], other, vocab[id], id);
    t->insert_token(t->token_bytes(id), id);
  }
  for (unsigned b = 0; b < 256; ++b) {
    const char byte = static_cast<char>(b);
    t->byte_ids_[b] = t->find_token(std::string_view(&byte, 1));
    FORGE_CHECK(t->byte_ids_[b] != kNone, "{}: no token for byte 0x{:02X}", vocab_path, b);
  }

  // A token's rank is the line of the merge that first makes it: lower merges first.
  std::vector<uint32_t> rank(n, kNone);
  const std::string merges = read_text_file(merges_path);
  uint32_t merge_count = 0;
  size_t line_no = 0;
  for (size_t pos = 0; pos < merges.size();) {
    size_t eol = merges.find('\n', pos);
    if (eol == std::string::npos) eol = merges.size();
    std::string_view line(merges.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line_no == 1 && line.starts_with("#version")) continue;
    const size_t space = line.find(' ');
    FORGE_CHECK(space != std::string_view::npos && space != 0 && space + 1 != line.size() &&
                    line.find(' ', space + 1) == std::string_view::npos,
                "{} line {}: expected two tokens separated by one space, got '{}'", merges_path,
                line_no, line.substr(0, 80));
    uint32_t parts[2];
    const std::string_view spelled[2] = {line.substr(0, space), line.substr(space + 1)};
    std::string joined;
    for (int k = 0; k < 2; ++k) {
      const std::optional<std::string> bytes = alphabet_to_bytes(spelled[k]);
      parts[k] = bytes ? t->find_token(*bytes) : kNone;
      FORGE_CHECK(parts[k] != kNone, "{} line {}: '{}' is not a token of {}", merges_path, line_no,
                  spelled[k], vocab_path);
      joined += *bytes;
    }
    const uint32_t merged = t->find_token(joined);
    FORGE_CHECK(merged != kNone, "{} line {}: the merge of '{}' and '{}' is not a token of {}",
                merges_path, line_no, spelled[0], spelled[1], vocab_path);
    if (rank[merged] == kNone) rank[merged] = merge_count;
    ++merge_count;
  }

  // Like tiktoken, any two adjacent tokens that together spell a ranked token merge, whichever
  // merge line made it: so every split of a ranked token into two tokens is a pair.
  std::vector<std::pair<uint64_t, Merge>> pairs;
  for (uint32_t id = 0; id < n; ++id) {
    if (rank[id] == kNone) continue;
    const std::string_view bytes = t->token_bytes(id);
    for (size_t k = 1; k < bytes.size(); ++k) {
      const uint32_t left = t->find_token(bytes.substr(0, k));
      const uint32_t right = t->find_token(bytes.substr(k));
      if (left != kNone && right != kNone) {
        pairs.push_back({(static_cast<uint64_t>(left) << 32) | right, Merge{rank[id], id}});
      }
    }
  }
  t->pairs_.assign(table_size(pairs.size()), PairSlot{kEmptyPair, kNone, kNone});
  t->pair_mask_ = t->pairs_.size() - 1;
  t->pair_shift_ = 64 - std::countr_zero(t->pairs_.size());
  for (const auto& [key, merge] : pairs) t->insert_pair(key >> 32, key & 0xFFFFFFFF, merge);
  return t;
}

uint32_t Gpt2BpeTokenizer::find_token(std::string_view bytes) const {
  const ByteKey key = byte_key(bytes);
  return find_token(bytes, key.head, key.hash);
}

void Gpt2BpeTokenizer::insert_token(std::string_view bytes, uint32_t id) {
  const ByteKey key = byte_key(bytes);
  size_t i = key.hash & token_mask_;
  while (tokens_[i].id != kNone) i = (i + 1) & token_mask_;
  tokens_[i] = {key.head, static_cast<uint32_t>(bytes.size()), id};
}

void Gpt2BpeTokenizer::insert_pair(uint32_t left, uint32_t right, Merge merge) {
  const uint64_t key = (static_cast<uint64_t>(left) << 32) | right;
  size_t i = (key * 0x9E3779B97F4A7C15ull) >> pair_shift_;
  while (pairs_[i].key != kEmptyPair && pairs_[i].key != key) i = (i + 1) & pair_mask_;
  pairs_[i] = {key, merge.rank, merge.id};
}

std::vector<uint32_t> Gpt2BpeTokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 4 + 16);
  MergedPieces merged;
  Gpt2Splitter splitter(text);
  std::string_view piece;
  while (splitter.next(piece)) {
    if (piece.size() == 1) {
      ids.push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
      continue;
    }
    const ByteKey key = byte_key(piece);
    if (const uint32_t id = find_token(piece, key.head, key.hash); id != kNone) {
      ids.push_back(id);
      continue;
    }
    if (const MergedPieces::Entry* e = merged.find(piece, key.hash)) {
      for (uint32_t k = 0; k < e->count; ++k) ids.push_back(ids[e->start + k]);
      continue;
    }
    const auto start = static_cast<uint32_t>(ids.size());
    encode_piece(piece, ids);
    merged.insert({piece, key.hash, start, static_cast<uint32_t>(ids.size()) - start});
  }
  return ids;
}

void Gpt2BpeTokenizer::encode_piece(std::string_view piece, std::vector<uint32_t>& out) const {
  if (piece.empty()) return;
  if (const uint32_t id = find_token(piece); id != kNone) {
    out.push_back(id);
    return;
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(piece.data());
  if (piece.size() <= kShortPiece) {
    merge_short(bytes, piece.size(), out);
  } else {
    merge_long(bytes, piece.size(), out);
  }
}

// tiktoken's rule: repeatedly merge the adjacent pair that makes the lowest-ranked token,
// the leftmost on a tie, until no adjacent pair makes a token.
void Gpt2BpeTokenizer::merge_short(const unsigned char* bytes, size_t n,
                                   std::vector<uint32_t>& out) const {
  uint32_t ids[kShortPiece];
  Merge next[kShortPiece];  // next[i]: what parts i and i + 1 would merge into
  for (size_t i = 0; i < n; ++i) ids[i] = byte_ids_[bytes[i]];
  for (size_t i = 0; i + 1 < n; ++i) next[i] = find_pair(ids[i], ids[i + 1]);
  size_t m = n;
  while (m > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < m; ++i) {
      if (next[i].rank < next[best].rank) best = i;
    }
    if (next[best].rank == kNone) break;
    ids[best] = next[best].id;
    std::copy(ids + best + 2, ids + m, ids + best + 1);
    if (best + 2 < m) std::copy(next + best + 2, next + m - 1, next + best + 1);
    --m;
    if (best > 0) next[best - 1] = find_pair(ids[best - 1], ids[best]);
    if (best + 1 < m) next[best] = find_pair(ids[best], ids[best + 1]);
  }
  out.insert(out.end(), ids, ids + m);
}

// The same rule for long pieces: a heap of candidate merges keyed (rank, position), so the
// lowest rank, then the leftmost, comes first. Parts form a linked list; a merge keeps the
// left part's position, and entries whose pair has changed since are skipped.
void Gpt2BpeTokenizer::merge_long(const unsigned char* bytes, size_t n,
                                  std::vector<uint32_t>& out) const {
  struct Part {
    uint32_t id;  // kNone once merged into the part on its left
    uint32_t next;
    uint32_t prev;
  };
  std::vector<Part> parts(n);
  for (size_t i = 0; i < n; ++i) {
    parts[i] = {byte_ids_[bytes[i]], i + 1 < n ? static_cast<uint32_t>(i + 1) : kNone,
                i > 0 ? static_cast<uint32_t>(i - 1) : kNone};
  }
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<>> heap;
  const auto push = [&](uint32_t left) {
    const Merge m = find_pair(parts[left].id, parts[parts[left].next].id);
    if (m.rank != kNone) heap.push((static_cast<uint64_t>(m.rank) << 32) | left);
  };
  for (uint32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const uint64_t top = heap.top();
    heap.pop();
    const auto left = static_cast<uint32_t>(top & 0xFFFFFFFF);
    const auto rank = static_cast<uint32_t>(top >> 32);
    Part& part = parts[left];
    if (part.id == kNone || part.next == kNone) continue;
    const Merge m = find_pair(part.id, parts[part.next].id);
    if (m.rank != rank) continue;
    Part& right = parts[part.next];
    part.id = m.id;
    right.id = kNone;
    part.next = right.next;
    if (part.next != kNone) {
      parts[part.next].prev = left;
      push(left);
    }
    if (part.prev != kNone) push(part.prev);
  }
  for (uint32_t i = 0; i != kNone; i = parts[i].next) out.push_back(parts[i].id);
}

std::string Gpt2BpeTokenizer::decode(std::span<const uint32_t> ids) const {
  size_t total = 0;
  for (const uint32_t id : ids) {
    FORGE_CHECK(id < vocab_size(), "token id {} is out of range for a vocabulary of {} tokens", id,
                vocab_size());
    total += offsets_[id + 1] - offsets_[id];
  }
  std::string text;
  text.reserve(total);
  for (const uint32_t id : ids) text += token_bytes(id);
  return text;
}

}  // namespace forge
