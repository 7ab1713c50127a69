#include "pipelines/staged/staged_pipeline.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "core/elapsed.h"
#include "core/one_line.h"
#include "pipelines/pipeline_models.h"
#include "pipelines/staged/stage_select.h"

namespace mminfer::staged {

namespace {

std::string in_quotes(const std::string& s) { return "'" + one_line(s) + "'"; }

std::string names_of(const std::vector<ValueInfo>& values) {
  std::string out;
  for (const ValueInfo& v : values) out += (out.empty() ? "" : ", ") + one_line(v.name);
  return out.empty() ? "nothing" : out;
}

const ValueInfo* find_value(const std::vector<ValueInfo>& values, const std::string& name) {
  for (const ValueInfo& v : values)
    if (v.name == name) return &v;
  return nullptr;
}

}  // namespace

// A model and the outputs the pipeline reads from it, in the order they come back.
struct StagedPipeline::Model {
  std::string what;  // "encoder", "stage 'topic'": how errors name it
  std::unique_ptr<Session> session;
  std::vector<std::string> outputs;

  size_t output_at(const std::string& name) const {
    return static_cast<size_t>(std::find(outputs.begin(), outputs.end(), name) - outputs.begin());
  }
  std::vector<Tensor> run(const std::vector<NamedTensor>& feeds, int64_t rows) const {
    std::vector<Tensor> out;
    Status st = session->run(feeds, outputs, &out);
    if (!st) throw Error(what + ": " + st.message());
    for (size_t k = 0; k < out.size(); ++k)
      if (out[k].rank() == 0 || out[k].dim(0) != rows)
        throw Error(what + ": output " + in_quotes(outputs[k]) + " is " + shape_str(out[k].shape()) + ", not " +
                    std::to_string(rows) + " rows (one per input)");
    return out;
  }
};

StagedPipeline::~StagedPipeline() = default;

StagedPipeline::StagedPipeline(const pipelines::Manifest& m, const SessionOptions& session)
    : config_(read_staged_config(m)) {
  if (m.type != pipelines::PipelineType::kStaged)
    throw Error(m.path + ": type is '" + pipelines::type_name(m.type) + "', not 'staged'");
  preprocess_ = pipelines::read_image_preprocess(m);
  const size_t n = config_.stages.size();

  // The outputs each model must give: what later stages read, and each stage's result.
  std::vector<std::set<std::string>> wanted(n);
  std::set<std::string> encoder_wanted;
  for (const Stage& s : config_.stages) {
    if (!s.output.empty()) wanted[&s - config_.stages.data()].insert(s.output);
    for (const auto& [input, src] : s.inputs) {
      if (src.kind == Source::kEncoderOutput) encoder_wanted.insert(src.output);
      if (src.kind == Source::kStageOutput) wanted[src.stage].insert(src.output);
    }
  }
  // A model computing only what is read, so the passes drop the rest; loaded whole when a name
  // is wrong, so that the checks below can say which.
  auto open = [&](const std::string& role, const std::set<std::string>& outputs) {
    SessionOptions opts = session;
    opts.outputs.assign(outputs.begin(), outputs.end());
    std::unique_ptr<Session> s;
    if (!opts.outputs.empty() && Session::load(m.file(role), opts, &s)) return s;
    opts.outputs.clear();
    return pipelines::open_role(m, role, opts);
  };

  encoder_ = std::make_unique<Model>();
  encoder_->what = "encoder";
  encoder_->session = open("encoder", encoder_wanted);
  const Session& enc = *encoder_->session;
  if (config_.encoder_input.empty()) {
    if (enc.inputs().size() != 1)
      throw Error(m.key_error("encoder", "input", "is missing: the encoder takes " + names_of(enc.inputs()) + "; name the one inputs feed"));
    config_.encoder_input = enc.inputs()[0].name;
  } else if (!find_value(enc.inputs(), config_.encoder_input)) {
    throw Error(m.key_error("encoder", "input", in_quotes(config_.encoder_input) + " is not an encoder input; it takes " + names_of(enc.inputs())));
  }
  for (const ValueInfo& in : enc.inputs())
    if (in.name != config_.encoder_input)
      throw Error(m.path + ": the encoder also takes " + in_quotes(in.name) + ", which a staged pipeline cannot feed");
  for (const std::string& name : encoder_wanted)
    if (!find_value(enc.outputs(), name))
      throw Error(m.path + ": a stage reads 'encoder." + one_line(name) + "', but the encoder outputs " + names_of(enc.outputs()));
  encoder_->outputs.assign(encoder_wanted.begin(), encoder_wanted.end());

  for (size_t i = 0; i < n; ++i) {
    Stage& s = config_.stages[i];
    const std::string at = m.path + ": stages[" + std::to_string(i) + "]";
    auto model = std::make_unique<Model>();
    model->what = "stage " + in_quotes(s.name);
    model->session = open(s.name, wanted[i]);
    const Session& ses = *model->session;
    if (s.output.empty()) {
      if (ses.outputs().size() != 1)
        throw Error(at + ".output is missing: stage " + in_quotes(s.name) + " outputs " + names_of(ses.outputs()) + "; name its result");
      s.output = ses.outputs()[0].name;
      wanted[i].insert(s.output);
    }
    for (const std::string& name : wanted[i])
      if (!find_value(ses.outputs(), name))
        throw Error(at + ": stage " + in_quotes(s.name) + " has no output " + in_quotes(name) + "; it outputs " + names_of(ses.outputs()));
    for (const auto& [input, src] : s.inputs)
      if (!find_value(ses.inputs(), input))
        throw Error(at + ".inputs." + one_line(input) + ": stage " + in_quotes(s.name) + " has no such input; it takes " + names_of(ses.inputs()));
    for (const ValueInfo& in : ses.inputs()) {
      bool bound = std::any_of(s.inputs.begin(), s.inputs.end(), [&](const auto& b) { return b.first == in.name; });
      if (!bound) throw Error(at + ".inputs: stage " + in_quotes(s.name) + "'s input " + in_quotes(in.name) + " is not bound to a source");
    }
    // A default must look like one input's result, where the model says what that is.
    const ValueInfo* out = find_value(ses.outputs(), s.output);
    if (s.gate && !s.gate->fallback_stage && out->has_shape && out->dims.size() >= 1) {
      std::vector<int64_t> row(out->dims.begin() + 1, out->dims.end() - (s.select == Select::kValue ? 0 : 1));
      const Shape& got = s.gate->fallback.shape();
      bool fits = row.size() == got.size();
      for (size_t d = 0; fits && d < row.size(); ++d) fits = row[d] < 0 || row[d] == got[d];
      if (!fits)
        throw Error(at + ".gate.default has shape " + shape_str(got) + ", but one input's result is " +
                    shape_str(Shape(row.begin(), row.end())) + " (-1: any)");
      if (s.select != Select::kValue && out->dims.back() > 0)
        for (int64_t k = 0; k < s.gate->fallback.numel(); ++k)
          if (s.gate->fallback.data<int64_t>()[k] >= out->dims.back())
            throw Error(at + ".gate.default holds class " + std::to_string(s.gate->fallback.data<int64_t>()[k]) +
                        "; stage " + in_quotes(s.name) + " has " + std::to_string(out->dims.back()));
    }
    model->outputs.assign(wanted[i].begin(), wanted[i].end());
    stages_.push_back(std::move(model));
  }
  totals_.ran.assign(n, 0);
  totals_.skipped.assign(n, 0);
  totals_.stage_ms.assign(n, 0);
}

namespace {

// ids[from, from + count), or from, from + 1, ... when there are none.
std::vector<uint64_t> ids_of(std::span<const uint64_t> ids, size_t from, size_t count) {
  if (!ids.empty() && ids.size() < from + count) throw Error("a staged pipeline needs one id per input");
  std::vector<uint64_t> out(count);
  for (size_t k = 0; k < count; ++k) out[k] = ids.empty() ? from + k : ids[from + k];
  return out;
}

}  // namespace

std::vector<std::vector<StageRun>> StagedPipeline::run_images(std::span<const image::Image> images, uint64_t seed,
                                                               std::span<const uint64_t> ids) {
  std::vector<std::vector<StageRun>> out;
  for (size_t from = 0; from < images.size(); from += kBatch) {
    auto part = images.subspan(from, std::min(kBatch, images.size() - from));
    auto runs = run_batch(image::clip_preprocess_batch(part, preprocess_), seed, ids_of(ids, from, part.size()));
    for (auto& r : runs) out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::vector<StageRun>> StagedPipeline::run_tensor(const Tensor& batch, uint64_t seed, std::span<const uint64_t> ids) {
  if (batch.rank() == 0) throw Error("a staged pipeline takes [inputs, ...], not a scalar");
  return run_batch(batch, seed, ids_of(ids, 0, static_cast<size_t>(batch.dim(0))));
}

std::vector<std::vector<StageRun>> StagedPipeline::run_batch(const Tensor& batch, uint64_t seed, std::vector<uint64_t> ids) {
  const int64_t rows = batch.dim(0);
  const size_t n = config_.stages.size();
  std::vector<std::vector<StageRun>> out(static_cast<size_t>(rows), std::vector<StageRun>(n));
  if (rows == 0) return out;

  auto t0 = std::chrono::steady_clock::now();
  std::vector<Tensor> encoded = encoder_->run({{config_.encoder_input, batch}}, rows);
  totals_.encoder_ms += ms_since(t0);
  totals_.encoded += static_cast<uint64_t>(rows);

  std::vector<Tensor> results(n);                // per stage, [rows, ...]
  std::vector<std::vector<Tensor>> raw(n);       // per stage, its outputs (ungated stages: every row)
  std::vector<std::vector<double>> sure(n);      // per stage and row; -1 where it did not run

  for (size_t i = 0; i < n; ++i) {
    const Stage& s = config_.stages[i];
    const Model& model = *stages_[i];
    std::vector<size_t> items;
    for (size_t r = 0; r < static_cast<size_t>(rows); ++r) {
      bool skip = s.gate && sure[s.gate->stage][r] >= 0 && sure[s.gate->stage][r] >= s.gate->confidence;
      if (!skip) items.push_back(r);
    }
    const bool all = items.size() == static_cast<size_t>(rows);
    sure[i].assign(static_cast<size_t>(rows), -1.0);
    Tensor picked;  // [items, ...]
    if (!items.empty()) {
      std::vector<NamedTensor> feeds;
      for (const auto& [input, src] : s.inputs) {
        const Tensor& full = src.kind == Source::kEncoderOutput ? encoded[encoder_->output_at(src.output)]
                             : src.kind == Source::kStageResult ? results[src.stage]
                                                                : raw[src.stage][stages_[src.stage]->output_at(src.output)];
        const ValueInfo* info = nullptr;
        for (const ValueInfo& v : model.session->inputs())
          if (v.name == input) info = &v;
        Tensor rows_in = all ? full : take_rows(full, items);
        feeds.emplace_back(input, cast_for_input(rows_in, info->dtype, model.what + "'s input " + in_quotes(input) + " from '" + one_line(src.text) + "'"));
      }
      t0 = std::chrono::steady_clock::now();
      std::vector<Tensor> got = model.run(feeds, static_cast<int64_t>(items.size()));
      totals_.stage_ms[i] += ms_since(t0);
      const Tensor& result = got[model.output_at(s.output)];
      if (s.select == Select::kValue) {
        picked = result;
      } else {
        try {
          picked = s.select == Select::kArgmax ? argmax_last(result)
                                               : sample_last(result, s.temperature, seed, [&] {
                                                   std::vector<uint64_t> v;
                                                   for (size_t r : items) v.push_back(ids[r]);
                                                   return v;
                                                 }(), i);
          std::vector<double> c = confidence(result);
          for (size_t k = 0; k < items.size(); ++k) sure[i][items[k]] = c[k];
        } catch (const Error& e) {
          throw Error(model.what + ": output " + in_quotes(s.output) + ": " + e.what());
        }
        if (s.gate && !s.gate->fallback_stage)
          for (int64_t k = 0; k < s.gate->fallback.numel(); ++k)
            if (s.gate->fallback.data<int64_t>()[k] >= result.dim(result.rank() - 1))
              throw Error(model.what + ": its gate's default holds class " + std::to_string(s.gate->fallback.data<int64_t>()[k]) +
                          ", but it has " + std::to_string(result.dim(result.rank() - 1)) + " classes");
      }
      if (!s.gate) raw[i] = std::move(got);
    }
    totals_.ran[i] += items.size();
    totals_.skipped[i] += static_cast<uint64_t>(rows) - items.size();

    // What skipped inputs take: the gate's default, or an earlier stage's result for them.
    Tensor fallback_rows;
    if (s.gate && !all)
      fallback_rows = s.gate->fallback_stage ? results[*s.gate->fallback_stage].clone() : repeat_row(s.gate->fallback, rows);
    if (fallback_rows.defined() && picked.defined()) {
      Shape row(picked.shape().begin() + 1, picked.shape().end()), other(fallback_rows.shape().begin() + 1, fallback_rows.shape().end());
      const std::string source = s.gate->fallback_stage ? "stage '" + one_line(config_.stages[*s.gate->fallback_stage].name) + "'" : "default";
      if (row != other)
        throw Error(model.what + ": its gate's " + source + " gives " + shape_str(other) + " per input, but it gives " + shape_str(row));
      if (picked.dtype() != fallback_rows.dtype())
        throw Error(model.what + ": its result is " + dtype_name(picked.dtype()) + ", its gate's " + source + " " +
                    dtype_name(fallback_rows.dtype()) + " (a gated \"value\" stage must give float32)");
    }
    if (all) {
      results[i] = picked;
    } else {
      results[i] = fallback_rows;
      if (picked.defined()) put_rows(results[i], picked, items);
    }
    for (size_t r = 0; r < static_cast<size_t>(rows); ++r) {
      StageRun& run = out[r][i];
      run.ran = std::binary_search(items.begin(), items.end(), r);
      run.confidence = sure[i][r];
      run.result = take_rows(results[i], {r});
      Shape one(run.result.shape().begin() + 1, run.result.shape().end());
      run.result = Tensor::alias(run.result, run.result.dtype(), one, run.result.raw());
    }
  }
  return out;
}

}  // namespace mminfer::staged
