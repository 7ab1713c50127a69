#include "serve/sha256.h"

#include <openssl/evp.h>

#include "mminfer/status.h"

namespace mminfer::serve {

struct Sha256::Ctx {
  EVP_MD_CTX* md = nullptr;
  ~Ctx() { EVP_MD_CTX_free(md); }
};

namespace {

void check(int ok, const char* what) {
  if (ok != 1) throw Error(std::string("sha256: OpenSSL ") + what + " failed");
}

}  // namespace

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  if (!ctx_->md) throw Error("sha256: out of memory for the OpenSSL digest context");
  check(EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr), "DigestInit");
}

Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

Sha256& Sha256::update(const void* data, size_t size) {
  check(EVP_DigestUpdate(ctx_->md, data, size), "DigestUpdate");
  return *this;
}

Sha256& Sha256::update(std::string_view bytes) { return update(bytes.data(), bytes.size()); }

Sha256Digest Sha256::finish() {
  Sha256Digest out{};
  unsigned int n = 0;
  check(EVP_DigestFinal_ex(ctx_->md, out.data(), &n), "DigestFinal");
  if (n != out.size()) throw Error("sha256: OpenSSL returned a digest of " + std::to_string(n) + " bytes");
  check(EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr), "DigestInit");
  return out;
}

Sha256Digest sha256(const void* data, size_t size) {
  Sha256Digest out{};
  unsigned int n = 0;
  if (EVP_Digest(data, size, out.data(), &n, EVP_sha256(), nullptr) != 1 || n != out.size())
    throw Error("sha256: OpenSSL EVP_Digest failed");
  return out;
}

Sha256Digest sha256(std::string_view bytes) { return sha256(bytes.data(), bytes.size()); }

std::string to_hex(const Sha256Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(digest.size() * 2, '0');
  for (size_t i = 0; i < digest.size(); ++i) {
    s[2 * i] = kHex[digest[i] >> 4];
    s[2 * i + 1] = kHex[digest[i] & 15];
  }
  return s;
}

std::string sha256_hex(std::string_view bytes) { return to_hex(sha256(bytes)); }

}  // namespace mminfer::serve
