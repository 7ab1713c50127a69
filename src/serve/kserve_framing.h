// What every KServe v2 infer request and answer shares, whatever its tensors hold: the JSON
// header (the first Inference-Header-Content-Length bytes, or the whole body), the binary data
// after it, each input's name, datatype and shape, the outputs asked for, and the answer's
// framing. Numeric tensors (kserve_tensors) and BYTES tensors (kserve_bytes) build on it.
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mminfer::serve {

// A request's JSON header and a cursor over the binary data that follows it.
class InferEnvelope {
 public:
  // Throws Error when the header length is larger than the body or the header is not a JSON
  // object with an "inputs" list; `id`, when present, must be a string.
  InferEnvelope(const std::string& body, std::optional<size_t> header_length);

  const nlohmann::json& header() const { return header_; }
  const std::string& id() const { return id_; }
  // The next n bytes of binary data, claimed by `what`; throws when there is no binary part
  // (no Inference-Header-Content-Length) or the body ends first.
  std::string_view take_binary(size_t n, const std::string& what);
  // Throws when binary bytes are left that no input claimed.
  void check_all_claimed() const;

 private:
  nlohmann::json header_;
  std::string id_;
  std::string_view binary_;
  bool has_binary_part_ = false;
  size_t taken_ = 0;
};

// One entry of "inputs": read and bounded before any data is touched, so a shape that claims
// far more elements than the body holds costs nothing.
struct InputEntry {
  std::string name, what;  // what: "input 'x'", for messages
  std::string datatype;
  std::vector<int64_t> shape;
  size_t count = 1;                   // elements the shape holds
  std::optional<size_t> binary_size;  // parameters.binary_data_size
  const nlohmann::json* data = nullptr;

  // Rank and fixed sizes as declared (-1: any size).
  void check_dims(const std::vector<int64_t>& dims) const;
};

// Throws Error for a missing name, datatype or shape, negative or non-integer dimensions, a
// shape of more than max_elements elements, neither data nor binary_data_size.
InputEntry read_input_entry(const nlohmann::json& in, size_t max_elements);

// The request's "outputs" (names among `known`, each perhaps with parameters.binary_data) and
// parameters.binary_data_output. Throws Error for an unknown output.
struct RequestedOutputs {
  std::vector<std::string> names;  // empty: all of them
  std::set<std::string> binary;
  bool all_binary = false;

  bool wanted(const std::string& name) const;
  bool as_binary(const std::string& name) const { return all_binary || binary.count(name) > 0; }
  bool any_binary() const { return all_binary || !binary.empty(); }
};
RequestedOutputs read_requested_outputs(const nlohmann::json& request, const std::vector<std::string>& known);

struct InferResponseBody {
  std::string body;
  std::optional<size_t> header_length;  // set when binary tensors follow the JSON
};

// {"model_name", "model_version", "id"?}: the start of every answer.
nlohmann::json response_header(const std::string& model, int version, const std::string& id);
// The JSON header, then the binary data when any output was asked for as binary.
InferResponseBody finish_response(const nlohmann::json& header, std::string binary, bool binary_asked);

}  // namespace mminfer::serve
