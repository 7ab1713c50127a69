// mminfer._mminfer._Ocr (mminfer::Ocr) and _Embedder (mminfer::Embedder): encoded bytes and
// texts in, text lines and NumPy embeddings out. Paths are read in Python (mminfer/__init__.py).
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "common.h"
#include "mminfer/pipelines.h"

namespace mminfer::python {

namespace {

std::vector<Bytes> to_bytes(const std::vector<py::bytes>& items) {
  std::vector<Bytes> out;
  out.reserve(items.size());
  for (const py::bytes& b : items) {
    char* data = nullptr;
    Py_ssize_t size = 0;
    if (PyBytes_AsStringAndSize(b.ptr(), &data, &size) != 0) throw py::error_already_set();
    out.emplace_back(reinterpret_cast<const uint8_t*>(data), reinterpret_cast<const uint8_t*>(data) + size);
  }
  return out;
}

// {"text", "score", "box": [[x, y] * 4]} (corners clockwise from the top left, in pixels).
py::dict to_dict(const TextLine& line) {
  py::list box;
  for (const auto& corner : line.box) {
    py::list point;
    point.append(corner[0]);
    point.append(corner[1]);
    box.append(point);
  }
  py::dict d;
  d["text"] = utf8_str(line.text);
  d["score"] = line.score;
  d["box"] = box;
  return d;
}

py::list to_list(const std::vector<TextLine>& lines) {
  py::list out;
  for (const TextLine& line : lines) out.append(to_dict(line));
  return out;
}

// [N, D] float32 (one unit embedding per row); [0, 0] for no inputs.
py::array_t<float> to_matrix(const std::vector<Embedding>& rows) {
  const size_t dim = rows.empty() ? 0 : rows[0].size();
  py::array_t<float> out({static_cast<py::ssize_t>(rows.size()), static_cast<py::ssize_t>(dim)});
  float* dst = out.mutable_data();
  for (const Embedding& row : rows) {
    if (row.size() != dim) throw PyError("embeddings of different sizes: " + std::to_string(dim) + " and " + std::to_string(row.size()));
    std::memcpy(dst, row.data(), dim * sizeof(float));
    dst += dim;
  }
  return out;
}

class PyOcr {
 public:
  PyOcr(const std::string& dir, int threads, const std::optional<std::string>& precision, int opt_level) {
    SessionOptions options = make_options(threads, precision, opt_level);
    check_without_gil([&] { return Ocr::open(dir, options, &ocr_); });
  }

  py::list read(const py::bytes& image) {
    std::vector<Bytes> bytes = to_bytes({image});
    std::vector<TextLine> lines;
    check_without_gil([&] { return ocr_->read(bytes[0], &lines); });
    return to_list(lines);
  }

  py::list read_many(const std::vector<py::bytes>& images) {
    std::vector<Bytes> bytes = to_bytes(images);
    std::vector<std::vector<TextLine>> lines;
    check_without_gil([&] { return ocr_->read(bytes, &lines); });
    py::list out;
    for (const auto& one : lines) out.append(to_list(one));
    return out;
  }

 private:
  std::unique_ptr<Ocr> ocr_;
};

class PyEmbedder {
 public:
  PyEmbedder(const std::string& dir, int threads, const std::optional<std::string>& precision, int opt_level) {
    SessionOptions options = make_options(threads, precision, opt_level);
    check_without_gil([&] { return Embedder::open(dir, options, &embedder_); });
  }

  std::string type() const { return embedder_->type(); }
  bool has_images() const { return embedder_->has_images(); }
  bool has_texts() const { return embedder_->has_texts(); }
  bool has_audio() const { return embedder_->has_audio(); }

  py::array_t<float> embed_images(const std::vector<py::bytes>& images) {
    std::vector<Bytes> bytes = to_bytes(images);
    std::vector<Embedding> out;
    check_without_gil([&] { return embedder_->embed_images(bytes, &out); });
    return to_matrix(out);
  }

  py::array_t<float> embed_texts(const std::vector<std::string>& texts) {
    std::vector<Embedding> out;
    check_without_gil([&] { return embedder_->embed_texts(texts, &out); });
    return to_matrix(out);
  }

  py::array_t<float> embed_audio(const std::vector<py::bytes>& clips) {
    std::vector<Bytes> bytes = to_bytes(clips);
    std::vector<Embedding> out;
    check_without_gil([&] { return embedder_->embed_audio(bytes, &out); });
    return to_matrix(out);
  }

  // Per image, (label, probability) pairs, highest first.
  py::list classify(const std::vector<py::bytes>& images, const std::vector<std::string>& labels,
                    const std::vector<std::string>& templates) {
    std::vector<Bytes> bytes = to_bytes(images);
    std::vector<std::vector<LabelProbability>> out;
    check_without_gil([&] { return embedder_->classify(bytes, labels, templates, &out); });
    py::list result;
    for (const auto& one : out) {
      py::list pairs;
      for (const LabelProbability& p : one) pairs.append(py::make_tuple(utf8_str(p.label), p.probability));
      result.append(pairs);
    }
    return result;
  }

 private:
  std::unique_ptr<Embedder> embedder_;
};

}  // namespace

void bind_pipelines(py::module_& m) {
  py::class_<PyOcr>(m, "_Ocr", "mminfer::Ocr; mminfer.OCR is the API to use.")
      .def(py::init<const std::string&, int, const std::optional<std::string>&, int>(), py::arg("dir"),
           py::arg("threads") = 0, py::arg("precision") = py::none(), py::arg("opt_level") = 2)
      .def("read", &PyOcr::read, py::arg("image"))
      .def("read_many", &PyOcr::read_many, py::arg("images"));

  py::class_<PyEmbedder>(m, "_Embedder", "mminfer::Embedder; mminfer.Embedder is the API to use.")
      .def(py::init<const std::string&, int, const std::optional<std::string>&, int>(), py::arg("dir"),
           py::arg("threads") = 0, py::arg("precision") = py::none(), py::arg("opt_level") = 2)
      .def_property_readonly("type", &PyEmbedder::type)
      .def_property_readonly("has_images", &PyEmbedder::has_images)
      .def_property_readonly("has_texts", &PyEmbedder::has_texts)
      .def_property_readonly("has_audio", &PyEmbedder::has_audio)
      .def("embed_images", &PyEmbedder::embed_images, py::arg("images"))
      .def("embed_texts", &PyEmbedder::embed_texts, py::arg("texts"))
      .def("embed_audio", &PyEmbedder::embed_audio, py::arg("clips"))
      .def("classify", &PyEmbedder::classify, py::arg("images"), py::arg("labels"), py::arg("templates"));
}

}  // namespace mminfer::python
