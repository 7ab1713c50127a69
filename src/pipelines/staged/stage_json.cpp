#include "pipelines/staged/stage_json.h"

namespace mminfer::staged {

namespace {

using nlohmann::ordered_json;

ordered_json values_json(const Tensor& t, size_t dim, int64_t* at) {
  if (dim == t.rank()) {
    int64_t k = (*at)++;
    if (t.dtype() == DType::kInt64) return t.data<int64_t>()[k];
    return t.data<float>()[k];
  }
  ordered_json list = ordered_json::array();
  for (int64_t i = 0; i < t.dim(dim); ++i) list.push_back(values_json(t, dim + 1, at));
  return list;
}

}  // namespace

ordered_json result_json(const Tensor& result) {
  int64_t at = 0;
  return values_json(result, 0, &at);
}

ordered_json stages_json(const StagedConfig& config, const std::vector<StageRun>& runs) {
  ordered_json out = ordered_json::object();
  for (size_t s = 0; s < config.stages.size() && s < runs.size(); ++s) {
    ordered_json one = {{"ran", runs[s].ran}, {"result", result_json(runs[s].result)}};
    if (runs[s].confidence >= 0) one["confidence"] = runs[s].confidence;
    out[config.stages[s].name] = std::move(one);
  }
  return out;
}

}  // namespace mminfer::staged
