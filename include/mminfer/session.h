// Session: load an ONNX model once, run it many times.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mminfer/precision.h"
#include "mminfer/status.h"
#include "mminfer/tensor.h"

namespace mminfer {

// Independent branches of one graph (two towers, say): run one after another, at once (one
// thread each), or whichever the first runs of each input shape measure as faster.
enum class InterOp { kAuto, kOff, kOn };

struct SessionOptions {
  // Threads this session's runs use (its own count: other sessions in the process keep theirs).
  // 0: all cores.
  int threads = 0;
  int opt_level = 2;         // 0: as written; 1: folding and clean-up; 2: also fusions
  std::string profile_path;  // non-empty: write a Chrome trace here when the session ends
  bool profile = false;      // time every node (implied by profile_path); see Session::op_times
  InterOp inter_op = InterOp::kAuto;  // profiled runs always go one node at a time
  PrecisionPolicy precision;          // FP32 everywhere unless it says otherwise
  // Non-empty: the session computes only these of the model's outputs, in this order, and the
  // passes drop the work only the others needed (a pooled embedding without the hidden states it
  // was selected from, say). A name the model does not output fails the load.
  std::vector<std::string> outputs;
  // Outputs left out, with the work only they needed, where the model has them (a decoder's draft
  // heads when no loop reads their guesses, say); names the model lacks are ignored.
  std::vector<std::string> drop_outputs;
  // ViT-style encoders: tokens merged after each block's attention (ToMe-style, the most similar
  // pairs by the cosine of the block's attention input; the class token never merges), so the
  // block's MLP and later layers run on fewer.
  // Per-token outputs shrink with them; 0 (the default) merges nothing. Graphs that are not a
  // plain unmasked vision tower are left whole.
  int merge_tokens = 0;
  // Calibration: values of the model named in `observe` are handed to `observer` after every run,
  // as the model computed them (they stay values of the graph through the optimizations; names
  // the model lacks are ignored). With observe_model set, only the session loaded from that file
  // observes, so one pipeline's other models stay as they are.
  std::vector<std::string> observe;
  std::string observe_model;
  std::function<void(const std::string& value, const Tensor& tensor)> observer;
  // How many runs of this session may execute at once when several threads call run(). Each
  // concurrent run needs its own copy of the kernels (packed weights included), made on first
  // need, so memory grows with this number; 1 (the default) runs calls one after another.
  // Profiled sessions always run one at a time.
  int max_concurrent_runs = 1;
};

// Time spent in one op type over the runs profiled so far.
struct OpTime {
  std::string op_type;  // "Conv", "mminfer::FusedMatMul", ...
  double total_ms = 0;
  int64_t calls = 0;
};

struct ValueInfo {
  std::string name;
  DType dtype = DType::kUndefined;
  bool has_shape = false;          // false: rank unknown
  std::vector<int64_t> dims;       // -1 where symbolic or unknown
  std::vector<std::string> symbols;  // dimension names ("" when fixed or unnamed)
};

using NamedTensor = std::pair<std::string, Tensor>;

// Thread safety: every method may be called from several threads at once. Calls to run() on one
// session execute up to SessionOptions::max_concurrent_runs at a time; the others wait their
// turn (one at a time by default). Loaded sessions are independent: separate sessions run in
// parallel from separate threads, each with its own thread count.
class Session {
 public:
  virtual ~Session() = default;
  static Status load(const std::string& path, const SessionOptions& options,
                     std::unique_ptr<Session>* out);
  static Status load_from_bytes(const std::string& bytes, const std::string& base_dir,
                                const SessionOptions& options, std::unique_ptr<Session>* out);

  virtual const std::vector<ValueInfo>& inputs() const = 0;
  virtual const std::vector<ValueInfo>& outputs() const = 0;
  // Outputs come back in the order of outputs().
  virtual Status run(const std::vector<NamedTensor>& inputs, std::vector<Tensor>* outputs) = 0;
  // Only the outputs named, in that order (empty: all, in the order of outputs()). A tensor
  // already defined in *outputs at the position of a name is a caller-provided buffer (for
  // example Tensor::view over the caller's memory): the result is written into it, and its dtype
  // and shape must match what the model computes; undefined entries are allocated. An unknown
  // name or a mismatched buffer is an error and leaves the buffers untouched.
  virtual Status run(const std::vector<NamedTensor>& inputs, const std::vector<std::string>& output_names,
                     std::vector<Tensor>* outputs) = 0;
  // Per-op-type totals since the last reset, slowest first (empty unless profiling is on).
  // `reset` starts a new window, e.g. after warm-up runs.
  virtual std::vector<OpTime> op_times(bool reset = false) = 0;
};

}  // namespace mminfer
