#include "cli/awq_calibration.h"

#include <sstream>

#include "cli/input_files.h"
#include "mminfer/status.h"
#include <algorithm>
#include <filesystem>

#include "modal/image/image.h"
#include "pipelines/generation/generative_folder.h"
#include "pipelines/generation/image_to_text.h"
#include "pipelines/generation/text_generator.h"

namespace mminfer::cli {

std::vector<std::string> read_prompts(const std::string& file, size_t limit) {
  std::istringstream in(read_text_file(file));
  std::vector<std::string> prompts;
  for (std::string line; prompts.size() < limit && std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) prompts.push_back(line);
  }
  if (prompts.empty()) throw Error("--calib-prompts " + file + ": no prompts in it (one a line)");
  return prompts;
}

std::vector<std::string> image_files(const std::string& dir, size_t limit) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error("--calib: not a folder: " + dir);
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string x = e.path().extension().string();
    std::transform(x.begin(), x.end(), x.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (e.is_regular_file() && (x == ".png" || x == ".jpg" || x == ".jpeg" || x == ".bmp" || x == ".webp" || x == ".gif"))
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  if (out.size() > limit) out.resize(limit);
  if (out.empty()) throw Error("--calib " + dir + ": no images in it");
  return out;
}

std::map<std::string, onnx_io::ActivationStats> observe_activations(const std::string& model, const std::string& folder,
                                                                    const std::vector<std::string>& inputs,
                                                                    const std::vector<std::string>& activations,
                                                                    int threads, size_t new_tokens) {
  std::map<std::string, onnx_io::ActivationStats> stats;
  SessionOptions options;
  options.threads = threads;
  options.observe = activations;
  options.observe_model = model;
  options.observer = [&](const std::string& name, const Tensor& t) {
    if (t.dtype() != DType::kFloat32 || t.rank() == 0) return;
    onnx_io::ActivationStats& s = stats[name];
    const int64_t channels = t.dim(t.rank() - 1);
    if (s.channels == 0) s.channels = channels;
    if (channels != s.channels || channels == 0) return;
    s.add(t.data<float>(), t.numel() / channels);
  };
  auto kind = pipelines::detect_generative_folder(folder);
  if (kind && kind->kind == pipelines::GenerativeKind::kImageToText) {
    pipelines::ImageToText captioner(folder, options);
    pipelines::CaptionOptions caption;
    caption.beams = 1;
    for (const std::string& f : inputs) captioner.caption({image::decode_image(read_input_file(f))}, caption);
  } else {
    pipelines::TextGenerator generator(folder, options);
    generate::DecodeRequest request;
    request.config = generator.config();
    request.config.num_beams = 1;
    request.config.do_sample = false;
    request.config.max_new_tokens = new_tokens;
    for (const std::string& p : inputs) {  // one at a time: no padding rows among the observed
      request.prompts = {generator.encode(p)};
      generator.generate({}, request);
    }
  }
  for (const std::string& a : activations)
    if (!stats.count(a))
      throw Error("calibration never computed '" + a + "': is " + model + " a decoder of the folder " + folder + "?");
  return stats;
}

}  // namespace mminfer::cli
