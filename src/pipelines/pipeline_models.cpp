#include "pipelines/pipeline_models.h"

#include <array>
#include <cmath>
#include <vector>

namespace mminfer::pipelines {

std::unique_ptr<Session> open_role(const Manifest& m, const std::string& role, const SessionOptions& opts) {
  std::unique_ptr<Session> s;
  Status st = Session::load(m.file(role), opts, &s);
  if (!st) throw Error(m.path + ": files." + role + ": " + st.message());
  return s;
}

image::ClipPreprocess read_image_preprocess(const Manifest& m) {
  image::ClipPreprocess p;
  int64_t size = m.integer("preprocess", "image_size", p.size);
  if (size < 1 || size > 4096) throw Error(m.key_error("preprocess", "image_size", "must be between 1 and 4096"));
  p.size = static_cast<int>(size);
  auto triple = [&](const char* key, std::array<float, 3>& dst, bool positive) {
    std::vector<double> v = m.numbers("preprocess", key, {dst[0], dst[1], dst[2]});
    if (v.size() != 3) throw Error(m.key_error("preprocess", key, "must hold 3 numbers (R, G, B)"));
    for (size_t c = 0; c < 3; ++c) {
      if (!std::isfinite(v[c]) || (positive && !(v[c] > 0)))
        throw Error(m.key_error("preprocess", key, positive ? "must hold positive numbers" : "must hold finite numbers"));
      dst[c] = static_cast<float>(v[c]);
    }
  };
  triple("mean", p.norm.mean, false);
  triple("std", p.norm.std, true);
  return p;
}

}  // namespace mminfer::pipelines
