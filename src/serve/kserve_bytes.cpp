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
  InferEnvelope envelope(body, header_length);
  if (envelope.header()["inputs"].empty()) throw Error("the request needs an 'inputs' list");
  BytesRequest r;
  r.id = envelope.id();
  std::vector<std::optional<std::vector<std::string>>> given(sig.inputs.size());
  for (const json& in : envelope.header()["inputs"]) {
    InputEntry e = read_input_entry(in, kMaxBytesElements);
    const std::string& what = e.what;
    size_t k = 0;
    while (k < sig.inputs.size() && sig.inputs[k].name != e.name) ++k;
    if (k == sig.inputs.size()) throw Error(what + " is not an input of the model");
    if (given[k]) throw Error(what + " is given twice");
    const TensorSpec& spec = sig.inputs[k];
    if (e.datatype != spec.datatype) throw Error(what + ": the model takes " + spec.datatype + ", not " + e.datatype);
    e.check_dims(spec.dims);
    if (e.count == 0) throw Error(what + ": the shape holds no elements");
    std::vector<std::string> elements;
    if (e.binary_size) {
      std::string_view bytes = envelope.take_binary(*e.binary_size, what);
      elements = split_binary(bytes.data(), bytes.size(), e.count, what);
    } else {
      std::vector<const json*> vals;
      strings_of(*e.data, vals, what);
      if (vals.size() != e.count)
        throw Error(what + ": " + std::to_string(vals.size()) + " values for a shape of " + std::to_string(e.count) + " elements");
      for (size_t i = 0; i < vals.size(); ++i) {
        const std::string& s = vals[i]->get_ref<const std::string&>();
        if (!spec.base64_in_json) {
          elements.push_back(s);
          continue;
        }
        try {
          auto b = decode_data_url(s);
          elements.emplace_back(b.begin(), b.end());
        } catch (const Error& err) {
          throw Error(what + ": element " + std::to_string(i) + " is not base64 (file bytes in JSON are base64): " + err.what());
        }
      }
    }
    for (size_t i = 0; i < elements.size(); ++i)
      if (elements[i].empty()) throw Error(what + ": element " + std::to_string(i) + " is empty");
    given[k] = std::move(elements);
  }
  envelope.check_all_claimed();
  for (size_t k = 0; k < sig.inputs.size(); ++k)
    if (given[k]) r.inputs.push_back({sig.inputs[k].name, std::move(*given[k])});
  std::vector<std::string> known;
  for (const TensorSpec& o : sig.outputs) known.push_back(o.name);
  r.outputs = read_requested_outputs(envelope.header(), known);
  return r;
}

InferResponseBody make_bytes_response(const std::string& model, int version, const BytesRequest& request,
                                      const std::vector<ResponseTensor>& outputs) {
  json j = response_header(model, version, request.id);
  json outs = json::array();
  std::string binary;
  for (const ResponseTensor& t : outputs) {
    if (!request.outputs.wanted(t.name)) continue;
    json o = {{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}};
    if (request.outputs.as_binary(t.name)) {
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
  return finish_response(j, std::move(binary), request.outputs.any_binary());
}

}  // namespace mminfer::serve
