// A digest of what a model version is made of: SHA-256 over every file under its folder (links
// followed), each as its relative path, size and bytes, in path order. Part of every cache key,
// so a model whose files change and that is reloaded as the same version never answers from
// results the old files computed.
#pragma once
#include <string>

namespace mminfer::serve {

// 64 hex digits. Throws Error naming the file that cannot be read.
std::string folder_digest(const std::string& dir);

}  // namespace mminfer::serve
