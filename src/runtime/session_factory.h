// A Session over a model the caller has loaded and possibly rewritten (the generation loop binds
// a decoder's KV cache before the usual passes run).
#pragma once
#include <memory>

#include "mminfer/session.h"
#include "onnx/loader.h"

namespace mminfer::runtime {

// Throws Error as the kernels' creation does for unsupported ops.
std::unique_ptr<Session> session_from_model(onnx_io::LoadedModel model, const SessionOptions& options);

}  // namespace mminfer::runtime
