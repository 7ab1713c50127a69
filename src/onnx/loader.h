// Reads an ONNX ModelProto into the engine's IR.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace mminfer::onnx_io {

struct LoadedModel {
  ir::Graph graph;
  std::vector<std::string> warnings;  // checker findings that did not stop the load
};

// bytes: the serialized ModelProto; base_dir: where external data files live.
// Throws Error with a one-line reason for anything malformed.
LoadedModel load_model(const std::string& bytes, const std::string& base_dir);
LoadedModel load_model_file(const std::string& path);

}  // namespace mminfer::onnx_io
