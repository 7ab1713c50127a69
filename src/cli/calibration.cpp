#include "cli/calibration.h"

#include "cli/args.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "cli/input_files.h"
#include "core/npy.h"
#include "modal/image/clip.h"
#include "modal/image/image.h"
#include "pipelines/embedder.h"
#include "pipelines/manifest.h"
#include "pipelines/ocr/ocr_pipeline.h"

namespace mminfer::cli {

namespace fs = std::filesystem;

namespace {

bool is_image_name(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return e == ".png" || e == ".jpg" || e == ".jpeg" || e == ".bmp" || e == ".gif" || e == ".webp";
}

Tensor with_batch(const Tensor& t) {
  Shape s = t.shape();
  s.insert(s.begin(), 1);
  return Tensor::alias(t, t.dtype(), s, const_cast<void*>(t.raw()));
}

Tensor preprocess_image(const fs::path& path, const ValueInfo& input, const std::string& preprocess) {
  std::vector<uint8_t> bytes = read_input_file(path.string());
  image::Image rgb = image::decode_image(bytes);
  if (preprocess == "clip") {
    image::ClipPreprocess config;
    if (input.dims.size() == 4 && input.dims[2] > 0) config.size = static_cast<int>(input.dims[2]);
    return with_batch(image::clip_preprocess(rgb, config));
  }
  if (preprocess == "ocr-det") return ocr::det_input(ocr::to_bgr(rgb), 960).x;
  throw Error(preprocess.empty() ? "images need --calib-preprocess clip|ocr-det"
                                 : "--calib-preprocess: unknown value '" + preprocess + "' (use clip or ocr-det)");
}

Sample sample_folder(const fs::path& dir, const Session& session) {
  Sample s;
  for (const ValueInfo& in : session.inputs()) {
    fs::path f = dir / (in.name + ".npy");
    if (!fs::is_regular_file(f)) throw Error(dir.string() + ": no " + in.name + ".npy for input '" + in.name + "'");
    s.emplace_back(in.name, read_npy(f.string()));
  }
  return s;
}

}  // namespace

std::vector<Sample> calibration_samples(const std::string& dir, const Session& session, const std::string& preprocess,
                                        size_t limit) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error("--calib: not a folder: " + dir);
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir, ec)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  const auto& inputs = session.inputs();
  std::vector<Sample> out;
  for (const fs::path& p : entries) {
    if (out.size() >= limit) break;
    try {
      if (fs::is_directory(p)) {
        out.push_back(sample_folder(p, session));
      } else if (p.extension() == ".npy" || is_image_name(p)) {
        if (inputs.size() != 1)
          throw Error("the model has " + std::to_string(inputs.size()) + " inputs: give each sample as a folder of INPUT.npy files");
        Tensor t = p.extension() == ".npy" ? read_npy(p.string()) : preprocess_image(p, inputs[0], preprocess);
        out.push_back({{inputs[0].name, t}});
      }
    } catch (const Error& e) {
      throw Error("--calib " + p.string() + ": " + e.what());
    }
  }
  if (out.empty()) throw Error("--calib " + dir + ": no .npy files, sample folders or images in it");
  return out;
}

CalibrationRun run_samples(const std::string& path, const std::vector<Sample>& samples, CalibrationSteps steps) {
  return [path, &samples, steps](const SessionOptions& options) {
    std::unique_ptr<Session> session;
    if (Status st = Session::load(path, options, &session); !st) throw Error(st.message());
    std::vector<Tensor> outs;
    if (steps) steps(0, samples.size());
    for (size_t i = 0; i < samples.size(); ++i) {
      if (Status st = session->run(samples[i], &outs); !st) throw Error("calibration run: " + st.message());
      if (steps) steps(i + 1, samples.size());
    }
  };
}

CalibrationRun run_pipeline(const std::string& pipeline_dir, const std::string& dir, size_t limit, CalibrationSteps steps) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error("--calib: not a folder: " + dir);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.size() > limit) files.resize(limit);
  if (files.empty()) throw Error("--calib " + dir + ": no files in it");
  pipelines::Manifest manifest = fs::is_regular_file(fs::path(pipeline_dir) / "pipeline.json")
                                     ? pipelines::read_manifest(pipeline_dir)
                                     : ocr::ocr_manifest(pipeline_dir);
  return [manifest, files, steps](const SessionOptions& options) {
    auto step = [&](size_t done) {
      if (steps) steps(done, files.size());
    };
    auto audio_name = [](const fs::path& p) {
      std::string e = p.extension().string();
      return e == ".wav" || e == ".flac" || e == ".ogg" || e == ".mp3";
    };
    if (manifest.type == pipelines::PipelineType::kOcr) {
      ocr::OcrPipeline ocr(manifest, options, ocr::ocr_options(manifest));
      step(0);
      for (size_t i = 0; i < files.size(); ++i) {
        if (is_image_name(files[i])) ocr.run(image::decode_image(read_input_file(files[i].string())));
        step(i + 1);
      }
      return;
    }
    std::unique_ptr<pipelines::Embedder> embedder = pipelines::open_embedder(manifest, options);
    step(0);
    for (size_t i = 0; i < files.size(); ++i) {
      const fs::path& f = files[i];
      try {
        if (is_image_name(f) && embedder->has_tower(pipelines::Modality::kImage)) {
          image::Image img = image::decode_image(read_input_file(f.string()));
          embedder->embed_images(std::span<const image::Image>(&img, 1));
        } else if (f.extension() == ".txt" && embedder->has_tower(pipelines::Modality::kText)) {
          std::vector<std::string> lines;
          std::istringstream in(read_text_file(f.string()));
          for (std::string line; std::getline(in, line);)
            if (!line.empty()) lines.push_back(line);
          if (!lines.empty()) embedder->embed_texts(lines);
        } else if (audio_name(f) && embedder->has_tower(pipelines::Modality::kAudio)) {
          std::vector<std::vector<uint8_t>> clip = {read_input_file(f.string())};
          embedder->embed_audio(clip);
        }
      } catch (const Error& e) {
        throw Error("--calib " + f.string() + ": " + e.what());
      }
      step(i + 1);
    }
  };
}

std::map<std::string, std::pair<float, float>> calibrate_ranges(const std::string& path,
                                                                const std::set<std::string>& activations,
                                                                const CalibrationRun& run, CalibrationMethod method,
                                                                double percentile, int threads,
                                                                const std::vector<std::string>& inputs, size_t keep,
                                                                std::vector<Sample>* kept) {
  std::map<std::string, RangeObserver> observers;
  std::map<std::string, int64_t> seen;
  for (const std::string& a : activations) observers[a];
  bool histogram = false;
  SessionOptions options;
  options.threads = threads;
  options.observe.assign(activations.begin(), activations.end());
  options.observe.insert(options.observe.end(), inputs.begin(), inputs.end());
  options.observe_model = path;
  Sample filling;  // the inputs of the run in progress (the observer sees inputs first)
  options.observer = [&](const std::string& name, const Tensor& t) {
    if (kept && !histogram && std::find(inputs.begin(), inputs.end(), name) != inputs.end()) {
      if (kept->size() < keep) filling.emplace_back(name, t.clone());
      if (filling.size() == inputs.size()) kept->push_back(std::move(filling)), filling.clear();
    }
    auto it = observers.find(name);
    if (it == observers.end()) return;
    if (t.dtype() != DType::kFloat32) throw Error("calibration: '" + name + "' is " + dtype_name(t.dtype()) + ", not float32");
    ++seen[name];
    if (histogram) it->second.observe_histogram(t.data<float>(), t.numel());
    else it->second.observe_range(t.data<float>(), t.numel());
  };
  run(options);
  for (const std::string& a : activations)
    if (!seen.count(a))
      throw Error("calibration never computed '" + a + "': the calibration set does not reach it (is " + path +
                  " the model the pipeline runs for these files?)");
  if (method != CalibrationMethod::kMinMax) {
    histogram = true;
    run(options);
  }
  std::map<std::string, std::pair<float, float>> out;
  for (auto& [name, obs] : observers) {
    ActivationRange r = obs.range(method, percentile);
    out[name] = {r.lo, r.hi};
  }
  return out;
}

size_t calib_limit_flag(const Args& args) {
  const int limit = args.get_int("--calib-limit", 64);
  if (limit < 1) throw Error("--calib-limit must be at least 1");
  return static_cast<size_t>(limit);
}

CalibrationRun calibration_run_flags(const Args& args, const std::string& path, const Session& session,
                                     CalibrationSteps steps, std::vector<Sample>* samples) {
  const size_t limit = calib_limit_flag(args);
  if (args.has("--calib-pipeline")) {
    if (args.has("--calib-preprocess")) throw Error("give --calib-pipeline or --calib-preprocess, not both");
    return run_pipeline(args.get("--calib-pipeline"), args.get("--calib"), limit, steps);
  }
  *samples = calibration_samples(args.get("--calib"), session, args.get("--calib-preprocess", ""), limit);
  return run_samples(path, *samples, steps);
}

}  // namespace mminfer::cli
