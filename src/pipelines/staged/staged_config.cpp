#include "pipelines/staged/staged_config.h"

#include <cmath>
#include <map>

#include "core/one_line.h"
#include "mminfer/status.h"

namespace mminfer::staged {

namespace {

using nlohmann::json;

// Deepest nesting a default may have: far beyond any stage's result.
constexpr size_t kMaxDefaultRank = 8;
constexpr size_t kMaxDefaultValues = 1 << 20;

std::string in_quotes(const std::string& s) { return "'" + one_line(s) + "'"; }

// The shape of a rectangular nested list of numbers; throws `bad` otherwise.
void nested_shape(const json& v, size_t depth, Shape* shape, std::vector<double>* values, const std::string& where) {
  if (v.is_number()) {
    if (depth != shape->size()) throw Error(where + " is not rectangular: lists of equal length all the way down");
    values->push_back(v.get<double>());
    if (values->size() > kMaxDefaultValues) throw Error(where + " holds more than " + std::to_string(kMaxDefaultValues) + " values");
    return;
  }
  if (!v.is_array() || v.empty()) throw Error(where + " must be a number or a non-empty nested list of numbers");
  if (depth >= kMaxDefaultRank) throw Error(where + " nests deeper than " + std::to_string(kMaxDefaultRank) + " lists");
  if (depth == shape->size()) {
    if (!values->empty()) throw Error(where + " is not rectangular: lists of equal length all the way down");
    shape->push_back(static_cast<int64_t>(v.size()));
  } else if (depth > shape->size() || (*shape)[depth] != static_cast<int64_t>(v.size())) {
    throw Error(where + " is not rectangular: lists of equal length all the way down");
  }
  for (const json& e : v) nested_shape(e, depth + 1, shape, values, where);
}

Tensor default_tensor(const json& v, Select select, const std::string& where) {
  Shape shape;
  std::vector<double> values;
  nested_shape(v, 0, &shape, &values, where);
  if (select == Select::kValue) {
    Tensor t = Tensor::empty(DType::kFloat32, shape);
    for (size_t i = 0; i < values.size(); ++i) {
      if (!std::isfinite(values[i])) throw Error(where + " must hold finite numbers");
      t.data<float>()[i] = static_cast<float>(values[i]);
    }
    return t;
  }
  Tensor t = Tensor::empty(DType::kInt64, shape);
  for (size_t i = 0; i < values.size(); ++i) {
    if (!(values[i] >= 0) || values[i] != std::floor(values[i]) || values[i] > 1e15)
      throw Error(where + " must hold class indices (whole numbers, 0 or more): the stage selects by " + select_name(select));
    t.data<int64_t>()[i] = static_cast<int64_t>(values[i]);
  }
  return t;
}

const json& member(const json& obj, const char* key) {
  static const json null_value;
  auto it = obj.find(key);
  return it == obj.end() ? null_value : *it;
}

}  // namespace

const char* select_name(Select s) {
  switch (s) {
    case Select::kArgmax: return "argmax";
    case Select::kSample: return "sample";
    case Select::kValue: return "value";
  }
  return "?";
}

StagedConfig read_staged_config(const pipelines::Manifest& m) {
  StagedConfig config;
  config.encoder_file = m.file("encoder");
  config.encoder_input = m.string("encoder", "input", "");

  const json& stages = member(m.raw, "stages");
  if (stages.is_null()) throw Error(m.path + ": stages is missing (a list of stage objects)");
  if (!stages.is_array() || stages.empty()) throw Error(m.path + ": stages must be a non-empty list of stage objects");
  std::map<std::string, size_t> index;  // stage name -> position
  for (size_t i = 0; i < stages.size(); ++i) {
    const std::string at = m.path + ": stages[" + std::to_string(i) + "]";
    const json& s = stages[i];
    if (!s.is_object()) throw Error(at + " must be an object");
    Stage stage;
    const json& name = member(s, "name");
    if (!name.is_string() || name.get<std::string>().empty()) throw Error(at + ".name must be a non-empty string");
    stage.name = name.get<std::string>();
    if (stage.name == "encoder" || stage.name.find('.') != std::string::npos)
      throw Error(at + ".name " + in_quotes(stage.name) + " is reserved or holds a '.'; sources read \"encoder.<output>\" and \"<stage>.<output>\"");
    if (index.count(stage.name)) throw Error(at + ".name " + in_quotes(stage.name) + " is used by an earlier stage");
    if (!m.has_file(stage.name))
      throw Error(at + ": stage " + in_quotes(stage.name) + " has no model: files." + stage.name + " is missing");
    stage.file = m.file(stage.name);

    const json& select = member(s, "select");
    if (!select.is_null()) {
      std::string word = select.is_string() ? select.get<std::string>() : "";
      if (word == "argmax") stage.select = Select::kArgmax;
      else if (word == "sample") stage.select = Select::kSample;
      else if (word == "value") stage.select = Select::kValue;
      else throw Error(at + ".select must be \"argmax\", \"sample\" or \"value\"");
    }
    const json& temperature = member(s, "temperature");
    if (!temperature.is_null()) {
      if (stage.select != Select::kSample) throw Error(at + ".temperature goes with \"select\": \"sample\"");
      if (!temperature.is_number() || !(temperature.get<double>() > 0) || !std::isfinite(temperature.get<double>()))
        throw Error(at + ".temperature must be a number above 0");
      stage.temperature = temperature.get<double>();
    }
    const json& output = member(s, "output");
    if (!output.is_null()) {
      if (!output.is_string() || output.get<std::string>().empty()) throw Error(at + ".output must be a model output's name");
      stage.output = output.get<std::string>();
    }

    const json& inputs = member(s, "inputs");
    if (!inputs.is_object() || inputs.empty())
      throw Error(at + ".inputs must be an object: model input -> source (\"encoder.<output>\", \"<stage>\" or \"<stage>.<output>\")");
    for (const auto& [input, value] : inputs.items()) {
      const std::string where = at + ".inputs." + one_line(input);
      if (!value.is_string()) throw Error(where + " must be a source string");
      Source src;
      src.text = value.get<std::string>();
      size_t dot = src.text.find('.');
      std::string head = src.text.substr(0, dot);
      std::string tail = dot == std::string::npos ? "" : src.text.substr(dot + 1);
      if (head == "encoder") {
        if (tail.empty()) throw Error(where + " " + in_quotes(src.text) + " names no encoder output (\"encoder.<output>\")");
        src.kind = Source::kEncoderOutput;
        src.output = tail;
      } else {
        auto found = index.find(head);
        if (found == index.end())
          throw Error(where + " " + in_quotes(src.text) + " names no earlier stage (sources are the encoder's outputs and earlier stages)");
        src.stage = found->second;
        if (dot == std::string::npos) {
          src.kind = Source::kStageResult;
        } else {
          if (tail.empty()) throw Error(where + " " + in_quotes(src.text) + " names no output");
          if (config.stages[src.stage].gate)
            throw Error(where + " " + in_quotes(src.text) + " reads a raw output of gated stage " + in_quotes(head) +
                        ", which it lacks for skipped inputs; read its result " + in_quotes(head) + " instead");
          src.kind = Source::kStageOutput;
          src.output = tail;
        }
      }
      stage.inputs.emplace_back(input, std::move(src));
    }

    const json& gate = member(s, "gate");
    if (!gate.is_null()) {
      if (!gate.is_object()) throw Error(at + ".gate must be an object {\"stage\", \"confidence\", \"default\"}");
      if (i == 0) throw Error(at + ".gate: the first stage has no earlier stage to gate on");
      Gate g;
      g.stage = i - 1;
      const json& on = member(gate, "stage");
      if (!on.is_null()) {
        auto found = on.is_string() ? index.find(on.get<std::string>()) : index.end();
        if (found == index.end()) throw Error(at + ".gate.stage must name an earlier stage");
        g.stage = found->second;
      }
      if (config.stages[g.stage].select == Select::kValue)
        throw Error(at + ".gate.stage " + in_quotes(config.stages[g.stage].name) +
                    " selects \"value\" and has no confidence; gate on an argmax or sample stage");
      const json& c = member(gate, "confidence");
      if (!c.is_number() || !(c.get<double>() >= 0 && c.get<double>() <= 1))
        throw Error(at + ".gate.confidence must be a number from 0 to 1");
      g.confidence = c.get<double>();
      const json& fallback = member(gate, "default");
      if (fallback.is_null()) throw Error(at + ".gate.default is missing: the result skipped inputs take");
      if (fallback.is_string()) {
        auto found = index.find(fallback.get<std::string>());
        if (found == index.end())
          throw Error(at + ".gate.default " + in_quotes(fallback.get<std::string>()) + " names no earlier stage");
        const bool indices = stage.select != Select::kValue, other = config.stages[found->second].select != Select::kValue;
        if (indices != other)
          throw Error(at + ".gate.default: stage " + in_quotes(fallback.get<std::string>()) + " gives " +
                      (other ? "class indices" : "values") + " and this stage " + (indices ? "class indices" : "values"));
        g.fallback_stage = found->second;
      } else {
        g.fallback = default_tensor(fallback, stage.select, at + ".gate.default");
      }
      stage.gate = std::move(g);
    }
    index[stage.name] = i;
    config.stages.push_back(std::move(stage));
  }
  return config;
}

}  // namespace mminfer::staged
