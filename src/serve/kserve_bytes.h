// KServe v2 BYTES tensors, as Triton's Python-backend and ensemble users send them to the
// pipelines (clip, ocr, audio-encoder): each element is one file's bytes or one UTF-8 text.
//   JSON form    "data" holds strings. Texts are taken as they are; image and audio elements
//                are base64 or data URLs ("data:image/png;base64,..."), since a JSON string
//                cannot carry a file's raw bytes.
//   binary form  parameters.binary_data_size bytes after the JSON header, in which each element
//                is a 4-byte little-endian length and then that many bytes (the raw file).
// Answers carry FP32 tensors (embeddings) and BYTES tensors (strings) in either form.
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "serve/kserve_tensors.h"

namespace mminfer::serve {

// A tensor of a model's signature: what metadata advertises and /infer accepts.
struct TensorSpec {
  std::string name;
  std::string datatype;       // "BYTES", "FP32"
  std::vector<int64_t> dims;  // -1: any size
  bool base64_in_json = false;  // BYTES inputs that are files: base64 in the JSON form
};

struct PipelineSignature {
  std::vector<TensorSpec> inputs;  // each optional, at least one given
  std::vector<TensorSpec> outputs;
};

struct BytesInput {
  std::string name;
  std::vector<std::string> elements;
};

struct BytesRequest {
  std::string id;
  std::vector<BytesInput> inputs;     // those given, in the signature's order
  RequestedOutputs outputs;
};

// Parses a request against the signature: names known and given once, datatype BYTES, shape
// of the advertised rank and fixed sizes, as many elements as the shape says, none empty.
// Throws Error with one line naming the input and the problem.
BytesRequest parse_bytes_request(const std::string& body, std::optional<size_t> header_length, const PipelineSignature& sig);

struct ResponseTensor {
  std::string name;
  std::string datatype;  // "FP32" (fp32 holds the values) or "BYTES" (bytes holds the elements)
  std::vector<int64_t> shape;
  std::vector<float> fp32;
  std::vector<std::string> bytes;
};

// The answer, with the outputs the request asked for (all of `outputs` when it named none),
// binary where it asked for binary data.
InferResponseBody make_bytes_response(const std::string& model, int version, const BytesRequest& request,
                                      const std::vector<ResponseTensor>& outputs);

}  // namespace mminfer::serve
