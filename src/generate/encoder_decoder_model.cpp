#include "generate/encoder_decoder_model.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "runtime/session_factory.h"

namespace mminfer::generate {

namespace {

// Optimum names a present after its past: past_key_values.0.decoder.key -> present.0.decoder.key.
std::string present_of(const std::string& past) {
  const std::string prefix = "past_key_values";
  return past.rfind(prefix, 0) == 0 ? "present" + past.substr(prefix.size()) : past;
}

// The options with the decoders' draft heads left out, unless they are wanted.
SessionOptions without_drafts(SessionOptions options, bool draft_heads) {
  if (!draft_heads) options.drop_outputs.push_back(runtime::CachedDecoder::kDraftOutput);
  return options;
}

}  // namespace

EncoderDecoderModel::EncoderDecoderModel(const std::string& first_decoder, const std::string& with_past_decoder,
                                         const SessionOptions& options, DType cache_dtype, bool draft_heads)
    : with_past_(with_past_decoder, without_drafts(options, draft_heads), cache_dtype) {
  // A merged decoder's first-step half, or decoder_model.onnx as it is.
  first_ = runtime::load_session_fixing_branch(first_decoder, without_drafts(options, draft_heads), "use_cache_branch", false);
  if (draft_heads) {
    const auto& outs = first_->outputs();
    if (with_past_.draft_heads() == 0 ||
        std::none_of(outs.begin(), outs.end(), [](const ValueInfo& o) { return o.name == runtime::CachedDecoder::kDraftOutput; }))
      throw Error(with_past_decoder + ": no draft heads (both decoders need the output '" +
                  runtime::CachedDecoder::kDraftOutput + "')");
  }
  std::set<std::string> bound;
  for (const auto& pair : with_past_.binding().pairs) bound.insert({pair.past_key, pair.past_value});
  std::set<std::string> first_outputs;
  for (const auto& o : first_->outputs()) first_outputs.insert(o.name);
  for (const auto& name : bound)
    if (!first_outputs.count(present_of(name)))
      throw Error(first_decoder + ": no output '" + present_of(name) + "' for the cache input '" + name + "'");
  for (const auto& info : with_past_.inputs()) {
    const std::string& in = info.name;
    if (in.rfind("past_key_values", 0) == 0 && !bound.count(in)) {
      if (!first_outputs.count(present_of(in)))
        throw Error(first_decoder + ": no output '" + present_of(in) + "' for the input '" + in + "'");
      cross_names_.push_back(in);
    }
  }
}

size_t EncoderDecoderModel::cache_bytes() const {
  size_t total = cache_->bytes();
  for (const Tensor& t : cross_) total += t.nbytes();
  return total;
}

void EncoderDecoderModel::start(int64_t rows, int64_t capacity) {
  if (!states_.defined() || states_.rank() != 3 || states_.dim(0) * rows_per_input_ != rows)
    throw Error("the encoder states must hold " + std::to_string(rows / rows_per_input_) + " inputs before decoding starts");
  cache_.emplace(with_past_.make_cache(rows, capacity));
  cross_.assign(cross_names_.size(), Tensor());
  cross_row_.assign(static_cast<size_t>(rows), -1);
}

Tensor EncoderDecoderModel::prefill(int64_t row, const std::vector<TokenId>& prompt) {
  if (static_cast<int64_t>(prompt.size()) > cache_->capacity())
    throw Error("the decoder prompt holds " + std::to_string(prompt.size()) + " tokens, more than the context of " +
                std::to_string(cache_->capacity()));
  std::vector<std::string> names = {"logits"};
  const auto& pairs = with_past_.binding().pairs;
  for (const auto& p : pairs) names.insert(names.end(), {present_of(p.past_key), present_of(p.past_value)});
  for (const auto& c : cross_names_) names.push_back(present_of(c));
  if (draft_heads() > 0) names.push_back(runtime::CachedDecoder::kDraftOutput);
  std::vector<Tensor> out;
  Status s = first_->run({{"input_ids", ids_tensor(prompt)}, {"encoder_hidden_states", runtime::rows_of(states_, row / rows_per_input_, 1)}}, names, &out);
  if (!s) throw Error(s.message());
  for (size_t i = 0; i < pairs.size(); ++i) cache_->write(i, row, out[1 + 2 * i], out[2 + 2 * i]);
  cache_->set_length(row, static_cast<int64_t>(prompt.size()));
  for (size_t c = 0; c < cross_names_.size(); ++c) {
    const Tensor& present = out[1 + 2 * pairs.size() + c];
    // One slot per row; with a single input, one slot for all (its beams share it: reorder()).
    const int64_t slots = one_input() ? 1 : cache_->rows();
    if (!cross_[c].defined()) {
      Shape shape = present.shape();
      shape[0] = slots;
      cross_[c] = Tensor::empty(DType::kFloat32, shape);
    }
    if (present.dtype() != DType::kFloat32 || present.dim(0) != 1 || present.numel() * slots != cross_[c].numel())
      throw Error("'" + present_of(cross_names_[c]) + "' is " + shape_str(present.shape()) + ", unlike the other rows'");
    std::memcpy(runtime::rows_of(cross_[c], slot(row), 1).raw(), present.raw(), present.nbytes());
  }
  cross_row_[row] = row;
  if (draft_heads() > 0) keep_last_drafts(out.back());
  const Tensor& logits = out[0];
  int64_t steps = logits.dim(1), vocab = logits.dim(2);
  Tensor last = Tensor::empty(DType::kFloat32, {1, vocab});
  std::memcpy(last.raw(), logits.data<float>() + (steps - 1) * vocab, sizeof(float) * vocab);
  return last;
}

void EncoderDecoderModel::reorder(std::span<const int64_t> sources) {
  cache_->reorder(sources);
  // Beams of one input share its cross keys and values: rows copy them only when they come from
  // another prompt's row (the first reorder after the prefills). A single input has one slot,
  // which every step passes to all rows.
  std::vector<int64_t> made_by = cross_row_;
  for (size_t r = 0; r < sources.size(); ++r) {
    int64_t from = sources[r];
    if (made_by[from] == made_by[r]) continue;
    if (!one_input())
      for (Tensor& t : cross_)
        if (t.defined()) std::memcpy(runtime::rows_of(t, static_cast<int64_t>(r), 1).raw(), runtime::rows_of(t, from, 1).raw(), t.nbytes() / t.dim(0));
    cross_row_[r] = made_by[from];
  }
}

std::vector<NamedTensor> EncoderDecoderModel::cross_inputs(int64_t row, int64_t n) const {
  if (row < 0 || n < 1 || row + n > static_cast<int64_t>(cross_row_.size()))
    throw Error("decoder step over rows " + std::to_string(row) + ".." + std::to_string(row + n - 1) + " of " +
                std::to_string(cross_row_.size()));
  // Rows whose cross keys and values one prompt made (the beams of one input) pass a single copy:
  // the decoder's attention broadcasts it over them and reads it once a step, not once per beam.
  const int64_t source = cross_row_[static_cast<size_t>(row)];
  bool shared = true;
  for (int64_t r = row; r < row + n; ++r) {
    if (cross_row_[static_cast<size_t>(r)] < 0) throw Error("decoder row " + std::to_string(r) + " stepped before its prompt");
    shared = shared && cross_row_[static_cast<size_t>(r)] == source;
  }
  std::vector<NamedTensor> extra;
  for (size_t c = 0; c < cross_names_.size(); ++c)
    extra.emplace_back(cross_names_[c], shared ? runtime::rows_of(cross_[c], slot(source), 1) : runtime::rows_of(cross_[c], row, n));
  return extra;
}

Tensor EncoderDecoderModel::step(int64_t row, const Tensor& ids) {
  return with_past_.step(*cache_, row, "input_ids", ids, cross_inputs(row, ids.dim(0)));
}

Tensor EncoderDecoderModel::extend(int64_t row, const std::vector<TokenId>& ids) {
  Tensor logits = with_past_.step_positions(*cache_, row, "input_ids", ids_tensor(ids), cross_inputs(row, 1));
  drafts_from_prefill_ = false;
  return logits;
}

void EncoderDecoderModel::keep_last_drafts(const Tensor& drafts) {
  const int64_t heads = with_past_.draft_heads();
  if (drafts.dtype() != DType::kFloat32 || drafts.rank() != 4 || drafts.dim(0) != 1 || drafts.dim(2) != heads)
    throw Error(std::string("the first decoder's ") + runtime::CachedDecoder::kDraftOutput + " are " + dtype_name(drafts.dtype()) +
                " " + shape_str(drafts.shape()) + ", expected float32 [1, positions, " + std::to_string(heads) + ", vocab]");
  const int64_t vocab = drafts.dim(3), last = drafts.dim(1) - 1;
  drafts_ = Tensor::empty(DType::kFloat32, {1, heads, vocab});
  std::memcpy(drafts_.raw(), drafts.data<float>() + last * heads * vocab, sizeof(float) * heads * vocab);
  drafts_from_prefill_ = true;
}

void EncoderDecoderModel::truncate(int64_t row, int64_t length) { cache_->truncate(row, length); }

}  // namespace mminfer::generate
