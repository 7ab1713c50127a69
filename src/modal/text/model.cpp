#include "modal/text/model.h"

#include <algorithm>

#include "core/one_line.h"
#include "mminfer/status.h"

namespace mminfer::text {

void Vocab::add(std::string token, int32_t id) {
  constexpr int32_t kMaxId = 1 << 24;
  if (id < 0 || id >= kMaxId)
    throw Error("token '" + one_line(token) + "' has id " + std::to_string(id) + ", outside [0, " + std::to_string(kMaxId) + ")");
  auto [it, inserted] = ids_.emplace(std::move(token), id);
  // When two tokens share an id the first keeps it for decoding; both still encode.
  if (inserted) tokens_.emplace(id, &it->first);
  end_id_ = std::max(end_id_, id + 1);
  longest_ = std::max(longest_, it->first.size());
}

}  // namespace mminfer::text
