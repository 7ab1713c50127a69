// A Session over a model the caller has loaded and possibly rewritten (the generation loop binds
// a decoder's KV cache before the usual passes run).
#pragma once
#include <memory>

#include "mminfer/session.h"
#include "onnx/loader.h"

namespace mminfer::runtime {

// Throws Error as the kernels' creation does for unsupported ops.
std::unique_ptr<Session> session_from_model(onnx_io::LoadedModel model, const SessionOptions& options);

// Loads `path` with its boolean graph input `branch_input`, if it has one, fixed to `value`
// (passes/fix_branch_input.h: Optimum's merged decoders). Throws Error with a one-line reason.
std::unique_ptr<Session> load_session_fixing_branch(const std::string& path, const SessionOptions& options,
                                                    const std::string& branch_input, bool value);

}  // namespace mminfer::runtime
