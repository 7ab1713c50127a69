#include "serve/kserve_tensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/half.h"
#include "serve/kserve_framing.h"
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

InferRequest parse_infer_request(const std::string& body, std::optional<size_t> header_length,
                                 const std::vector<ValueInfo>& model_inputs, const std::vector<ValueInfo>& model_outputs) {
  InferEnvelope envelope(body, header_length);
  InferRequest r;
  r.id = envelope.id();
  std::vector<Tensor> given(model_inputs.size());
  for (const json& in : envelope.header()["inputs"]) {
    InputEntry e = read_input_entry(in, kMaxElements);
    size_t k = 0;
    while (k < model_inputs.size() && model_inputs[k].name != e.name) ++k;
    if (k == model_inputs.size()) throw Error(e.what + " is not an input of the model");
    if (given[k].defined()) throw Error(e.what + " is given twice");
    const ValueInfo& info = model_inputs[k];
    DType t = dtype_of(e.datatype);
    if (t == DType::kUndefined) throw Error(e.what + ": datatype '" + e.datatype + "' is not supported");
    if (t != info.dtype) throw Error(e.what + ": the model takes " + std::string(kserve_datatype(info.dtype)) + ", not " + e.datatype);
    if (info.has_shape) e.check_dims(info.dims);
    // Nothing is allocated until the data actually present has been counted: an 83-byte body
    // claiming 2^28 elements must not cost 2 GiB.
    size_t nbytes = e.count * dtype_size(t);
    if (e.binary_size) {
      if (*e.binary_size != nbytes)
        throw Error(e.what + ": binary_data_size is " + std::to_string(*e.binary_size) + " bytes, the shape needs " + std::to_string(nbytes));
      std::string_view bytes = envelope.take_binary(nbytes, e.what);
      Tensor tensor = Tensor::empty(t, e.shape);
      std::memcpy(tensor.raw(), bytes.data(), nbytes);
      given[k] = std::move(tensor);
    } else {
      std::vector<const json*> vals;
      flatten(*e.data, vals, e.what);
      if (vals.size() != e.count)
        throw Error(e.what + ": " + std::to_string(vals.size()) + " values for a shape of " + std::to_string(e.count) + " elements");
      Tensor tensor = Tensor::empty(t, e.shape);
      store_json(t, vals, tensor, e.what);
      given[k] = std::move(tensor);
    }
  }
  envelope.check_all_claimed();
  for (size_t k = 0; k < model_inputs.size(); ++k) {
    if (!given[k].defined()) throw Error("input '" + model_inputs[k].name + "' is missing");
    r.inputs.emplace_back(model_inputs[k].name, std::move(given[k]));
  }
  std::vector<std::string> known;
  for (const ValueInfo& v : model_outputs) known.push_back(v.name);
  r.outputs = read_requested_outputs(envelope.header(), known);
  return r;
}

InferResponseBody make_infer_response(const std::string& model, int version, const InferRequest& request,
                                      const std::vector<ValueInfo>& model_outputs, const std::vector<Tensor>& outputs) {
  json j = response_header(model, version, request.id);
  json outs = json::array();
  std::string binary;
  for (size_t k = 0; k < model_outputs.size() && k < outputs.size(); ++k) {
    const std::string& name = model_outputs[k].name;
    if (!request.outputs.wanted(name)) continue;
    const Tensor& t = outputs[k];
    json shape = json::array();
    for (int64_t d : t.shape()) shape.push_back(d);
    const char* dt = kserve_datatype(t.dtype());
    json o = {{"name", name}, {"datatype", *dt ? dt : dtype_name(t.dtype())}, {"shape", shape}};
    if (request.outputs.as_binary(name)) {
      o["parameters"] = {{"binary_data_size", t.nbytes()}};
      binary.append(static_cast<const char*>(t.raw()), t.nbytes());
    } else {
      o["data"] = tensor_json(t);
    }
    outs.push_back(std::move(o));
  }
  j["outputs"] = std::move(outs);
  return finish_response(j, std::move(binary), request.outputs.any_binary());
}

}  // namespace mminfer::serve
