// A Session over a model the caller has loaded and possibly rewritten (the generation loop binds
// a decoder's KV cache before the usual passes run).
#pragma once
#include <memory>

#include "mminfer/session.h"
#include "onnx/loader.h"

namespace mminfer::runtime {

// Throws Error as the kernels' creation does for unsupported ops.
// `path`: the file it came from, matched against SessionOptions::observe_model.
std::unique_ptr<Session> session_from_model(onnx_io::LoadedModel model, const SessionOptions& options,
                                            const std::string& path = "");

// Loads a generative pipeline's decoder. With precision.decoder_weight_bits set, its constant
// MatMul weights become MatMulNBits as the file loads (onnx_io::write_nbits_weights, the writer
// of `mminfer optimize --quantize int4`), so the float weights are never all held as IR tensors.
onnx_io::LoadedModel load_decoder_model(const std::string& path, const PrecisionPolicy& precision);

// Loads `path` with its boolean graph input `branch_input`, if it has one, fixed to `value`
// (passes/fix_branch_input.h: Optimum's merged decoders), as a decoder (load_decoder_model). Throws Error with a one-line reason.
std::unique_ptr<Session> load_session_fixing_branch(const std::string& path, const SessionOptions& options,
                                                    const std::string& branch_input, bool value);

}  // namespace mminfer::runtime
