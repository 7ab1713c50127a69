// Base64 (RFC 4648, standard alphabet, padding optional) and data URLs
// ("data:image/png;base64,...") as clients put images and audio into JSON.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mminfer::serve {

// Throws Error naming the offset of the first character that is not base64.
std::vector<uint8_t> base64_decode(std::string_view text);
std::string base64_encode(std::string_view bytes);  // OpenSSL EVP_EncodeBlock
// The payload of a base64 data URL, or of plain base64 text when `text` is not a data URL.
std::vector<uint8_t> decode_data_url(std::string_view text);

}  // namespace mminfer::serve
