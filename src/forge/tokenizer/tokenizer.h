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

/// Invalid UTF-8 policy. encode() takes valid UTF-8 only (RFC 3629: no overlong forms, no
/// encoded UTF-16 surrogates, nothing above U+10FFFF, no truncated sequences or stray
/// continuation bytes) and throws forge::Error naming the byte offset of the first bad
/// sequence and why it is bad; it never replaces or drops bytes silently. decode() returns
/// the tokens' bytes as they are, which may be invalid UTF-8 (a GPT-2 token can hold part of
/// a character); StreamDecoder is the way to text that is always valid.
///
/// Tokenizers are immutable once loaded: encode and decode are safe to call from many threads.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// Text → ids. "<|endoftext|>" in text is ordinary text: encode never emits a special id.
  virtual std::vector<uint32_t> encode(std::string_view text) const = 0;
  /// Ids → bytes. Out-of-range ids are a forge::Error naming the id.
  virtual std::string decode(std::span<const uint32_t> ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  /// The end-of-text id, if the vocabulary has one.
  virtual std::optional<uint32_t> eos_id() const = 0;
  virtual std::string kind() const = 0;  // "gpt2-bpe" or "char"

  /// Picks the tokenizer a model directory holds: vocab.json + merges.txt → GPT-2 BPE;
  /// vocab.json alone (single characters → ids) → char. Errors name the directory or file.
  static std::unique_ptr<Tokenizer> from_directory(const std::string& dir);
};

/// Turns a stream of ids into text that never ends inside a UTF-8 character: push() returns
/// the newly completed characters and holds back a character's first bytes until the rest
/// arrive. Bytes that can never become a character (invalid UTF-8 a model generated) come
/// out as U+FFFD, one per maximal ill-formed subpart; finish() returns whatever remains,
/// an incomplete character as U+FFFD. The output is always valid UTF-8.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::string push(uint32_t id);
  std::string finish();

 private:
  std::string drain(bool final);

  const Tokenizer& tokenizer_;
  std::string pending_;
};

}  // namespace forge
