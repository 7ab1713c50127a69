// SHA-256 through OpenSSL's EVP interface: the cache keys requests by the digest of their raw
// bytes, so two requests carrying the same image share one entry whatever their JSON looks like.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace mminfer::serve {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest sha256(std::string_view bytes);
Sha256Digest sha256(const void* data, size_t size);
std::string sha256_hex(std::string_view bytes);  // 64 lower-case hex digits
std::string to_hex(const Sha256Digest& digest);

// Incremental hashing, for inputs that arrive in pieces (several fields of one request).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  Sha256& update(std::string_view bytes);
  Sha256& update(const void* data, size_t size);
  Sha256Digest finish();  // the hasher starts over afterwards

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

}  // namespace mminfer::serve
