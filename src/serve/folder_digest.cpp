#include "serve/folder_digest.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "mminfer/status.h"
#include "serve/sha256.h"

namespace mminfer::serve {

namespace fs = std::filesystem;

std::string folder_digest(const std::string& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file()) files.push_back(it->path().lexically_relative(dir));
  if (ec) throw Error(dir + ": cannot list the model's files: " + ec.message());
  std::sort(files.begin(), files.end());
  Sha256 hash;
  std::vector<char> buf(1 << 20);
  for (const fs::path& rel : files) {
    std::ifstream in(fs::path(dir) / rel, std::ios::binary);
    if (!in) throw Error((fs::path(dir) / rel).string() + ": cannot read it to digest the model");
    std::string name = rel.generic_string();
    uint64_t size = fs::file_size(fs::path(dir) / rel, ec);
    // Name and size first, each delimited, so no two different folders hash the same stream.
    hash.update(name.data(), name.size() + 1);  // with its terminating NUL
    hash.update(&size, sizeof size);
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      hash.update(buf.data(), static_cast<size_t>(in.gcount()));
    }
    if (in.bad()) throw Error((fs::path(dir) / rel).string() + ": read error while digesting the model");
  }
  return to_hex(hash.finish());
}

}  // namespace mminfer::serve
