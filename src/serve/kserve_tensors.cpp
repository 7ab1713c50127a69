#include "serve/kserve_tensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/half.h"
#include "serve/request_json.h"
#include "serve/served_model.h"

namespace mminfer::serve {

using nlohmann::json;

namespace {

constexpr size_t kMaxElements = size_t{1} << 28;  // 1 GiB of float32: beyond any sane request

DType dtype_of(const std::string& datatype) {
  static const std::pair<const char*, DType> names[] = {
      {"BOOL", DType::kBool},     {"UINT8", DType::kUint8},   {"UINT16", DType::kUint16}, {"UINT32", DType::kUint32},
      {"UINT64", DType::kUint64}, {"INT8", DType::kInt8},     {"INT16", DType::kInt16},   {"INT32", DType::kInt32},
      {"INT64", DType::kInt64},   {"FP16", DType::kFloat16},  {"FP32", DType::kFloat32},  {"FP64", DType::kFloat64},
      {"BF16", DType::kBFloat16}};
  for (const auto& [n, t] : names)
    if (datatype == n) return t;
  return DType::kUndefined;
}

void flatten(const json& j, std::vector<const json*>& out, const std::string& what, size_t depth = 0) {
  if (j.is_array()) {
    // parse_request_json bounds the depth already; values built in code meet this bound too.
    if (depth >= kMaxJsonDepth) throw Error(what + ": data nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    for (const json& e : j) flatten(e, out, what, depth + 1);
  } else {
    if (out.size() >= kMaxElements) throw Error(what + ": too many elements");
    out.push_back(&j);
  }
}

template <class T>
void store_integers(const std::vector<const json*>& vals, void* dst, const std::string& what) {
  T* p = static_cast<T*>(dst);
  for (size_t i = 0; i < vals.size(); ++i) {
    const json& v = *vals[i];
    bool ok = false;
    if (v.is_number_integer()) {
      if constexpr (std::is_signed_v<T>) {
        if (v.is_number_unsigned()) {
          uint64_t x = v.get<uint64_t>();
          ok = x <= static_cast<uint64_t>(std::numeric_limits<T>::max());
          if (ok) p[i] = static_cast<T>(x);
        } else {
          int64_t x = v.get<int64_t>();
          ok = x >= static_cast<int64_t>(std::numeric_limits<T>::min()) && x <= static_cast<int64_t>(std::numeric_limits<T>::max());
          if (ok) p[i] = static_cast<T>(x);
        }
      } else {
        if (v.is_number_unsigned()) {
          uint64_t x = v.get<uint64_t>();
          ok = x <= static_cast<uint64_t>(std::numeric_limits<T>::max());
          if (ok) p[i] = static_cast<T>(x);
        }
      }
    }
    if (!ok) throw Error(what + ": element " + std::to_string(i) + " (" + v.dump().substr(0, 32) + ") is not a valid value");
  }
}

void store_json(DType t, const std::vector<const json*>& vals, Tensor& dst, const std::string& what) {
  void* p = dst.raw();
  switch (t) {
    case DType::kBool:
      for (size_t i = 0; i < vals.size(); ++i) {
        if (!vals[i]->is_boolean()) throw Error(what + ": element " + std::to_string(i) + " is not true or false");
        static_cast<uint8_t*>(p)[i] = vals[i]->get<bool>() ? 1 : 0;
      }
      return;
    case DType::kUint8: return store_integers<uint8_t>(vals, p, what);
    case DType::kUint16: return store_integers<uint16_t>(vals, p, what);
    case DType::kUint32: return store_integers<uint32_t>(vals, p, what);
    case DType::kUint64: return store_integers<uint64_t>(vals, p, what);
    case DType::kInt8: return store_integers<int8_t>(vals, p, what);
    case DType::kInt16: return store_integers<int16_t>(vals, p, what);
    case DType::kInt32: return store_integers<int32_t>(vals, p, what);
    case DType::kInt64: return store_integers<int64_t>(vals, p, what);
    default: break;
  }
  for (size_t i = 0; i < vals.size(); ++i) {
    if (!vals[i]->is_number()) throw Error(what + ": element " + std::to_string(i) + " is not a number");
    double d = vals[i]->get<double>();
    if (t == DType::kFloat32) static_cast<float*>(p)[i] = static_cast<float>(d);
    else if (t == DType::kFloat64) static_cast<double*>(p)[i] = d;
    else if (t == DType::kFloat16) static_cast<uint16_t*>(p)[i] = float_to_half(static_cast<float>(d));
    else if (t == DType::kBFloat16) {
      float f = static_cast<float>(d);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
    }
  }
}

json tensor_json(const Tensor& t) {
  json data = json::array();
  const void* p = t.raw();
  int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::kFloat32:
      for (int64_t i = 0; i < n; ++i) {
        float v = static_cast<const float*>(p)[i];
        data.push_back(std::isfinite(v) ? json(v) : json(nullptr));  // JSON has no NaN or infinity
      }
      break;
    case DType::kFloat64:
      for (int64_t i = 0; i < n; ++i) data.push_back(static_cast<const double*>(p)[i]);
      break;
    case DType::kFloat16:
      for (int64_t i = 0; i < n; ++i) data.push_back(half_to_float(static_cast<const uint16_t*>(p)[i]));
      break;
    case DType::kInt64:
      for (int64_t i = 0; i < n; ++i) data.push_back(static_cast<const int64_t*>(p)[i]);
      break;
    case DType::kInt32:
      for (int64_t i = 0; i < n; ++i) data.push_back(static_cast<const int32_t*>(p)[i]);
      break;
    case DType::kInt8:
      for (int64_t i = 0; i < n; ++i) data.push_back(static_cast<const int8_t*>(p)[i]);
      break;
    case DType::kUint8:
      for (int64_t i = 0; i < n; ++i) data.push_back(static_cast<const uint8_t*>(p)[i]);
      break;
    case DType::kBool:
      for (int64_t i = 0; i < n; ++i) data.push_back(static_cast<const uint8_t*>(p)[i] != 0);
      break;
    default:
      throw Error(std::string("output datatype ") + dtype_name(t.dtype()) + " cannot be written as JSON; ask for binary_data");
  }
  return data;
}

}  // namespace

void parse_requested_outputs(const json& j, const std::vector<std::string>& known, std::vector<std::string>& names,
                             std::set<std::string>& binary, bool& all_binary) {
  if (j.contains("parameters") && j["parameters"].is_object() && j["parameters"].contains("binary_data_output"))
    all_binary = j["parameters"]["binary_data_output"].is_boolean() && j["parameters"]["binary_data_output"].get<bool>();
  if (!j.contains("outputs")) return;
  if (!j["outputs"].is_array()) throw Error("'outputs' must be a list");
  for (const json& o : j["outputs"]) {
    if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) throw Error("each requested output needs a 'name'");
    std::string name = o["name"].get<std::string>();
    if (std::find(known.begin(), known.end(), name) == known.end()) throw Error("output '" + name + "' is not an output of the model");
    names.push_back(name);
    if (o.contains("parameters") && o["parameters"].is_object() && o["parameters"].contains("binary_data") &&
        o["parameters"]["binary_data"].is_boolean() && o["parameters"]["binary_data"].get<bool>())
      binary.insert(name);
  }
}

InferRequest parse_infer_request(const std::string& body, std::optional<size_t> header_length,
                                 const std::vector<ValueInfo>& model_inputs, const std::vector<ValueInfo>& model_outputs) {
  if (header_length && *header_length > body.size())
    throw Error("Inference-Header-Content-Length " + std::to_string(*header_length) + " is larger than the body (" +
                std::to_string(body.size()) + " bytes)");
  size_t json_len = header_length ? *header_length : body.size();
  json j = parse_request_json(std::string_view(body).substr(0, json_len));
  if (!j.is_object()) throw Error("the request must be a JSON object");
  InferRequest r;
  if (j.contains("id")) {
    if (!j["id"].is_string()) throw Error("'id' must be a string");
    r.id = j["id"].get<std::string>();
  }
  if (!j.contains("inputs") || !j["inputs"].is_array()) throw Error("the request needs an 'inputs' list");
  size_t binary_offset = json_len;
  std::vector<Tensor> given(model_inputs.size());
  for (const json& in : j["inputs"]) {
    if (!in.is_object() || !in.contains("name") || !in["name"].is_string())
      throw Error("each input needs a 'name' string");
    std::string name = in["name"].get<std::string>();
    std::string what = "input '" + name + "'";
    size_t k = 0;
    while (k < model_inputs.size() && model_inputs[k].name != name) ++k;
    if (k == model_inputs.size()) throw Error(what + " is not an input of the model");
    if (given[k].defined()) throw Error(what + " is given twice");
    const ValueInfo& info = model_inputs[k];
    if (!in.contains("datatype") || !in["datatype"].is_string()) throw Error(what + " needs a 'datatype'");
    std::string dt = in["datatype"].get<std::string>();
    DType t = dtype_of(dt);
    if (t == DType::kUndefined) throw Error(what + ": datatype '" + dt + "' is not supported");
    if (t != info.dtype)
      throw Error(what + ": the model takes " + std::string(kserve_datatype(info.dtype)) + ", not " + dt);
    if (!in.contains("shape") || !in["shape"].is_array()) throw Error(what + " needs a 'shape' list");
    Shape shape;
    size_t count = 1;
    for (const json& d : in["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) throw Error(what + ": shape entries must be integers >= 0");
      shape.push_back(d.get<int64_t>());
      if (shape.back() > 0 && count > kMaxElements / static_cast<size_t>(shape.back())) throw Error(what + ": the shape is too large");
      count *= static_cast<size_t>(shape.back());
    }
    if (info.has_shape) {
      if (shape.size() != info.dims.size())
        throw Error(what + ": the model takes rank " + std::to_string(info.dims.size()) + ", got rank " + std::to_string(shape.size()));
      for (size_t d = 0; d < shape.size(); ++d)
        if (info.dims[d] >= 0 && info.dims[d] != shape[d])
          throw Error(what + ": dimension " + std::to_string(d) + " must be " + std::to_string(info.dims[d]) + ", got " +
                      std::to_string(shape[d]));
    }
    // Nothing is allocated until the data actually present has been counted: an 83-byte body
    // claiming 2^28 elements must not cost 2 GiB.
    size_t nbytes = count * dtype_size(t);
    const json* params = in.contains("parameters") && in["parameters"].is_object() ? &in["parameters"] : nullptr;
    if (params && params->contains("binary_data_size")) {
      const json& bs = (*params)["binary_data_size"];
      if (!bs.is_number_unsigned()) throw Error(what + ": binary_data_size must be an integer >= 0");
      size_t n = bs.get<size_t>();
      if (!header_length) throw Error(what + ": binary data needs the Inference-Header-Content-Length header");
      if (n != nbytes)
        throw Error(what + ": binary_data_size is " + std::to_string(n) + " bytes, the shape needs " + std::to_string(nbytes));
      if (n > body.size() - binary_offset) throw Error(what + ": the body ends before its binary data");
      Tensor tensor = Tensor::empty(t, shape);
      std::memcpy(tensor.raw(), body.data() + binary_offset, n);
      binary_offset += n;
      given[k] = std::move(tensor);
    } else {
      if (!in.contains("data")) throw Error(what + " has no 'data'");
      std::vector<const json*> vals;
      flatten(in["data"], vals, what);
      if (vals.size() != count)
        throw Error(what + ": " + std::to_string(vals.size()) + " values for a shape of " + std::to_string(count) + " elements");
      Tensor tensor = Tensor::empty(t, shape);
      store_json(t, vals, tensor, what);
      given[k] = std::move(tensor);
    }
  }
  if (binary_offset != body.size() && header_length)
    throw Error(std::to_string(body.size() - binary_offset) + " bytes of binary data are not claimed by any input");
  for (size_t k = 0; k < model_inputs.size(); ++k) {
    if (!given[k].defined()) throw Error("input '" + model_inputs[k].name + "' is missing");
    r.inputs.emplace_back(model_inputs[k].name, std::move(given[k]));
  }
  std::vector<std::string> known;
  for (const ValueInfo& v : model_outputs) known.push_back(v.name);
  parse_requested_outputs(j, known, r.outputs, r.binary_outputs, r.all_binary);
  return r;
}

InferResponseBody make_infer_response(const std::string& model, int version, const InferRequest& request,
                                      const std::vector<ValueInfo>& model_outputs, const std::vector<Tensor>& outputs) {
  json j = {{"model_name", model}, {"model_version", std::to_string(version)}};
  if (!request.id.empty()) j["id"] = request.id;
  json outs = json::array();
  std::string binary;
  for (size_t k = 0; k < model_outputs.size() && k < outputs.size(); ++k) {
    const std::string& name = model_outputs[k].name;
    if (!request.outputs.empty() && std::find(request.outputs.begin(), request.outputs.end(), name) == request.outputs.end())
      continue;
    const Tensor& t = outputs[k];
    json shape = json::array();
    for (int64_t d : t.shape()) shape.push_back(d);
    const char* dt = kserve_datatype(t.dtype());
    json o = {{"name", name}, {"datatype", *dt ? dt : dtype_name(t.dtype())}, {"shape", shape}};
    if (request.all_binary || request.binary_outputs.count(name)) {
      o["parameters"] = {{"binary_data_size", t.nbytes()}};
      binary.append(static_cast<const char*>(t.raw()), t.nbytes());
    } else {
      o["data"] = tensor_json(t);
    }
    outs.push_back(std::move(o));
  }
  j["outputs"] = std::move(outs);
  InferResponseBody r;
  r.body = j.dump();
  if (!binary.empty() || request.all_binary || !request.binary_outputs.empty()) {
    r.header_length = r.body.size();
    r.body += binary;
  }
  return r;
}

}  // namespace mminfer::serve
