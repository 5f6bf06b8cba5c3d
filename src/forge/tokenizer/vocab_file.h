// Reading the files a tokenizer directory holds.
#pragma once

#include <string>
#include <vector>

namespace forge {

/// The whole file; the error names it when it cannot be read.
std::string read_text_file(const std::string& path);

/// vocab.json, {"token": id, ...}, as its tokens indexed by id. The ids must be 0…N−1, each
/// used once. Errors name the file (and the token or id at fault).
std::vector<std::string> read_vocab_json(const std::string& path);

/// Whether a vocabulary entry is a special token such as "<|endoftext|>": never produced
/// from text, decoded as its literal name.
bool is_special_token(const std::string& token);

}  // namespace forge
