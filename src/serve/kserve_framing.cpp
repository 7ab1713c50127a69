#include "serve/kserve_framing.h"

#include <algorithm>

#include "mminfer/status.h"
#include "serve/request_json.h"

namespace mminfer::serve {

using nlohmann::json;

InferEnvelope::InferEnvelope(const std::string& body, std::optional<size_t> header_length) {
  if (header_length && *header_length > body.size())
    throw Error("Inference-Header-Content-Length " + std::to_string(*header_length) + " is larger than the body (" +
                std::to_string(body.size()) + " bytes)");
  size_t json_length = header_length ? *header_length : body.size();
  header_ = parse_request_json(std::string_view(body).substr(0, json_length));
  if (!header_.is_object()) throw Error("the request must be a JSON object");
  if (header_.contains("id")) {
    if (!header_["id"].is_string()) throw Error("'id' must be a string");
    id_ = header_["id"].get<std::string>();
  }
  if (!header_.contains("inputs") || !header_["inputs"].is_array()) throw Error("the request needs an 'inputs' list");
  has_binary_part_ = header_length.has_value();
  binary_ = std::string_view(body).substr(json_length);
}

std::string_view InferEnvelope::take_binary(size_t n, const std::string& what) {
  if (!has_binary_part_) throw Error(what + ": binary data needs the Inference-Header-Content-Length header");
  if (n > binary_.size() - taken_) throw Error(what + ": the body ends before its " + std::to_string(n) + " bytes of binary data");
  std::string_view out = binary_.substr(taken_, n);
  taken_ += n;
  return out;
}

void InferEnvelope::check_all_claimed() const {
  if (has_binary_part_ && taken_ != binary_.size())
    throw Error(std::to_string(binary_.size() - taken_) + " bytes of binary data are not claimed by any input");
}

void InputEntry::check_dims(const std::vector<int64_t>& dims) const {
  if (shape.size() != dims.size())
    throw Error(what + ": the model takes rank " + std::to_string(dims.size()) + ", got rank " + std::to_string(shape.size()));
  for (size_t d = 0; d < shape.size(); ++d)
    if (dims[d] >= 0 && dims[d] != shape[d])
      throw Error(what + ": dimension " + std::to_string(d) + " must be " + std::to_string(dims[d]) + ", got " + std::to_string(shape[d]));
}

InputEntry read_input_entry(const json& in, size_t max_elements) {
  if (!in.is_object() || !in.contains("name") || !in["name"].is_string()) throw Error("each input needs a 'name' string");
  InputEntry e;
  e.name = in["name"].get<std::string>();
  e.what = "input '" + e.name + "'";
  if (!in.contains("datatype") || !in["datatype"].is_string()) throw Error(e.what + " needs a 'datatype'");
  e.datatype = in["datatype"].get<std::string>();
  if (!in.contains("shape") || !in["shape"].is_array()) throw Error(e.what + " needs a 'shape' list");
  for (const json& d : in["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) throw Error(e.what + ": shape entries must be integers >= 0");
    int64_t v = d.get<int64_t>();
    if (v > 0 && e.count > max_elements / static_cast<size_t>(v))
      throw Error(e.what + ": the shape holds more than " + std::to_string(max_elements) + " elements");
    e.shape.push_back(v);
    e.count *= static_cast<size_t>(v);
  }
  const json* params = in.contains("parameters") && in["parameters"].is_object() ? &in["parameters"] : nullptr;
  if (params && params->contains("binary_data_size")) {
    const json& size = (*params)["binary_data_size"];
    if (!size.is_number_unsigned()) throw Error(e.what + ": binary_data_size must be an integer >= 0");
    e.binary_size = size.get<size_t>();
  } else if (in.contains("data")) {
    e.data = &in["data"];
  } else {
    throw Error(e.what + " has no 'data'");
  }
  return e;
}

bool RequestedOutputs::wanted(const std::string& name) const {
  return names.empty() || std::find(names.begin(), names.end(), name) != names.end();
}

RequestedOutputs read_requested_outputs(const json& j, const std::vector<std::string>& known) {
  RequestedOutputs r;
  if (j.contains("parameters") && j["parameters"].is_object() && j["parameters"].contains("binary_data_output"))
    r.all_binary = j["parameters"]["binary_data_output"].is_boolean() && j["parameters"]["binary_data_output"].get<bool>();
  if (!j.contains("outputs")) return r;
  if (!j["outputs"].is_array()) throw Error("'outputs' must be a list");
  for (const json& o : j["outputs"]) {
    if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) throw Error("each requested output needs a 'name'");
    std::string name = o["name"].get<std::string>();
    if (std::find(known.begin(), known.end(), name) == known.end()) throw Error("output '" + name + "' is not an output of the model");
    r.names.push_back(name);
    if (o.contains("parameters") && o["parameters"].is_object() && o["parameters"].contains("binary_data") &&
        o["parameters"]["binary_data"].is_boolean() && o["parameters"]["binary_data"].get<bool>())
      r.binary.insert(name);
  }
  return r;
}

json response_header(const std::string& model, int version, const std::string& id) {
  json j = {{"model_name", model}, {"model_version", std::to_string(version)}};
  if (!id.empty()) j["id"] = id;
  return j;
}

InferResponseBody finish_response(const json& header, std::string binary, bool binary_asked) {
  InferResponseBody r;
  r.body = header.dump(-1, ' ', false, json::error_handler_t::replace);
  if (binary_asked || !binary.empty()) {
    r.header_length = r.body.size();
    r.body += binary;
  }
  return r;
}

}  // namespace mminfer::serve
