#include "pipelines/clip/clip_pipeline.h"

#include <algorithm>
#include <map>
#include <cmath>

#include "core/one_line.h"
#include "modal/text/unicode.h"
#include "pipelines/pipeline_models.h"

namespace mminfer::clip {

namespace {

using pipelines::Embedding;
using pipelines::Manifest;

// A tower computing only its embedding output, so the passes skip work nothing else needs (the
// last layer's MLP for every token but the pooled one). When that fails, the tower loads whole
// and output_index sorts it out: a single output under another name, or the manifest naming an
// output the model lacks.
std::unique_ptr<Session> open_tower(const Manifest& m, const std::string& role, const std::string& key,
                                    SessionOptions opts) {
  opts.outputs = {m.string("outputs", key, key)};
  std::unique_ptr<Session> s;
  Status st = Session::load(m.file(role), opts, &s);
  if (st) return s;
  opts.outputs.clear();
  return pipelines::open_role(m, role, opts);
}

// Index of the output named by outputs.<key> (default `key`); a model with a single output
// needs no name.
size_t output_index(const Manifest& m, const Session& s, const std::string& key, const std::string& role) {
  std::string name = m.string("outputs", key, key);
  const auto& outs = s.outputs();
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].name == name) return i;
  if (outs.size() == 1 && m.string("outputs", key, "").empty()) return 0;
  std::string names;
  for (const ValueInfo& o : outs) names += (names.empty() ? "" : ", ") + one_line(o.name);
  throw Error(m.key_error("outputs", key, "names '" + one_line(name) + "', which the " + role + " (" + m.file(role) +
                                              ") does not output; it outputs " + names));
}

// A model input of [batch, ...]: fixed dims other than the batch must equal `want`.
void check_dims(const Manifest& m, const ValueInfo& in, const std::vector<int64_t>& want, const std::string& role,
                const char* key) {
  if (!in.has_shape) return;
  bool fits = in.dims.size() == want.size() + 1;
  for (size_t i = 0; fits && i < want.size(); ++i) fits = in.dims[i + 1] < 0 || in.dims[i + 1] == want[i];
  if (!fits)
    throw Error(m.key_error("preprocess", key, "does not fit the " + role + " input '" + one_line(in.name) + "' of shape " +
                                                   shape_str(in.dims) + " (-1: any)"));
}

// One text-tower input for a batch of encodings, in the integer type the model declares.
// Names were checked at load; position_ids count 0..cols-1.
Tensor text_input(const ValueInfo& in, const std::vector<text::Encoding>& batch, int64_t cols) {
  std::vector<int64_t> text::Encoding::*field = in.name == "input_ids"        ? &text::Encoding::ids
                                                : in.name == "attention_mask" ? &text::Encoding::attention_mask
                                                : in.name == "token_type_ids" ? &text::Encoding::type_ids
                                                                              : nullptr;
  const int64_t rows = static_cast<int64_t>(batch.size());
  Tensor t = Tensor::empty(in.dtype, {rows, cols});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      int64_t v = field ? (batch[r].*field)[c] : c;
      if (in.dtype == DType::kInt64) t.data<int64_t>()[r * cols + c] = v;
      else t.data<int32_t>()[r * cols + c] = static_cast<int32_t>(v);
    }
  return t;
}

std::vector<Tensor> run(Session& s, const std::vector<NamedTensor>& inputs, const std::string& what) {
  std::vector<Tensor> out;
  Status st = s.run(inputs, &out);
  if (!st) throw Error(what + ": " + st.message());
  return out;
}

}  // namespace

ClipPipeline::ClipPipeline(const Manifest& m, const SessionOptions& session)
    : Embedder("the " + std::string(pipelines::type_name(m.type)) + " pipeline in " + m.dir) {
  if (m.type != pipelines::PipelineType::kClip)
    throw Error(m.path + ": type is '" + pipelines::type_name(m.type) + "', not a clip pipeline");
  preprocess_ = pipelines::read_image_preprocess(m);
  int64_t context = m.integer("preprocess", "context_length", 77);
  if (context < 2 || context > 4096) throw Error(m.key_error("preprocess", "context_length", "must be between 2 and 4096"));
  context_length_ = static_cast<size_t>(context);
  double scale = m.number("", "logit_scale", 100.0);
  if (!(scale > 0 && scale <= 1e4)) throw Error(m.key_error("", "logit_scale", "must be a number in (0, 10000]"));
  logit_scale_ = static_cast<float>(scale);

  tokenizer_.emplace(text::Tokenizer::from_file(m.file("tokenizer")));
  std::string pad_token = m.string("preprocess", "pad_token", "<|endoftext|>");
  std::optional<int64_t> pad_id = tokenizer_->token_to_id(pad_token);
  if (!pad_id) throw Error(m.key_error("preprocess", "pad_token", "'" + one_line(pad_token) + "' is not in the tokenizer"));
  text::Padding padding;
  padding.to_fixed_length = true;
  padding.length = context_length_;
  padding.pad_id = *pad_id;
  padding.pad_token = pad_token;
  tokenizer_->set_truncation(text::Truncation{context_length_});
  tokenizer_->set_padding(padding);

  image_ = open_tower(m, "image_encoder", "image_embeds", session);
  text_ = open_tower(m, "text_encoder", "text_embeds", session);
  image_output_ = output_index(m, *image_, "image_embeds", "image_encoder");
  text_output_ = output_index(m, *text_, "text_embeds", "text_encoder");

  if (image_->inputs().size() != 1)
    throw Error(m.path + ": files.image_encoder takes " + std::to_string(image_->inputs().size()) +
                " inputs; a clip image tower takes one (pixel values)");
  check_dims(m, image_->inputs()[0], {3, preprocess_.size, preprocess_.size}, "image encoder", "image_size");
  for (const ValueInfo& in : text_->inputs()) {
    if (in.name != "input_ids" && in.name != "attention_mask" && in.name != "position_ids" && in.name != "token_type_ids")
      throw Error(m.path + ": files.text_encoder asks for input '" + one_line(in.name) +
                  "'; a clip pipeline feeds input_ids, attention_mask, position_ids and token_type_ids");
    if (in.dtype != DType::kInt64 && in.dtype != DType::kInt32)
      throw Error(m.path + ": files.text_encoder input '" + in.name + "' is " + dtype_name(in.dtype) + ", not int64 or int32");
    check_dims(m, in, {context}, "text encoder", "context_length");
  }
  sequence_buckets_ = m.boolean("preprocess", "sequence_buckets", true);
  for (const ValueInfo& in : text_->inputs())
    sequence_buckets_ = sequence_buckets_ && in.has_shape && in.dims.size() == 2 && in.dims[1] < 0;
}

size_t ClipPipeline::sequence_bucket(size_t tokens) const {
  if (!sequence_buckets_) return context_length_;
  for (size_t b : {size_t(8), size_t(16), size_t(32), size_t(48), size_t(64)})
    if (tokens <= b && b < context_length_) return b;
  return context_length_;
}

text::Encoding ClipPipeline::encode_text(std::string_view text) const {
  if (text.size() > kMaxTextBytes)
    throw Error("text of " + std::to_string(text.size()) + " bytes is over the limit of " + std::to_string(kMaxTextBytes) +
                " bytes (CLIP reads only the first " + std::to_string(context_length_) + " tokens)");
  return tokenizer_->encode(text);
}

size_t ClipPipeline::text_tokens(std::string_view text) const {
  text::Encoding e = encode_text(text);
  return static_cast<size_t>(std::count_if(e.attention_mask.begin(), e.attention_mask.end(), [](auto m) { return m != 0; }));
}

size_t ClipPipeline::dimension() const {
  // Both towers project into one space; either declared width will do.
  for (auto [session, index] : {std::pair{text_.get(), text_output_}, {image_.get(), image_output_}}) {
    const ValueInfo& out = session->outputs()[index];
    if (out.has_shape && !out.dims.empty() && out.dims.back() > 0) return static_cast<size_t>(out.dims.back());
  }
  return 0;
}

std::vector<Embedding> ClipPipeline::embed_images(std::span<const image::Image> images) {
  std::vector<Embedding> out;
  out.reserve(images.size());
  for (size_t start = 0; start < images.size(); start += kImageBatch) {
    std::span<const image::Image> batch = images.subspan(start, std::min(kImageBatch, images.size() - start));
    Tensor pixels = image::clip_preprocess_batch(batch, preprocess_);
    std::vector<Tensor> result = run(*image_, {{image_->inputs()[0].name, pixels}}, "the image encoder");
    for (Embedding& e : pipelines::normalized_rows(result[image_output_], static_cast<int64_t>(batch.size()), "the image encoder"))
      out.push_back(std::move(e));
  }
  return out;
}

std::vector<Embedding> ClipPipeline::embed_texts(const std::vector<std::string>& texts) {
  // Texts run grouped by sequence bucket, so a short text is not padded to context_length
  // because a long one shares its batch; answers go back in the order asked.
  std::vector<text::Encoding> encodings;
  std::map<size_t, std::vector<size_t>> by_bucket;
  for (size_t i = 0; i < texts.size(); ++i) {
    encodings.push_back(encode_text(texts[i]));
    const text::Encoding& e = encodings.back();
    // Fixed padding and truncation make every encoding context_length long.
    if (e.ids.size() != context_length_ || e.attention_mask.size() != context_length_)
      throw Error("the tokenizer gave " + std::to_string(e.ids.size()) + " ids, not " + std::to_string(context_length_));
    size_t tokens = 0;  // up to the last real token (padding is on the right)
    for (size_t c = 0; c < context_length_; ++c)
      if (e.attention_mask[c]) tokens = c + 1;
    by_bucket[sequence_bucket(tokens)].push_back(i);
  }
  std::vector<Embedding> out(texts.size());
  for (const auto& [cols, members] : by_bucket) {
    for (size_t start = 0; start < members.size(); start += kTextBatch) {
      const size_t n = std::min(kTextBatch, members.size() - start);
      std::vector<text::Encoding> batch;
      for (size_t i = 0; i < n; ++i) batch.push_back(encodings[members[start + i]]);
      std::vector<NamedTensor> inputs;
      for (const ValueInfo& in : text_->inputs())
        inputs.emplace_back(in.name, text_input(in, batch, static_cast<int64_t>(cols)));
      std::vector<Tensor> result = run(*text_, inputs, "the text encoder");
      std::vector<Embedding> rows = pipelines::normalized_rows(result[text_output_], static_cast<int64_t>(n), "the text encoder");
      for (size_t i = 0; i < n; ++i) out[members[start + i]] = std::move(rows[i]);
    }
  }
  return out;
}

std::vector<Embedding> ClipPipeline::label_embeddings(const std::vector<std::string>& labels,
                                                      const std::vector<std::string>& templates) {
  std::vector<std::string> texts = prompts(labels, templates);
  for (size_t i = 0; i < texts.size(); ++i) {
    try {
      encode_text(texts[i]);
    } catch (const Error& e) {
      // Say which label and template made the bad prompt; the text itself may be unprintable.
      throw Error("label '" + one_line(text::replace_invalid_utf8(labels[i / templates.size()])) + "' in template " +
                  std::to_string(i % templates.size() + 1) + ": " + e.what());
    }
  }
  std::vector<Embedding> per_prompt = embed_texts(texts);
  std::vector<Embedding> out;
  for (size_t l = 0; l < labels.size(); ++l)
    out.push_back(mean_direction(std::span<const Embedding>(per_prompt).subspan(l * templates.size(), templates.size())));
  return out;
}

std::vector<LabelScore> ClipPipeline::classify(std::span<const float> image_embedding, const std::vector<std::string>& labels,
                                               std::span<const Embedding> label_embeddings) const {
  return zero_shot_scores(image_embedding, labels, label_embeddings, logit_scale_);
}

std::vector<LabelScore> ClipPipeline::classify(const image::Image& image, const std::vector<std::string>& labels,
                                               const std::vector<std::string>& templates) {
  std::vector<Embedding> labels_embedded = label_embeddings(labels, templates);
  Embedding e = embed_images(std::span<const image::Image>(&image, 1)).at(0);
  return classify(e, labels, labels_embedded);
}

}  // namespace mminfer::clip
