// One input's stages as JSON, as `mminfer staged --json` prints them and the server answers:
// {NAME: {"ran", "result", "confidence"}} in stage order; a result is a number for one value,
// nested lists otherwise; "confidence" only for argmax and sample stages that ran.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "pipelines/staged/staged_config.h"
#include "pipelines/staged/staged_pipeline.h"

namespace mminfer::staged {

nlohmann::ordered_json result_json(const Tensor& result);
nlohmann::ordered_json stages_json(const StagedConfig& config, const std::vector<StageRun>& runs);

}  // namespace mminfer::staged
