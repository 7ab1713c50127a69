#include "core/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/ascii.h"
#include "mminfer/status.h"

namespace mminfer {

namespace {

const char* descr_of(DType t) {
  switch (t) {
    case DType::kFloat32: return "<f4";
    case DType::kFloat64: return "<f8";
    case DType::kFloat16: return "<f2";
    case DType::kInt8: return "|i1";
    case DType::kUint8: return "|u1";
    case DType::kInt16: return "<i2";
    case DType::kUint16: return "<u2";
    case DType::kInt32: return "<i4";
    case DType::kUint32: return "<u4";
    case DType::kInt64: return "<i8";
    case DType::kUint64: return "<u8";
    case DType::kBool: return "|b1";
    default: throw Error(std::string("cannot store dtype ") + dtype_name(t) + " in .npy");
  }
}

DType dtype_of(const std::string& d, const std::string& what) {
  std::string s = d;
  if (!s.empty() && s[0] == '=') s[0] = '<';
  static const std::pair<const char*, DType> table[] = {
      {"<f4", DType::kFloat32}, {"<f8", DType::kFloat64}, {"<f2", DType::kFloat16},
      {"|i1", DType::kInt8},    {"|u1", DType::kUint8},   {"<i2", DType::kInt16},
      {"<u2", DType::kUint16},  {"<i4", DType::kInt32},   {"<u4", DType::kUint32},
      {"<i8", DType::kInt64},   {"<u8", DType::kUint64},  {"|b1", DType::kBool},
      {"<b1", DType::kBool},    {"<i1", DType::kInt8},    {"<u1", DType::kUint8}};
  for (auto& [k, v] : table)
    if (s == k) return v;
  throw Error(what + ": unsupported .npy dtype '" + d + "' (big-endian or exotic)");
}

// Returns the text of a dict value for `key` in the header, e.g. "'<f4'" or "(1, 3)".
std::string header_value(const std::string& h, const std::string& key, const std::string& what) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) throw Error(what + ": .npy header lacks '" + key + "'");
  size_t colon = h.find(':', k);
  if (colon == std::string::npos) throw Error(what + ": malformed .npy header");
  size_t start = h.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos) throw Error(what + ": malformed .npy header");
  size_t end;
  if (h[start] == '(') {
    end = h.find(')', start);
    if (end == std::string::npos) throw Error(what + ": malformed .npy shape");
    ++end;
  } else if (h[start] == '\'') {
    end = h.find('\'', start + 1);
    if (end == std::string::npos) throw Error(what + ": malformed .npy header");
    ++end;
  } else {
    end = h.find_first_of(",}", start);
    if (end == std::string::npos) throw Error(what + ": malformed .npy header");
  }
  return h.substr(start, end - start);
}

}  // namespace

Tensor parse_npy(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0)
    throw Error(what + ": not a .npy file (bad magic)");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw Error(what + ": truncated .npy header");
    uint32_t n;
    std::memcpy(&n, bytes.data() + 8, 4);
    header_len = n;
    offset = 12;
  } else {
    throw Error(what + ": unsupported .npy version " + std::to_string(major));
  }
  if (offset + header_len > bytes.size()) throw Error(what + ": truncated .npy header");
  std::string h = bytes.substr(offset, header_len);
  std::string descr = header_value(h, "descr", what);
  if (descr.size() < 2) throw Error(what + ": malformed .npy descr");
  DType dt = dtype_of(descr.substr(1, descr.size() - 2), what);
  if (header_value(h, "fortran_order", what) != "False")
    throw Error(what + ": Fortran-ordered .npy is not supported");
  std::string sh = header_value(h, "shape", what);
  if (sh.size() < 2 || sh.front() != '(' || sh.back() != ')') throw Error(what + ": malformed .npy shape " + sh);
  Shape shape;
  {
    for (const std::string& tok : split_list(std::string_view(sh).substr(1, sh.size() - 2))) {
      size_t a = tok.find_first_not_of(' ');
      if (a == std::string::npos) continue;
      try {
        long long v = std::stoll(tok.substr(a));
        if (v < 0) throw Error(what + ": negative .npy dimension");
        shape.push_back(v);
      } catch (const std::logic_error&) {
        throw Error(what + ": malformed .npy shape " + sh);
      }
    }
  }
  // Check the bytes present before allocating: a tiny file may declare a huge array.
  size_t data_off = offset + header_len;
  uint64_t need = dtype_size(dt);
  for (int64_t d : shape) {
    if (d != 0 && need > (uint64_t(1) << 40) / static_cast<uint64_t>(d)) throw Error(what + ": .npy shape " + sh + " is too large");
    need *= static_cast<uint64_t>(d);
  }
  if (bytes.size() - data_off < need)
    throw Error(what + ": .npy data is truncated (" + std::to_string(bytes.size() - data_off) + " of " +
                std::to_string(need) + " bytes)");
  Tensor t = Tensor::empty(dt, shape);
  if (t.nbytes()) std::memcpy(t.raw(), bytes.data() + data_off, t.nbytes());
  return t;
}

Tensor read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_npy(ss.str(), path);
}

std::string encode_npy(const Tensor& t) {
  std::string shape = "(";
  for (size_t i = 0; i < t.rank(); ++i) shape += std::to_string(t.dim(i)) + ", ";
  if (t.rank() > 1) shape.resize(shape.size() - 2);
  if (t.rank() == 1) shape.resize(shape.size() - 1);
  shape += ")";
  std::string header = std::string("{'descr': '") + descr_of(t.dtype()) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

void write_npy(const std::string& path, const Tensor& t) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error("cannot write " + path);
  std::string bytes = encode_npy(t);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw Error("write failed: " + path);
}

}  // namespace mminfer
