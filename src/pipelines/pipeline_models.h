// What several pipeline types read from their folder the same way: a model file opened by its
// role, and the image preprocessing keys (CLIP's resize, crop and mean/std).
#pragma once
#include <memory>
#include <string>

#include "mminfer/session.h"
#include "modal/image/clip.h"
#include "pipelines/manifest.h"

namespace mminfer::pipelines {

// The session of files.<role>; throws Error "<pipeline.json>: files.<role>: <why>".
std::unique_ptr<Session> open_role(const Manifest& m, const std::string& role, const SessionOptions& opts);

// preprocess.image_size (224), preprocess.mean and preprocess.std (OpenAI CLIP's); throws Error
// naming the key on values out of range.
image::ClipPreprocess read_image_preprocess(const Manifest& m);

}  // namespace mminfer::pipelines
