#include "runtime/cached_decoder.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "core/int8_rows.h"
#include "core/one_line.h"
#include "onnx/loader.h"
#include "core/parallel.h"
#include "passes/fix_branch_input.h"
#include "runtime/session_factory.h"

namespace mminfer::runtime {

namespace {

Tensor int_tensor(DType dtype, Shape shape, const std::vector<int64_t>& values) {
  Tensor t = Tensor::empty(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kInt32) t.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
    else t.data<int64_t>()[i] = values[i];
  }
  return t;
}

// The head is the runtime's unless MMINFER_LOGITS_HEAD=graph (for comparisons) or the decoder's
// float layers are to run below FP32 (the graph's passes would lower that MatMul too).
bool wants_logits_head(const PrecisionPolicy& precision) {
  const char* v = std::getenv("MMINFER_LOGITS_HEAD");
  if (v && std::string(v) == "graph") return false;
  if (v && *v && std::string(v) != "runtime") throw Error("MMINFER_LOGITS_HEAD must be runtime or graph, got '" + std::string(v) + "'");
  return !precision.any_below_fp32();
}

}  // namespace

CachedDecoder::CachedDecoder(const std::string& path, const SessionOptions& options, DType cache_dtype)
    : threads_(options.threads), cache_dtype_(cache_dtype) {
  onnx_io::LoadedModel model = load_decoder_model(path, options.precision);
  passes::fix_branch_input(model.graph, "use_cache_branch", true);  // a merged decoder's with-past half
  std::string why;
  auto binding = passes::bind_kv_cache(model.graph, &why, cache_dtype);
  if (!binding) throw Error(path + ": cannot keep this decoder's KV cache in the runtime: " + one_line(why));
  binding_ = *binding;
  for (const auto& pair : binding_.pairs) {
    const ir::Value& k = model.graph.values[model.graph.find_value(pair.past_key)];
    const ir::Value& v = model.graph.values[model.graph.find_value(pair.past_value)];
    const int64_t least = cache_dtype == DType::kInt8 ? int8_rows::kScaleBytes : 0;
    if (!k.has_shape || !v.has_shape || k.dims.size() != 4 || v.dims.size() != 4 || k.dims[1] <= 0 || k.dims[3] <= least ||
        v.dims[1] != k.dims[1] || v.dims[3] <= least)
      throw Error(path + ": past input '" + pair.past_key + "' does not declare its KV heads and head size");
    // The pass widened an int8 past's rows by their scale: the layer keeps the vectors' sizes.
    const int64_t extra = cache_dtype == DType::kInt8 ? int8_rows::kScaleBytes : 0;
    layers_.push_back({k.dims[1], k.dims[3] - extra, v.dims[3] - extra});
  }
  int mask = model.graph.find_value("attention_mask");
  rows_share_length_ = !binding_.shape_feeds.empty() || (mask >= 0 && model.graph.values[mask].is_graph_input);
  const bool runtime_heads = wants_logits_head(options.precision);
  if (runtime_heads) head_ = LogitsHead::cut(model.graph, "logits", &output_);
  const auto& drop = options.drop_outputs;
  const int drafts = model.graph.find_value(kDraftOutput);
  if (drafts >= 0 && model.graph.values[drafts].is_graph_output &&
      std::find(drop.begin(), drop.end(), kDraftOutput) == drop.end()) {
    const ir::Value& o = model.graph.values[drafts];
    if (o.dtype != DType::kFloat32 || !o.has_shape || o.dims.size() != 4 || o.dims[2] <= 0)
      throw Error(path + ": '" + kDraftOutput + "' must be float32 [batch, positions, heads, vocab] with a fixed head count");
    draft_heads_ = o.dims[2];
    draft_output_ = kDraftOutput;
    if (runtime_heads) draft_head_ = LogitsHead::cut(model.graph, kDraftOutput, &draft_output_);
  }
  session_ = session_from_model(std::move(model), options, path);
}

std::vector<int64_t> CachedDecoder::draft_guesses(int64_t at, size_t n) const {
  if (!draft_head_) return draft_argmax(drafts_, at, n);
  if (!drafts_.defined() || at < 0 || at >= drafts_.dim(0) || static_cast<int64_t>(n) > draft_heads_)
    throw std::invalid_argument("no draft heads' guesses at that position");
  ThreadScope threads(threads_);
  std::vector<float> logits(static_cast<size_t>(draft_head_->vocab()));
  std::vector<int64_t> guesses;
  for (size_t h = 0; h < n; ++h) {
    const float* state = drafts_.data<float>() + (at * draft_heads_ + static_cast<int64_t>(h)) * draft_head_->dim();
    draft_head_->greedy(state, logits, [](std::span<float>) {});  // bounds where a token cannot win
    guesses.push_back(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  return guesses;
}

std::vector<int64_t> draft_argmax(const Tensor& draft_logits, int64_t at, size_t n) {
  if (!draft_logits.defined() || draft_logits.rank() != 3 || at < 0 || at >= draft_logits.dim(0) ||
      static_cast<int64_t>(n) > draft_logits.dim(1))
    throw std::invalid_argument("no draft heads' guesses at that position");
  const int64_t heads = draft_logits.dim(1), vocab = draft_logits.dim(2);
  std::vector<int64_t> guesses;
  for (size_t h = 0; h < n; ++h) {
    const float* row = draft_logits.data<float>() + (at * heads + static_cast<int64_t>(h)) * vocab;
    guesses.push_back(std::max_element(row, row + vocab) - row);
  }
  return guesses;
}

std::vector<OpTime> CachedDecoder::op_times() {
  std::vector<OpTime> times = session_->op_times(true);
  if (head_calls_ > 0 && !times.empty()) times.push_back({"LogitsHead", head_ms_, head_calls_});
  head_ms_ = 0, head_calls_ = 0;
  return times;
}

Tensor CachedDecoder::to_logits(Tensor rows, int64_t first_row) {
  if (!head_) return rows;
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n = rows.dim(0), vocab = head_->vocab();
  Tensor logits = Tensor::empty(DType::kFloat32, {n, vocab});
  ThreadScope threads(threads_);
  if (greedy_ && first_row >= 0) {
    for (int64_t r = 0; r < n; ++r) {
      std::span<float> out(logits.data<float>() + r * vocab, static_cast<size_t>(vocab));
      greedy_exact_ += head_->greedy(rows.data<float>() + r * head_->dim(), out,
                                     [&](std::span<float> l) { greedy_(first_row + r, l); });
      ++greedy_rows_;
    }
  } else {
    head_->full(rows.data<float>(), n, logits.data<float>());
  }
  head_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ++head_calls_;
  return logits;
}

KvCache CachedDecoder::make_cache(int64_t rows, int64_t capacity) const {
  return KvCache(layers_, rows, capacity, cache_dtype_);
}

const ValueInfo* CachedDecoder::input(const std::string& name) const {
  for (const auto& info : session_->inputs())
    if (info.name == name) return &info;
  return nullptr;
}

bool CachedDecoder::has_input(const std::string& name) const { return input(name) != nullptr; }

Tensor CachedDecoder::split_unequal(const std::vector<int64_t>& lengths, const Tensor& tokens,
                                   const std::vector<NamedTensor>& extra, const RowsStep& run) {
  const auto n = static_cast<int64_t>(lengths.size());
  if (!rows_share_length_ || std::all_of(lengths.begin(), lengths.end(), [&](int64_t l) { return l == lengths[0]; }))
    return run(0, n, tokens, extra);
  std::vector<Tensor> parts;
  for (int64_t r = 0; r < n; ++r) {
    std::vector<NamedTensor> extra_r;
    for (const auto& [name, t] : extra) extra_r.emplace_back(name, t.rank() > 0 && t.dim(0) == n ? rows_of(t, r, 1) : t);
    parts.push_back(run(r, 1, rows_of(tokens, r, 1), extra_r));
  }
  int64_t vocab = parts[0].dim(1);
  Tensor logits = Tensor::empty(DType::kFloat32, {n, vocab});
  for (int64_t r = 0; r < n; ++r) std::memcpy(logits.data<float>() + r * vocab, parts[r].data<float>(), sizeof(float) * vocab);
  return logits;
}

Tensor CachedDecoder::step(KvCache& cache, int64_t row, const std::string& tokens_name, const Tensor& tokens,
                           const std::vector<NamedTensor>& extra) {
  const int64_t n = tokens.rank() >= 1 ? tokens.dim(0) : 0;
  if (row < 0 || n <= 0 || row + n > cache.rows()) throw Error("decoder step: rows out of the cache's range");
  std::vector<int64_t> lengths(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) lengths[r] = cache.length(row + r);
  Tensor out = split_unequal(lengths, tokens, extra, [&](int64_t first, int64_t count, const Tensor& t, const std::vector<NamedTensor>& e) {
    // Each row is one block of the whole capacity.
    std::vector<int64_t> slots(static_cast<size_t>(count)), before(slots.size());
    for (int64_t r = 0; r < count; ++r) slots[r] = row + first + r, before[r] = lengths[first + r];
    Tensor logits = run_step(cache, before, int_tensor(DType::kInt32, {count, 1}, slots), tokens_name, t, e);
    for (int64_t r = 0; r < count; ++r) cache.set_length(slots[r], before[r] + t.dim(1));
    return logits;
  });
  return to_logits(std::move(out), row);
}

Tensor CachedDecoder::step_positions(KvCache& cache, int64_t row, const std::string& tokens_name, const Tensor& tokens,
                                     const std::vector<NamedTensor>& extra) {
  if (row < 0 || row >= cache.rows() || tokens.rank() < 2 || tokens.dim(0) != 1)
    throw Error("decoder step: one row of tokens for a row of the cache");
  const int64_t before = cache.length(row);
  Tensor logits = run_step(cache, {before}, int_tensor(DType::kInt32, {1, 1}, {row}), tokens_name, tokens, extra, true);
  cache.set_length(row, before + tokens.dim(1));
  return to_logits(Tensor::alias(logits, DType::kFloat32, {logits.dim(1), logits.dim(2)}, const_cast<void*>(logits.raw())), -1);
}

Tensor CachedDecoder::step(KvCache& pool, std::span<BlockList* const> sequences, const std::string& tokens_name,
                           const Tensor& tokens, const std::vector<NamedTensor>& extra) {
  const auto n = static_cast<int64_t>(sequences.size());
  if (n <= 0 || tokens.rank() < 2 || tokens.dim(0) != n) throw Error("decoder step: one row of tokens per sequence");
  std::vector<int64_t> lengths(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) lengths[r] = sequences[r]->length;
  Tensor out = split_unequal(lengths, tokens, extra, [&](int64_t first, int64_t count, const Tensor& t, const std::vector<NamedTensor>& e) {
    const int64_t S = t.dim(1);
    size_t width = 1;
    for (int64_t r = first; r < first + count; ++r) {
      const BlockList& s = *sequences[r];
      if (s.length + S > static_cast<int64_t>(s.blocks.size()) * pool.capacity())
        throw Error("decoder step: a sequence's blocks do not cover its next " + std::to_string(S) + " positions");
      width = std::max(width, s.blocks.size());
    }
    std::vector<int64_t> table(static_cast<size_t>(count) * width, 0), before;
    for (int64_t r = 0; r < count; ++r) {
      const BlockList& s = *sequences[first + r];
      std::copy(s.blocks.begin(), s.blocks.end(), table.begin() + static_cast<std::ptrdiff_t>(r * width));
      before.push_back(s.length);
    }
    Tensor logits = run_step(pool, before, int_tensor(DType::kInt32, {count, static_cast<int64_t>(width)}, table), tokens_name, t, e);
    for (int64_t r = first; r < first + count; ++r) sequences[r]->length += S;
    return logits;
  });
  return to_logits(std::move(out), -1);
}

Tensor CachedDecoder::run_step(KvCache& cache, const std::vector<int64_t>& lengths, const Tensor& table,
                               const std::string& tokens_name, const Tensor& tokens, const std::vector<NamedTensor>& extra,
                               bool every_position) {
  const auto n = static_cast<int64_t>(lengths.size());
  const int64_t S = tokens.rank() >= 2 ? tokens.dim(1) : 0;
  if (S <= 0) throw Error("decoder step: no new positions");
  const int64_t capacity = cache.capacity() * table.dim(1);
  for (int64_t r = 0; r < n; ++r)
    if (lengths[r] + S > capacity)
      throw Error("the sequence needs " + std::to_string(lengths[r] + S) + " positions, more than the context of " +
                  std::to_string(capacity));
  std::vector<NamedTensor> feed = extra;
  feed.emplace_back(tokens_name, tokens);
  if (has_input(passes::KvCacheBinding::kLengthsInput))
    feed.emplace_back(passes::KvCacheBinding::kLengthsInput, int_tensor(DType::kInt64, {n}, lengths));
  if (has_input(passes::KvCacheBinding::kBlockTableInput)) feed.emplace_back(passes::KvCacheBinding::kBlockTableInput, table);
  if (has_input(passes::KvCacheBinding::kSeqlensInput)) {  // GroupQueryAttention's view of the lengths
    std::vector<int64_t> last(lengths.size());
    int64_t total = 0;
    for (size_t r = 0; r < lengths.size(); ++r) last[r] = lengths[r] + S - 1, total = std::max(total, lengths[r] + S);
    feed.emplace_back(passes::KvCacheBinding::kSeqlensInput, int_tensor(DType::kInt32, {n}, last));
    feed.emplace_back(passes::KvCacheBinding::kTotalInput, int_tensor(DType::kInt32, {}, {total}));
  }
  if (const ValueInfo* pos = input("position_ids")) {
    std::vector<int64_t> p;
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < S; ++i) p.push_back(lengths[r] + i);
    feed.emplace_back("position_ids", int_tensor(pos->dtype, {n, S}, p));
  }
  if (const ValueInfo* mask = input("attention_mask")) {
    int64_t total = lengths[0] + S;
    feed.emplace_back("attention_mask", int_tensor(mask->dtype, {n, total}, std::vector<int64_t>(n * total, 1)));
  }
  for (const auto& f : binding_.shape_feeds) {
    size_t layer = 0;
    while (layer < binding_.pairs.size() && binding_.pairs[layer].past_key != f.past && binding_.pairs[layer].past_value != f.past)
      ++layer;
    bool value = binding_.pairs[layer].past_value == f.past;
    std::vector<int64_t> shape = {n, layers_[layer].kv_heads, lengths[0],
                                  value ? layers_[layer].value_dim : layers_[layer].head_dim};
    std::vector<int64_t> part(shape.begin() + f.start, shape.begin() + f.end);
    feed.emplace_back(f.input, int_tensor(DType::kInt64, {static_cast<int64_t>(part.size())}, part));
  }
  for (size_t i = 0; i < binding_.pairs.size(); ++i) {
    feed.emplace_back(binding_.pairs[i].past_key, cache.keys(i, 0, cache.rows()));
    feed.emplace_back(binding_.pairs[i].past_value, cache.values(i, 0, cache.rows()));
  }
  std::vector<Tensor> out;
  const bool drafts = every_position && draft_heads_ > 0;
  Status s = drafts ? session_->run(feed, {output_, draft_output_}, &out) : session_->run(feed, {output_}, &out);
  if (!s) throw Error(s.message());
  if (drafts) {
    const Tensor& d = out[1];
    if (d.dtype() != DType::kFloat32 || d.rank() != 4 || d.dim(0) != 1 || d.dim(1) != S || d.dim(2) != draft_heads_ ||
        (draft_head_ && d.dim(3) != draft_head_->dim()))
      throw Error(std::string("the decoder's ") + kDraftOutput + " are " + dtype_name(d.dtype()) + " " + shape_str(d.shape()) +
                  ", expected float32 [1, " + std::to_string(S) + ", " + std::to_string(draft_heads_) + ", vocab]");
    const Shape shape = {S, d.dim(2), d.dim(3)};
    if (!drafts_.defined() || drafts_.shape() != shape) drafts_ = Tensor::empty(DType::kFloat32, shape);  // one buffer while S holds
    std::memcpy(drafts_.raw(), d.raw(), d.nbytes());
  }
  const Tensor& logits = out[0];  // or the head's input
  if (logits.dtype() != DType::kFloat32 || logits.rank() != 3 || logits.dim(0) != n || (head_ && logits.dim(2) != head_->dim()))
    throw Error("the decoder's " + std::string(head_ ? "last hidden state is " : "logits are ") + dtype_name(logits.dtype()) +
                " " + shape_str(logits.shape()) + ", expected float32 [" + std::to_string(n) + ", positions, " +
                (head_ ? std::to_string(head_->dim()) : "vocab") + "]");
  const int64_t steps = logits.dim(1), vocab = logits.dim(2);
  if (every_position) {
    if (steps != S) throw Error("the decoder gave logits for " + std::to_string(steps) + " of " + std::to_string(S) + " positions");
    return logits;
  }
  // One position each (a decode step): the rows are the output's own, nothing to gather.
  if (steps == 1) return Tensor::alias(logits, DType::kFloat32, {n, vocab}, const_cast<void*>(logits.raw()));
  Tensor last = Tensor::empty(DType::kFloat32, {n, vocab});
  for (int64_t r = 0; r < n; ++r)
    std::memcpy(last.data<float>() + r * vocab, logits.data<float>() + (r * steps + steps - 1) * vocab, sizeof(float) * vocab);
  return last;
}

}  // namespace mminfer::runtime
