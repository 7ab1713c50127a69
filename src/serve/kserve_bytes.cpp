#include "serve/kserve_bytes.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "mminfer/status.h"
#include "serve/base64.h"
#include "serve/request_json.h"

namespace mminfer::serve {

using nlohmann::json;

namespace {

constexpr size_t kMaxBytesElements = 1 << 16;  // per input; queues hold far fewer anyway

void strings_of(const json& j, std::vector<const json*>& out, const std::string& what, size_t depth = 0) {
  if (j.is_array()) {
    if (depth >= kMaxJsonDepth) throw Error(what + ": data nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    for (const json& e : j) strings_of(e, out, what, depth + 1);
    return;
  }
  if (!j.is_string()) throw Error(what + ": element " + std::to_string(out.size()) + " is not a string (BYTES data are strings)");
  if (out.size() >= kMaxBytesElements) throw Error(what + ": more than " + std::to_string(kMaxBytesElements) + " elements");
  out.push_back(&j);
}

uint32_t read_le32(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 | static_cast<uint32_t>(b[2]) << 16 |
         static_cast<uint32_t>(b[3]) << 24;
}

void append_le32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// Binary BYTES: elements as (length, bytes) pairs filling exactly [p, p + n).
std::vector<std::string> split_binary(const char* p, size_t n, size_t expected, const std::string& what) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < n) {
    if (n - at < 4) throw Error(what + ": binary data ends inside the length of element " + std::to_string(out.size()));
    size_t len = read_le32(p + at);
    at += 4;
    if (len > n - at)
      throw Error(what + ": element " + std::to_string(out.size()) + " claims " + std::to_string(len) + " bytes, only " +
                  std::to_string(n - at) + " remain");
    if (out.size() == expected) throw Error(what + ": binary data holds more than the shape's " + std::to_string(expected) + " elements");
    out.emplace_back(p + at, len);
    at += len;
  }
  if (out.size() != expected)
    throw Error(what + ": binary data holds " + std::to_string(out.size()) + " elements for a shape of " + std::to_string(expected));
  return out;
}

}  // namespace

BytesRequest parse_bytes_request(const std::string& body, std::optional<size_t> header_length, const PipelineSignature& sig) {
  if (header_length && *header_length > body.size())
    throw Error("Inference-Header-Content-Length " + std::to_string(*header_length) + " is larger than the body (" +
                std::to_string(body.size()) + " bytes)");
  size_t json_len = header_length ? *header_length : body.size();
  json j = parse_request_json(std::string_view(body).substr(0, json_len));
  if (!j.is_object()) throw Error("the request must be a JSON object");
  BytesRequest r;
  if (j.contains("id")) {
    if (!j["id"].is_string()) throw Error("'id' must be a string");
    r.id = j["id"].get<std::string>();
  }
  if (!j.contains("inputs") || !j["inputs"].is_array() || j["inputs"].empty()) throw Error("the request needs an 'inputs' list");
  size_t binary_offset = json_len;
  std::vector<std::optional<std::vector<std::string>>> given(sig.inputs.size());
  for (const json& in : j["inputs"]) {
    if (!in.is_object() || !in.contains("name") || !in["name"].is_string()) throw Error("each input needs a 'name' string");
    std::string name = in["name"].get<std::string>();
    std::string what = "input '" + name + "'";
    size_t k = 0;
    while (k < sig.inputs.size() && sig.inputs[k].name != name) ++k;
    if (k == sig.inputs.size()) throw Error(what + " is not an input of the model");
    if (given[k]) throw Error(what + " is given twice");
    const TensorSpec& spec = sig.inputs[k];
    if (!in.contains("datatype") || !in["datatype"].is_string()) throw Error(what + " needs a 'datatype'");
    std::string dt = in["datatype"].get<std::string>();
    if (dt != spec.datatype) throw Error(what + ": the model takes " + spec.datatype + ", not " + dt);
    if (!in.contains("shape") || !in["shape"].is_array()) throw Error(what + " needs a 'shape' list");
    const json& shape = in["shape"];
    if (shape.size() != spec.dims.size())
      throw Error(what + ": the model takes rank " + std::to_string(spec.dims.size()) + ", got rank " + std::to_string(shape.size()));
    size_t count = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (!shape[d].is_number_integer() || shape[d].get<int64_t>() < 0) throw Error(what + ": shape entries must be integers >= 0");
      int64_t v = shape[d].get<int64_t>();
      if (spec.dims[d] >= 0 && spec.dims[d] != v)
        throw Error(what + ": dimension " + std::to_string(d) + " must be " + std::to_string(spec.dims[d]) + ", got " + std::to_string(v));
      if (v > 0 && count > kMaxBytesElements / static_cast<size_t>(v))
        throw Error(what + ": the shape holds more than " + std::to_string(kMaxBytesElements) + " elements");
      count *= static_cast<size_t>(v);
    }
    if (count == 0) throw Error(what + ": the shape holds no elements");
    std::vector<std::string> elements;
    const json* params = in.contains("parameters") && in["parameters"].is_object() ? &in["parameters"] : nullptr;
    if (params && params->contains("binary_data_size")) {
      const json& bs = (*params)["binary_data_size"];
      if (!bs.is_number_unsigned()) throw Error(what + ": binary_data_size must be an integer >= 0");
      size_t n = bs.get<size_t>();
      if (!header_length) throw Error(what + ": binary data needs the Inference-Header-Content-Length header");
      if (n > body.size() - binary_offset) throw Error(what + ": the body ends before its " + std::to_string(n) + " bytes of binary data");
      elements = split_binary(body.data() + binary_offset, n, count, what);
      binary_offset += n;
    } else {
      if (!in.contains("data")) throw Error(what + " has no 'data'");
      std::vector<const json*> vals;
      strings_of(in["data"], vals, what);
      if (vals.size() != count)
        throw Error(what + ": " + std::to_string(vals.size()) + " values for a shape of " + std::to_string(count) + " elements");
      for (size_t i = 0; i < vals.size(); ++i) {
        const std::string& s = vals[i]->get_ref<const std::string&>();
        if (!spec.base64_in_json) {
          elements.push_back(s);
          continue;
        }
        try {
          auto b = decode_data_url(s);
          elements.emplace_back(b.begin(), b.end());
        } catch (const Error& e) {
          throw Error(what + ": element " + std::to_string(i) + " is not base64 (file bytes in JSON are base64): " + e.what());
        }
      }
    }
    for (size_t i = 0; i < elements.size(); ++i)
      if (elements[i].empty()) throw Error(what + ": element " + std::to_string(i) + " is empty");
    given[k] = std::move(elements);
  }
  if (header_length && binary_offset != body.size())
    throw Error(std::to_string(body.size() - binary_offset) + " bytes of binary data are not claimed by any input");
  for (size_t k = 0; k < sig.inputs.size(); ++k)
    if (given[k]) r.inputs.push_back({sig.inputs[k].name, std::move(*given[k])});
  std::vector<std::string> known;
  for (const TensorSpec& o : sig.outputs) known.push_back(o.name);
  parse_requested_outputs(j, known, r.outputs, r.binary_outputs, r.all_binary);
  return r;
}

InferResponseBody make_bytes_response(const std::string& model, int version, const BytesRequest& request,
                                      const std::vector<ResponseTensor>& outputs) {
  json j = {{"model_name", model}, {"model_version", std::to_string(version)}};
  if (!request.id.empty()) j["id"] = request.id;
  json outs = json::array();
  std::string binary;
  bool any_binary = request.all_binary || !request.binary_outputs.empty();
  for (const ResponseTensor& t : outputs) {
    if (!request.outputs.empty() && std::find(request.outputs.begin(), request.outputs.end(), t.name) == request.outputs.end())
      continue;
    json o = {{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}};
    bool as_binary = request.all_binary || request.binary_outputs.count(t.name);
    if (as_binary) {
      size_t start = binary.size();
      if (t.datatype == "BYTES") {
        for (const std::string& e : t.bytes) {
          append_le32(binary, static_cast<uint32_t>(e.size()));
          binary += e;
        }
      } else {
        binary.append(reinterpret_cast<const char*>(t.fp32.data()), t.fp32.size() * sizeof(float));
      }
      o["parameters"] = {{"binary_data_size", binary.size() - start}};
    } else if (t.datatype == "BYTES") {
      o["data"] = t.bytes;
    } else {
      json data = json::array();
      for (float v : t.fp32) data.push_back(std::isfinite(v) ? json(v) : json(nullptr));
      o["data"] = std::move(data);
    }
    outs.push_back(std::move(o));
  }
  j["outputs"] = std::move(outs);
  InferResponseBody r;
  r.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (any_binary) {
    r.header_length = r.body.size();
    r.body += binary;
  }
  return r;
}

}  // namespace mminfer::serve
