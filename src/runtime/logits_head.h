// A decoder's output projection (hidden [n, d] x W [d, vocab] -> logits), taken out of the graph
// and run by the runtime. Its full form is the same product. Its greedy form finds the token a
// greedy loop would choose without reading most of W: an int8 copy of W (a quarter of the bytes),
// with h kept in float32, gives every logit with a proven error bound, the loop's processors map those bounds, and only
// the tokens whose upper bound reaches the best lower bound get their exact FP32 logit. The
// chosen token is that of the full product; Whisper-tiny's head is 80 MB of the 131 MB a step reads.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "mminfer/tensor.h"

namespace mminfer::kernels {
class PackedGemm;
}

namespace mminfer::runtime {

// What a greedy loop does to row `row` of logits before its argmax. It must change each logit by
// a non-decreasing function of that logit alone (masks, forced tokens, repetition penalties):
// then bounds on the logits stay bounds after it.
using GreedyRowProcess = std::function<void(int64_t row, std::span<float> logits)>;

class LogitsHead {
 public:
  // When graph output `output` is MatMul(hidden, W) with W a float32 initializer [d, vocab],
  // removes that MatMul, puts `hidden` in the output's place, and returns the head (W itself is
  // dropped from the graph when nothing else reads it). Otherwise returns null and leaves the
  // graph as it was. *hidden_name: the graph output to read instead.
  static std::unique_ptr<LogitsHead> cut(ir::Graph& graph, const std::string& output, std::string* hidden_name);

  // Builds the head from W [d, vocab] (row-major float32).
  LogitsHead(const float* w, int64_t d, int64_t vocab);
  ~LogitsHead();

  int64_t dim() const { return d_; }
  int64_t vocab() const { return vocab_; }

  // logits[r] = hidden[r] W for `rows` rows of `dim()` floats; out holds rows * vocab(). One row
  // sums in panel_dots' order (so greedy()'s exact logits are its values); several go to oneDNN.
  void full(const float* hidden, int64_t rows, float* out) const;

  // One row of logits for a greedy choice: each token that can be the argmax after `process`
  // gets its exact logit, every other one an upper bound that `process` keeps below the winner.
  // So argmax(process(out)) is argmax(process(full)). Returns how many exact logits it computed
  // (vocab() when the bounds ruled out too few tokens and it ran the full row).
  int64_t greedy(const float* hidden, std::span<float> out, const std::function<void(std::span<float>)>& process) const;

 private:
  int64_t d_, vocab_;
  // Panels of 16 rows (kernels/cpu/gemm/panel_dots.h) over [first, last), written to out[first..]
  // and clipped at the vocabulary's end.
  template <typename T>
  void dots(const T* panels, const float* x, int64_t first, int64_t last, float* out) const;
  kernels::PackedGemm& many() const;

  int64_t panels_;                // vocab / 16, rounded up
  std::vector<float> rows_;       // W's columns (the vocabulary's rows) in panels
  std::vector<int8_t> codes_;     // the same as q = round(W / scale), in [-127, 127]
  std::vector<float> scales_;     // per token: max |W| / 127
  std::vector<float> slopes_;     // per token: |logit - scale * (q . h)| <= slope * |h|_1
  mutable std::once_flag many_once_;
  mutable std::unique_ptr<kernels::PackedGemm> many_;  // W for several rows at once, made on first use
};

}  // namespace mminfer::runtime
