// KServe v2 (Open Inference Protocol) tensors over REST: the JSON infer request and response,
// and the binary tensor extension (a JSON header of Inference-Header-Content-Length bytes,
// then each binary tensor's raw little-endian bytes in order).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "mminfer/session.h"
#include "serve/kserve_framing.h"

namespace mminfer::serve {

struct InferRequest {
  std::string id;
  std::vector<NamedTensor> inputs;       // in the model's input order
  RequestedOutputs outputs;
};

// Parses and checks a request against the model's inputs: every input given once, names
// known, datatype as the model declares, shape of the right rank and fixed sizes, element
// count equal to the shape's, values in range of the datatype. Throws Error with one line
// naming the input and the problem. `header_length` is the Inference-Header-Content-Length
// header's value, or nullopt when absent (the whole body is JSON).
InferRequest parse_infer_request(const std::string& body, std::optional<size_t> header_length,
                                 const std::vector<ValueInfo>& model_inputs, const std::vector<ValueInfo>& model_outputs);

InferResponseBody make_infer_response(const std::string& model, int version, const InferRequest& request,
                                      const std::vector<ValueInfo>& model_outputs, const std::vector<Tensor>& outputs);

}  // namespace mminfer::serve
