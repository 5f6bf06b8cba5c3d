// SHA-256 through OpenSSL's libcrypto: what a resumed run compares with what it was started on.
#pragma once

#include <string>
#include <string_view>

namespace forge::train {

/// The SHA-256 of `bytes` as 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);

}  // namespace forge::train
