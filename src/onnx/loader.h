// Reads an ONNX ModelProto into the engine's IR.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace onnx {
class ModelProto;
}

namespace mminfer::onnx_io {

struct LoadedModel {
  ir::Graph graph;
  std::vector<std::string> warnings;  // checker findings that did not stop the load
};

// bytes: the serialized ModelProto; base_dir: where external data files live.
// Throws Error with a one-line reason for anything malformed.
LoadedModel load_model(const std::string& bytes, const std::string& base_dir);
LoadedModel load_model_file(const std::string& path);
// The same, with `rewrite` applied to the parsed file before it becomes IR (base_dir: where its
// external data lives): a writer of onnx/ (write_nbits_weights...) run as the model loads.
using ProtoRewrite = std::function<void(onnx::ModelProto& model, const std::string& base_dir)>;
LoadedModel load_model_file(const std::string& path, const ProtoRewrite& rewrite);

}  // namespace mminfer::onnx_io
