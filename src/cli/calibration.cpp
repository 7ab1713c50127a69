#include "cli/calibration.h"

#include <algorithm>
#include <filesystem>

#include "cli/input_files.h"
#include "core/npy.h"
#include "modal/image/clip.h"
#include "modal/image/image.h"
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

std::map<std::string, std::pair<float, float>> calibrate_ranges(const onnx::ModelProto& model, const std::string& base_dir,
                                                                const std::set<std::string>& activations,
                                                                const std::vector<Sample>& samples,
                                                                CalibrationMethod method, double percentile, int threads) {
  // The activations become extra outputs of a copy of the model (graph inputs are read from the
  // samples themselves).
  onnx::ModelProto probe = model;
  std::set<std::string> graph_inputs;
  for (const auto& i : model.graph().input()) graph_inputs.insert(i.name());
  std::set<std::string> existing;
  for (const auto& o : model.graph().output()) existing.insert(o.name());
  for (const std::string& a : activations) {
    if (graph_inputs.count(a) || existing.count(a)) continue;
    onnx::ValueInfoProto* v = probe.mutable_graph()->add_output();
    v->set_name(a);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  std::string bytes;
  probe.SerializeToString(&bytes);
  SessionOptions opts;
  opts.threads = threads;
  std::unique_ptr<Session> session;
  if (Status st = Session::load_from_bytes(bytes, base_dir, opts, &session); !st) throw Error(st.message());
  std::map<std::string, size_t> output_index;
  for (size_t i = 0; i < session->outputs().size(); ++i) output_index[session->outputs()[i].name] = i;

  std::map<std::string, RangeObserver> observers;
  for (const std::string& a : activations) observers[a];
  auto sweep = [&](bool histogram) {
    for (const Sample& s : samples) {
      std::vector<Tensor> outs;
      if (Status st = session->run(s, &outs); !st) throw Error("calibration run: " + st.message());
      for (auto& [name, obs] : observers) {
        const Tensor* t = nullptr;
        auto it = output_index.find(name);
        if (it != output_index.end()) t = &outs[it->second];
        for (const NamedTensor& in : s)
          if (in.first == name) t = &in.second;
        if (!t || t->dtype() != DType::kFloat32) throw Error("calibration: '" + name + "' is not a float32 tensor of the model");
        if (histogram) obs.observe_histogram(t->data<float>(), t->numel());
        else obs.observe_range(t->data<float>(), t->numel());
      }
    }
  };
  sweep(false);
  if (method != CalibrationMethod::kMinMax) sweep(true);
  std::map<std::string, std::pair<float, float>> out;
  for (auto& [name, obs] : observers) {
    ActivationRange r = obs.range(method, percentile);
    out[name] = {r.lo, r.hi};
  }
  return out;
}

}  // namespace mminfer::cli
