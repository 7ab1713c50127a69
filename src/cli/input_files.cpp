#include "cli/input_files.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "mminfer/status.h"

namespace mminfer::cli {

namespace {

template <typename Bytes>
Bytes read_whole(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error("no such file");
  if (!fs::is_regular_file(path, ec)) throw Error("not a regular file");
  uint64_t size = fs::file_size(path, ec);
  if (ec) throw Error("cannot read: " + ec.message());
  if (size > kMaxInputFileBytes)
    throw Error(std::to_string(size) + " bytes, over the limit of " + std::to_string(kMaxInputFileBytes) + " bytes");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open");
  Bytes bytes(static_cast<size_t>(size), 0);
  f.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (static_cast<uint64_t>(f.gcount()) != size) throw Error("cannot read all of it");
  return bytes;
}

}  // namespace

std::vector<uint8_t> read_input_file(const std::string& path) { return read_whole<std::vector<uint8_t>>(path); }
std::string read_text_file(const std::string& path) { return read_whole<std::string>(path); }

}  // namespace mminfer::cli
