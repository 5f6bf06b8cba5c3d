// GPT-2's byte-level BPE, id-for-id identical to tiktoken's "gpt2" encoding.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "forge/tokenizer/tokenizer.h"

namespace forge {

class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  /// Loads HuggingFace-format files: vocab.json maps tokens, spelled in GPT-2's
  /// byte-to-unicode alphabet, to ids; merges.txt lists one merge "left right" per line in
  /// priority order, after an optional "#version" line. Every byte must be a token and every
  /// merge's parts and result must be in the vocabulary; errors give the file and line.
  static std::unique_ptr<Gpt2BpeTokenizer> load(const std::string& vocab_path,
                                                const std::string& merges_path);

  std::vector<uint32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const uint32_t> ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(offsets_.size()) - 1; }
  std::optional<uint32_t> eos_id() const override { return eos_; }
  std::string kind() const override { return "gpt2-bpe"; }

  /// The bytes of a token.
  std::string_view token_bytes(uint32_t id) const {
    return std::string_view(arena_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
  }

 private:
  static constexpr uint32_t kNone = 0xFFFFFFFF;

  // Open addressing from token bytes to id, over the tokens BPE can produce. A slot keeps
  // the token's first 8 bytes and length, which settle most lookups without the arena.
  struct TokenSlot {
    uint64_t head;
    uint32_t len;
    uint32_t id;  // kNone: empty
  };
  // Open addressing from an adjacent pair of tokens to the token they join into.
  struct PairSlot {
    uint64_t key;  // left << 32 | right
    uint32_t rank;
    uint32_t id;
  };
  struct Merge {
    uint32_t rank;
    uint32_t id;
  };

  Gpt2BpeTokenizer() = default;
  // The ids of one pre-tokenized piece, appended to `out`: tiktoken's byte_pair_encode.
  void encode_piece(std::string_view piece, std::vector<uint32_t>& out) const;
  uint32_t find_token(std::string_view bytes) const;
  // `head` and `hash` as byte_key (bpe_tokenizer.cpp) computes them for `bytes`.
  uint32_t find_token(std::string_view bytes, uint64_t head, uint64_t hash) const {
    for (size_t i = hash & token_mask_;; i = (i + 1) & token_mask_) {
      const TokenSlot& slot = tokens_[i];
      if (slot.head == head && slot.len == bytes.size() &&
          (slot.len <= 8 || token_bytes(slot.id).substr(8) == bytes.substr(8))) {
        return slot.id;
      }
      if (slot.id == kNone) return kNone;
    }
  }
  void insert_token(std::string_view bytes, uint32_t id);
  Merge find_pair(uint32_t left, uint32_t right) const {
    const uint64_t key = (static_cast<uint64_t>(left) << 32) | right;
    for (size_t i = (key * 0x9E3779B97F4A7C15ull) >> pair_shift_;; i = (i + 1) & pair_mask_) {
      const PairSlot& slot = pairs_[i];
      if (slot.key == key) return {slot.rank, slot.id};
      if (slot.key == kEmptyPair) return {kNone, kNone};
    }
  }
  void insert_pair(uint32_t left, uint32_t right, Merge merge);
  void merge_short(const unsigned char* bytes, size_t n, std::vector<uint32_t>& out) const;
  void merge_long(const unsigned char* bytes, size_t n, std::vector<uint32_t>& out) const;

  static constexpr uint64_t kEmptyPair = ~0ull;

  std::string arena_;              // every token's bytes, back to back
  std::vector<uint32_t> offsets_;  // id → start in arena_; one past the end last
  std::array<uint32_t, 256> byte_ids_{};
  std::vector<TokenSlot> tokens_;
  size_t token_mask_ = 0;
  std::vector<PairSlot> pairs_;
  size_t pair_mask_ = 0;
  int pair_shift_ = 64;  // 64 − log2(pairs_.size()): Fibonacci hashing takes the high bits
  std::optional<uint32_t> eos_;
};

}  // namespace forge
