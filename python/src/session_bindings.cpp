// mminfer._mminfer._Session (mminfer::Session) and NodeArg (mminfer::ValueInfo as ONNX Runtime
// describes graph inputs and outputs).
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include "common.h"
#include "mminfer/session.h"
#include "numpy_conversion.h"

namespace mminfer::python {

namespace {

// A graph input or output: name, ONNX Runtime's type string and shape list.
struct NodeArg {
  ValueInfo info;

  // ints for fixed dimensions, the symbol's name for named ones, None for unknown ones; [] when
  // even the rank is unknown (as ONNX Runtime reports them).
  py::list shape() const {
    py::list dims;
    if (!info.has_shape) return dims;
    for (size_t d = 0; d < info.dims.size(); ++d) {
      if (info.dims[d] >= 0)
        dims.append(py::int_(info.dims[d]));
      else if (d < info.symbols.size() && !info.symbols[d].empty())
        dims.append(utf8_str(info.symbols[d]));
      else
        dims.append(py::none());
    }
    return dims;
  }
};

// Addresses of the tensors a session's runs were given (for the tests: a NumPy input arrives
// without a copy when its address is the array's).
struct ObservedAddresses {
  std::mutex mutex;
  std::vector<std::pair<std::string, uintptr_t>> seen;
};

class PySession {
 public:
  PySession(const py::object& model, const std::string& base_dir, int threads, const std::optional<std::string>& precision,
            int opt_level, const std::vector<std::string>& outputs, int max_concurrent_runs,
            const std::vector<std::string>& observe) {
    options_ = make_options(threads, precision, opt_level);
    if (max_concurrent_runs < 1)
      throw py::value_error("max_concurrent_runs must be 1 or more, got " + std::to_string(max_concurrent_runs));
    options_.outputs = outputs;
    options_.max_concurrent_runs = max_concurrent_runs;
    if (!observe.empty()) {
      observed_ = std::make_shared<ObservedAddresses>();
      options_.observe = observe;
      options_.observer = [observed = observed_](const std::string& name, const Tensor& tensor) {
        std::lock_guard<std::mutex> lock(observed->mutex);
        observed->seen.emplace_back(name, reinterpret_cast<uintptr_t>(tensor.raw()));
      };
    }
    if (py::isinstance<py::bytes>(model)) {
      std::string bytes = model.cast<std::string>();
      check_without_gil([&] { return Session::load_from_bytes(bytes, base_dir, options_, &session_); });
    } else {
      std::string path = model.cast<std::string>();
      check_without_gil([&] { return Session::load(path, options_, &session_); });
    }
    for (const ValueInfo& info : session_->inputs()) inputs_.push_back({info});
    for (const ValueInfo& info : session_->outputs()) outputs_.push_back({info});
  }

  std::vector<NodeArg> inputs() const { return inputs_; }
  std::vector<NodeArg> outputs() const { return outputs_; }
  int threads() const { return options_.threads; }
  int opt_level() const { return options_.opt_level; }
  int max_concurrent_runs() const { return options_.max_concurrent_runs; }
  std::string precision() const { return precision_spec(options_.precision); }

  py::list run(const std::optional<std::vector<std::string>>& output_names, const py::dict& feed) {
    std::vector<InputTensor> held;  // the arrays the input tensors view, alive until the end
    held.reserve(feed.size());
    std::vector<NamedTensor> inputs;
    for (const auto& [key, value] : feed) {
      if (!py::isinstance<py::str>(key))
        throw py::type_error("input names must be str, got " + py::str(py::type::of(key)).cast<std::string>());
      std::string name = key.cast<std::string>();
      DType expected = DType::kUndefined;  // an unknown name is left to the session to report
      for (const NodeArg& in : inputs_)
        if (in.info.name == name) expected = in.info.dtype;
      held.push_back(to_input(name, value, expected));
      inputs.emplace_back(name, held.back().tensor);
    }
    const std::vector<std::string> names = output_names.value_or(std::vector<std::string>{});
    std::vector<Tensor> outputs;
    check_without_gil([&] { return session_->run(inputs, names, &outputs); });
    // Each array owns its bytes: an output that shares memory with an input array or an earlier
    // output (an input passed straight through, say) is copied.
    for (size_t k = 0; k < outputs.size(); ++k) {
      bool shared = false;
      for (const InputTensor& in : held) shared = shared || overlaps(outputs[k], in.array.data(), in.array.nbytes());
      for (size_t j = 0; j < k; ++j) shared = shared || overlaps(outputs[k], outputs[j].raw(), outputs[j].nbytes());
      if (shared) outputs[k] = outputs[k].clone();
    }
    py::list result;
    for (size_t k = 0; k < outputs.size(); ++k) {
      const std::string& name = names.empty() ? outputs_.at(k).info.name : names[k];
      result.append(to_numpy(std::move(outputs[k]), "output '" + name + "'"));
    }
    return result;
  }

  // (value name, data address) of the observed values since the last call.
  std::vector<std::pair<std::string, uintptr_t>> take_observed() {
    if (!observed_) return {};
    std::lock_guard<std::mutex> lock(observed_->mutex);
    return std::exchange(observed_->seen, {});
  }

 private:
  SessionOptions options_;
  std::unique_ptr<Session> session_;
  std::vector<NodeArg> inputs_, outputs_;
  std::shared_ptr<ObservedAddresses> observed_;
};

}  // namespace

void bind_session(py::module_& m) {
  py::class_<NodeArg>(m, "NodeArg", "A graph input or output, as onnxruntime.NodeArg describes it.")
      .def_property_readonly("name", [](const NodeArg& a) { return utf8_str(a.info.name); })
      .def_property_readonly("type", [](const NodeArg& a) { return ort_type_name(a.info.dtype); },
                             "'tensor(float)', 'tensor(int64)', ...")
      .def_property_readonly("shape", &NodeArg::shape,
                             "ints for fixed dimensions, names (str) for symbolic ones, None for unknown ones")
      .def("__repr__", [](const NodeArg& a) {
        return py::str("NodeArg(name={!r}, type={!r}, shape={!r})")
            .format(utf8_str(a.info.name), ort_type_name(a.info.dtype), a.shape());
      });

  py::class_<PySession>(m, "_Session", "mminfer::Session; mminfer.InferenceSession is the API to use.")
      .def(py::init<const py::object&, const std::string&, int, const std::optional<std::string>&, int,
                    const std::vector<std::string>&, int, const std::vector<std::string>&>(),
           py::arg("model"), py::arg("base_dir") = "", py::arg("threads") = 0, py::arg("precision") = py::none(),
           py::arg("opt_level") = 2, py::arg("outputs") = std::vector<std::string>{}, py::arg("max_concurrent_runs") = 1,
           py::arg("observe") = std::vector<std::string>{},
           "model: a path (str) or the model's bytes (external data then relative to base_dir).")
      .def_property_readonly("inputs", &PySession::inputs)
      .def_property_readonly("outputs", &PySession::outputs)
      .def_property_readonly("threads", &PySession::threads)
      .def_property_readonly("opt_level", &PySession::opt_level)
      .def_property_readonly("max_concurrent_runs", &PySession::max_concurrent_runs)
      .def_property_readonly("precision", &PySession::precision)
      .def("run", &PySession::run, py::arg("output_names"), py::arg("input_feed"),
           "Runs the model (the GIL released meanwhile); NumPy arrays in, NumPy arrays out.")
      .def("_take_observed", &PySession::take_observed);
}

}  // namespace mminfer::python
