// mminfer staged --pipeline DIR INPUT... : a staged pipeline's stages for each image or .npy
// tensor, the encoder once per input and each gated stage only where its gate lets it run.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/input_files.h"
#include "cli/json_output.h"
#include "cli/output_text.h"
#include "core/npy.h"
#include "modal/image/image.h"
#include "pipelines/staged/stage_json.h"
#include "pipelines/staged/staged_pipeline.h"

namespace mminfer::cli {

namespace {

using nlohmann::ordered_json;

bool is_npy(const std::vector<uint8_t>& bytes) { return bytes.size() >= 6 && std::string(bytes.begin(), bytes.begin() + 6) == "\x93NUMPY"; }

}  // namespace

int cmd_staged(int argc, char** argv) {
  Args args(argc, argv, 2, with_precision_flags({"--pipeline", "--seed", "--threads"}), {"--help", "--json", "--jsonl"});
  if (args.has("--help") || !args.has("--pipeline") || args.positional().empty()) {
    std::fputs(
        "usage: mminfer staged --pipeline DIR INPUT... [--seed S] [--json | --jsonl] [--threads N] [--precision SPEC]\n"
        "  runs a staged pipeline: its encoder once per input, then its stages in order, each skipped for\n"
        "  the inputs where its gate's stage is confident enough (the stage then gives its default)\n"
        "  INPUT: an image, or a .npy tensor of one input's shape for the encoder\n"
        "  --seed S: the seed of sampling stages (0); input k's draws depend on S and k only\n"
        "  --json: one document {\"results\": [{\"file\", \"stages\": {NAME: {\"ran\", \"result\", \"confidence\"}}}],\n"
        "    \"work\": [{\"model\", \"ran\", \"skipped\", \"ms\"}]}; --jsonl: a result a line\n",
        args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  SessionOptions session;
  session.threads = threads_flag(args);
  session.precision = precision_flags(args);
  const double seed_value = args.get_double("--seed", 0);
  // Below 2^53, where every whole number is exact in a double (and the cast is defined).
  if (!(seed_value >= 0 && seed_value < 9007199254740992.0) || seed_value != std::floor(seed_value))
    throw Error("--seed takes a whole number from 0 to 2^53 - 1");
  const auto seed = static_cast<int64_t>(seed_value);
  pipelines::Manifest manifest = pipelines::read_manifest(args.get("--pipeline"));
  if (manifest.type != pipelines::PipelineType::kStaged)
    throw Error("staged needs a staged pipeline; " + manifest.path + " is type '" + pipelines::type_name(manifest.type) + "'");
  staged::StagedPipeline pipeline(manifest, session);
  const auto& stages = pipeline.config().stages;

  const std::vector<std::string>& files = args.positional();
  std::vector<std::string> errors(files.size());
  std::vector<std::vector<staged::StageRun>> runs(files.size());
  std::vector<image::Image> images;
  std::vector<uint64_t> image_ids;
  std::map<std::pair<DType, Shape>, std::vector<std::pair<size_t, Tensor>>> tensors;  // by dtype and shape
  for (size_t i = 0; i < files.size(); ++i) {
    try {
      std::vector<uint8_t> bytes = read_input_file(files[i]);
      if (!is_npy(bytes)) {
        images.push_back(image::decode_image(bytes));
        image_ids.push_back(i);
        continue;
      }
      Tensor one = parse_npy(std::string(bytes.begin(), bytes.end()), files[i]);
      tensors[{one.dtype(), one.shape()}].push_back({i, one});
    } catch (const Error& e) {
      errors[i] = e.what();
    }
  }
  // Tensors of one dtype and shape go through in batches; a batch that fails is run again one
  // input at a time, so that only the inputs at fault get its error.
  for (const auto& [kind, group] : tensors)
    for (size_t from = 0; from < group.size(); from += staged::StagedPipeline::kBatch) {
      const size_t n = std::min(staged::StagedPipeline::kBatch, group.size() - from);
      auto run_part = [&](size_t first, size_t count) {
        Shape shape{static_cast<int64_t>(count)};
        shape.insert(shape.end(), kind.second.begin(), kind.second.end());
        Tensor batch = Tensor::empty(kind.first, shape);
        std::vector<uint64_t> ids;
        for (size_t k = 0; k < count; ++k) {
          const Tensor& t = group[first + k].second;
          std::memcpy(static_cast<char*>(batch.raw()) + k * t.nbytes(), t.raw(), t.nbytes());
          ids.push_back(group[first + k].first);
        }
        auto got = pipeline.run_tensor(batch, static_cast<uint64_t>(seed), ids);
        for (size_t k = 0; k < count; ++k) runs[ids[k]] = std::move(got[k]);
      };
      try {
        run_part(from, n);
      } catch (const Error&) {
        for (size_t k = from; k < from + n; ++k) {
          try {
            run_part(k, 1);
          } catch (const Error& e) {
            errors[group[k].first] = e.what();
          }
        }
      }
    }
  if (!images.empty()) {
    std::vector<std::vector<staged::StageRun>> got = pipeline.run_images(images, static_cast<uint64_t>(seed), image_ids);
    for (size_t k = 0; k < got.size(); ++k) runs[image_ids[k]] = std::move(got[k]);
  }

  JsonResults json(json_flag(args));
  int failures = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!errors[i].empty()) {
      ++failures;
      json.add_error("staged", files[i], errors[i]);
      continue;
    }
    ordered_json by_stage = staged::stages_json(pipeline.config(), runs[i]);
    std::string line = one_line_text(files[i]) + ":";
    for (size_t s = 0; s < stages.size(); ++s) {
      const staged::StageRun& run = runs[i][s];
      line += " " + stages[s].name + "=" + short_text(by_stage[stages[s].name]["result"].dump());
      if (!run.ran) {
        line += " (default)";
      } else if (run.confidence >= 0) {
        char buf[32];
        std::snprintf(buf, sizeof buf, " (%.3f)", run.confidence);
        line += buf;
      }
    }
    if (json.on()) json.add({{"file", files[i]}, {"stages", by_stage}});
    else std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  const staged::StagedTotals& totals = pipeline.totals();
  ordered_json work = ordered_json::array();
  work.push_back({{"model", "encoder"}, {"ran", totals.encoded}, {"skipped", 0}, {"ms", totals.encoder_ms}});
  for (size_t s = 0; s < stages.size(); ++s)
    work.push_back({{"model", stages[s].name}, {"ran", totals.ran[s]}, {"skipped", totals.skipped[s]}, {"ms", totals.stage_ms[s]}});
  json.finish({{"work", work}});
  return failures ? 1 : 0;
}

}  // namespace mminfer::cli
