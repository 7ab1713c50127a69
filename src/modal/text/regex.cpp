#define PCRE2_CODE_UNIT_WIDTH 8
#include "modal/text/regex.h"

#include <pcre2.h>

#include "core/one_line.h"
#include "mminfer/status.h"

namespace mminfer::text {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() { pcre2_code_free(code); }
};

Regex::Regex(const std::string& pattern) : pattern_(pattern), impl_(std::make_unique<Impl>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!impl_->code)
    throw Error("regex '" + one_line(pattern) + "' does not compile at offset " + std::to_string(offset) + ": " +
                pcre2_message(error));
  // JIT makes long texts several times faster; without it (unsupported CPU) the interpreter runs.
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;

void Regex::for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create_from_pattern(impl_->code, nullptr), &pcre2_match_data_free);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    // Text was checked to be UTF-8 on entry, so PCRE2 need not check it again on every call.
    int rc = PCRE2_ERROR_JIT_STACKLIMIT;
    if (impl_->jit) rc = pcre2_jit_match(impl_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, data.get(), nullptr);
    // Without JIT, or when the JIT's fixed stack runs out, the interpreter matches: it keeps
    // its backtracking state on the heap.
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
      rc = pcre2_match(impl_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, data.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) throw Error("regex '" + one_line(pattern_) + "' failed at byte " + std::to_string(start) + ": " + pcre2_message(rc));
    PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      on_match(begin, end);
      start = end;
    } else {
      // An empty match: step one code point so the scan moves on.
      start = end + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
    }
  }
}

}  // namespace mminfer::text
