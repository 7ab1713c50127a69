#include "runtime/logits_head.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/parallel.h"
#include "kernels/cpu/gemm/dense_gemm.h"
#include "kernels/cpu/gemm/panel_dots.h"

namespace mminfer::runtime {

namespace {

constexpr int64_t kPanelGrain = 32;  // panels of 16 tokens per chunk of work

// The greedy form falls back to the full row when more tokens than this survive the bounds.
int64_t most_candidates(int64_t vocab) { return std::max<int64_t>(16, vocab / 8); }

}  // namespace

std::unique_ptr<LogitsHead> LogitsHead::cut(ir::Graph& graph, const std::string& output, std::string* hidden_name) {
  const int out = graph.find_value(output);
  if (out < 0 || !graph.values[out].is_graph_output) return nullptr;
  const int producer = graph.values[out].producer;
  if (producer < 0) return nullptr;
  ir::Node& node = graph.nodes[producer];
  if (node.removed || node.op_type != "MatMul" || !node.domain.empty() || node.inputs.size() != 2) return nullptr;
  const int hidden = node.inputs[0], weight = node.inputs[1];
  if (hidden < 0 || weight < 0) return nullptr;
  ir::Value& w = graph.values[weight];
  if (!w.is_constant || w.constant.dtype() != DType::kFloat32 || w.constant.rank() != 2) return nullptr;
  const int64_t d = w.constant.dim(0), vocab = w.constant.dim(1);
  const ir::Value& h = graph.values[hidden];
  if (d <= 0 || vocab <= 0 || (h.has_shape && (h.dims.empty() || (h.dims.back() >= 0 && h.dims.back() != d)))) return nullptr;
  auto head = std::make_unique<LogitsHead>(w.constant.data<float>(), d, vocab);

  node.removed = true;
  std::replace(graph.outputs.begin(), graph.outputs.end(), out, hidden);
  graph.values[out].is_graph_output = false;
  graph.values[hidden].is_graph_output = true;
  bool read = false;
  for (const ir::Node& n : graph.nodes)
    if (!n.removed) read = read || std::find(n.inputs.begin(), n.inputs.end(), weight) != n.inputs.end();
  if (!read) w.constant = Tensor(), w.is_constant = false;  // the head holds the only copy
  graph.relink();
  *hidden_name = graph.values[hidden].name;
  return head;
}

LogitsHead::LogitsHead(const float* w, int64_t d, int64_t vocab)
    : d_(d),
      vocab_(vocab),
      panels_((vocab + kernels::kPanelRows - 1) / kernels::kPanelRows),
      rows_(static_cast<size_t>(panels_ * kernels::kPanelRows * d), 0.0f),
      codes_(rows_.size(), 0),
      scales_(static_cast<size_t>(vocab)),
      slopes_(static_cast<size_t>(vocab)) {
  // An FP32 dot product of d terms, summed in any order, is off by at most gamma * sum |w h|.
  const double unit = std::ldexp(1.0, -24), gamma = static_cast<double>(d + 2) * unit / (1.0 - static_cast<double>(d + 2) * unit);
  constexpr int64_t lanes = kernels::kPanelRows;
  parallel_for(panels_, 16, [&](int64_t first, int64_t last) {
    for (int64_t p = first; p < last; ++p) {
      // The panel's columns: 16 neighbouring values of each row of W, one cache line at a time.
      float* panel = rows_.data() + p * d * lanes;
      const int64_t tokens = std::min(lanes, vocab - p * lanes);
      for (int64_t k = 0; k < d; ++k) std::copy_n(w + k * vocab + p * lanes, tokens, panel + k * lanes);
      for (int64_t j = 0; j < tokens; ++j) {
        const int64_t i = p * lanes + j;
        double wmax = 0;
        for (int64_t k = 0; k < d; ++k) wmax = std::max(wmax, std::fabs(static_cast<double>(panel[k * lanes + j])));
        const double scale = static_cast<float>(wmax / 127.0);
        double err = 0;
        for (int64_t k = 0; k < d; ++k) {
          const float v = panel[k * lanes + j];
          const double q = scale > 0 ? std::clamp(std::nearbyint(v / scale), -127.0, 127.0) : 0.0;
          codes_[p * d * lanes + k * lanes + j] = static_cast<int8_t>(q);
          err = std::max(err, std::fabs(v - q * scale));
        }
        scales_[i] = static_cast<float>(scale);
        // logit - scale * (q . h) = (W - scale q) . h, at most err * |h|_1; both products are
        // FP32 sums, each off by at most gamma * wmax * |h|_1. Rounded up.
        slopes_[i] = static_cast<float>((err + 2 * gamma * wmax) * (1.0 + 1e-6)) * (1.0f + 1e-6f);
      }
    }
  });
}

LogitsHead::~LogitsHead() = default;

template <typename T>
void LogitsHead::dots(const T* panels, const float* x, int64_t first, int64_t last, float* out) const {
  const bool clipped = last == panels_ && vocab_ % kernels::kPanelRows != 0;
  const int64_t whole = clipped ? last - 1 : last;
  if (whole > first) kernels::panel_dots(panels, d_, x, first, whole, out + first * kernels::kPanelRows);
  if (clipped) {
    float tail[kernels::kPanelRows];
    kernels::panel_dots(panels, d_, x, whole, last, tail);
    std::copy_n(tail, vocab_ - whole * kernels::kPanelRows, out + whole * kernels::kPanelRows);
  }
}

void LogitsHead::full(const float* hidden, int64_t rows, float* out) const {
  if (rows > 1) return many().run(hidden, rows, out);
  parallel_for(panels_, kPanelGrain, [&](int64_t first, int64_t last) { dots(rows_.data(), hidden, first, last, out); });
}

kernels::PackedGemm& LogitsHead::many() const {
  // Several rows at once (beams, a draft's proposals) are a GEMM, where oneDNN's blocking beats a
  // row of panels at a time; its copy of W is made the first time, so greedy and sampled
  // decoding never hold it.
  std::call_once(many_once_, [&] {
    std::vector<float> wt(static_cast<size_t>(vocab_ * d_));  // W transposed, row-major
    for (int64_t i = 0; i < vocab_; ++i) {
      const float* lane = rows_.data() + (i / kernels::kPanelRows) * d_ * kernels::kPanelRows + i % kernels::kPanelRows;
      for (int64_t k = 0; k < d_; ++k) wt[i * d_ + k] = lane[k * kernels::kPanelRows];
    }
    many_ = std::make_unique<kernels::ConstWeightGemm>(wt.data(), d_, vocab_, true, 1.0f, nullptr, kernels::Activation{});
  });
  return *many_;
}

int64_t LogitsHead::greedy(const float* hidden, std::span<float> out, const std::function<void(std::span<float>)>& process) const {
  // When the bounds cannot decide, the full row is the answer.
  auto whole_row = [&] {
    full(hidden, 1, out.data());
    return vocab_;
  };
  double n1 = 0;
  for (int64_t k = 0; k < d_; ++k) n1 += std::fabs(static_cast<double>(hidden[k]));
  if (!std::isfinite(n1) || n1 == 0) return whole_row();
  const float n1_up = static_cast<float>(n1 * (1.0 + 1e-6));
  // Scratch kept per thread: fresh vocabulary-sized buffers would fault in new pages each step.
  thread_local std::vector<float> lo_scratch, hi_scratch;
  lo_scratch.resize(static_cast<size_t>(vocab_));
  // Helper threads see their own thread_local objects: the lambda must hold the caller's.
  std::span<float> lo = lo_scratch, hi = out;
  parallel_for(panels_, kPanelGrain, [&](int64_t first, int64_t last) {
    dots(codes_.data(), hidden, first, last, hi.data());
    const int64_t end = std::min(vocab_, last * kernels::kPanelRows);
    for (int64_t i = first * kernels::kPanelRows; i < end; ++i) {
      // The last product and the sums below round too: a relative hair covers them.
      const float approx = scales_[i] * hi[i];
      const float bound = slopes_[i] * n1_up * (1.0f + 1e-5f) + 1e-6f * std::fabs(approx);
      lo[i] = approx - bound;
      hi[i] = approx + bound;
    }
  });
  // Bounds through the loop's processors: a non-decreasing map per token keeps them bounds.
  std::vector<float>& hi_processed = hi_scratch;
  hi_processed.assign(hi.begin(), hi.end());
  process(lo);
  process(hi_processed);
  const float best_low = *std::max_element(lo.begin(), lo.end());
  if (!(best_low > -std::numeric_limits<float>::infinity())) return whole_row();
  std::vector<int64_t> candidates;
  const int64_t most = most_candidates(vocab_);
  for (int64_t i = 0; i < vocab_ && static_cast<int64_t>(candidates.size()) <= most; ++i)
    if (hi_processed[i] >= best_low) candidates.push_back(i);
  if (static_cast<int64_t>(candidates.size()) > most) return whole_row();
  // Every other token keeps its upper bound, which the processors map below best_low.
  for (int64_t i : candidates) out[i] = kernels::panel_row_dot(rows_.data(), d_, hidden, i);
  return static_cast<int64_t>(candidates.size());
}

}  // namespace mminfer::runtime
