// Tokenizers behind one interface: GPT-2's byte-level BPE and a character vocabulary.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace forge {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// Text → ids. Input must be valid UTF-8: invalid input is a forge::Error naming the byte
  /// offset (see the README's invalid-UTF-8 policy). "<|endoftext|>" in text is ordinary text.
  virtual std::vector<uint32_t> encode(std::string_view text) const = 0;
  /// Ids → bytes. The bytes of a partial sequence may end inside a UTF-8 character; use
  /// StreamDecoder to print as you go. Out-of-range ids are a forge::Error naming the id.
  virtual std::string decode(std::span<const uint32_t> ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  /// The end-of-text id, if the vocabulary has one.
  virtual std::optional<uint32_t> eos_id() const = 0;
  virtual std::string kind() const = 0;  // "gpt2-bpe" or "char"

  /// Picks the tokenizer a model directory holds: vocab.json + merges.txt → GPT-2 BPE;
  /// vocab.json alone (single characters → ids) → char. Errors name the directory.
  static std::unique_ptr<Tokenizer> from_directory(const std::string& dir);
};

/// Turns a stream of ids into text that never ends inside a UTF-8 character: push() returns
/// the newly completed characters, finish() whatever remains (incomplete bytes as U+FFFD).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::string push(uint32_t id);
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
};

}  // namespace forge
