// A file as an HTTP body: one byte range at most, read from a descriptor opened once, never torn.
#pragma once

#include <filesystem>
#include <string>

#include "serve/http.h"

namespace forge::serve {

/// The Content-Type a browser needs for a file (WebAssembly streaming compilation insists on
/// application/wasm).
std::string mime_type(const std::filesystem::path& file);

/// A GET of `file`: 200 with the whole file, or 206 with the single range a `Range: bytes=…`
/// header asks for, or 416 when that range starts past the end. A header asking for several
/// ranges, or one that does not parse, is ignored (the whole file, as RFC 9110 allows): no
/// request can make the server send more than the file once. The body is read from the
/// descriptor opened here; if the file's size or modification time changes while it is sent,
/// the connection is cut, so a client never takes a mix of two versions for a complete file.
HttpResponse file_response(const std::filesystem::path& file, const std::string& range_header);

}  // namespace forge::serve
