// mminfer::Embedder, the public face of the embedding pipelines (clip, audio-encoder): encoded
// inputs in, unit embeddings and zero-shot probabilities out.
#include <mutex>

#include "mminfer/pipelines.h"
#include "modal/image/image.h"
#include "pipelines/api/guarded.h"
#include "pipelines/clip/clip_pipeline.h"
#include "pipelines/embedder.h"

namespace mminfer {

namespace {

using pipelines::Modality;

class EmbedderImpl final : public Embedder {
 public:
  EmbedderImpl(const std::string& dir, const SessionOptions& options)
      : manifest_(pipelines::read_manifest(dir)),
        threads_(options.threads),
        embedder_(pipelines::open_embedder(manifest_, options)),
        clip_(dynamic_cast<clip::ClipPipeline*>(embedder_.get())) {}

  std::string type() const override { return pipelines::type_name(manifest_.type); }
  bool has_images() const override { return embedder_->has_tower(Modality::kImage); }
  bool has_texts() const override { return embedder_->has_tower(Modality::kText); }
  bool has_audio() const override { return embedder_->has_tower(Modality::kAudio); }

  Status embed_images(const std::vector<Bytes>& images, std::vector<Embedding>* out) override {
    return pipelines::guarded(mutex_, threads_, [&] {
      embedder_->require_tower(Modality::kImage);
      *out = embedder_->embed_images(decode_all(images));
    });
  }

  Status embed_texts(const std::vector<std::string>& texts, std::vector<Embedding>* out) override {
    return pipelines::guarded(mutex_, threads_, [&] {
      embedder_->require_tower(Modality::kText);
      for (size_t i = 0; i < texts.size(); ++i) try {
          embedder_->check_text(texts[i]);
        } catch (const Error& e) {
          throw pipelines::numbered(e, "text", i);
        }
      *out = embedder_->embed_texts(texts);
    });
  }

  Status embed_audio(const std::vector<Bytes>& clips, std::vector<Embedding>* out) override {
    return pipelines::guarded(mutex_, threads_, [&] {
      embedder_->require_tower(Modality::kAudio);
      *out = embedder_->embed_audio(clips);
    });
  }

  Status classify(const std::vector<Bytes>& images, const std::vector<std::string>& labels,
                  const std::vector<std::string>& templates, std::vector<std::vector<LabelProbability>>* out) override {
    return pipelines::guarded(mutex_, threads_, [&] {
      if (!clip_) throw Error("classify needs a clip pipeline; " + manifest_.path + " is type '" + type() + "'");
      std::vector<std::string> used = templates;
      if (used.empty()) used = manifest_.templates && !manifest_.templates->empty() ? *manifest_.templates
                                                                                   : std::vector<std::string>{"{}"};
      std::vector<Embedding> label_embeddings = clip_->label_embeddings(labels, used);
      std::vector<Embedding> embedded = clip_->embed_images(decode_all(images));
      out->assign(embedded.size(), {});
      for (size_t i = 0; i < embedded.size(); ++i)
        for (const clip::LabelScore& s : clip_->classify(embedded[i], labels, label_embeddings))
          (*out)[i].push_back({s.label, s.score});
    });
  }

 private:
  static std::vector<image::Image> decode_all(const std::vector<Bytes>& images) {
    std::vector<image::Image> decoded;
    for (size_t i = 0; i < images.size(); ++i) try {
        decoded.push_back(image::decode_image(images[i]));
      } catch (const Error& e) {
        throw pipelines::numbered(e, "image", i);
      }
    return decoded;
  }

  pipelines::Manifest manifest_;
  int threads_;
  std::unique_ptr<pipelines::Embedder> embedder_;
  clip::ClipPipeline* clip_ = nullptr;  // embedder_ when the folder is a clip pipeline
  std::mutex mutex_;
};

}  // namespace

Status Embedder::open(const std::string& dir, const SessionOptions& options, std::unique_ptr<Embedder>* out) {
  return pipelines::status_of(options.threads, [&] { *out = std::make_unique<EmbedderImpl>(dir, options); });
}

}  // namespace mminfer
