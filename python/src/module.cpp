// The extension module mminfer._mminfer: what python/mminfer/__init__.py builds its API on.
#include <pybind11/pybind11.h>

#include "common.h"
#include "mminfer/precision.h"
#include "mminfer/version.h"
#include "numpy_conversion.h"

namespace py = pybind11;

namespace mminfer::python {

SessionOptions make_options(int threads, const std::optional<std::string>& precision, int opt_level) {
  if (threads < 0) throw py::value_error("threads must be 0 (all cores) or more, got " + std::to_string(threads));
  if (opt_level < 0 || opt_level > 2) throw py::value_error("opt_level must be 0, 1 or 2, got " + std::to_string(opt_level));
  SessionOptions options;
  options.threads = threads;
  options.opt_level = opt_level;
  if (precision) {
    Status status = parse_precision(*precision, &options.precision);
    if (!status) throw py::value_error(status.message());
  }
  return options;
}

py::str utf8_str(const std::string& s) {
  PyObject* str = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (!str) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(str);
}

}  // namespace mminfer::python

PYBIND11_MODULE(_mminfer, m) {
  namespace mp = mminfer::python;
  m.doc() = "mminfer's C++ API (use the mminfer package, which builds ONNX Runtime's API on it)";
  mp::init_numpy();
  py::register_exception<mp::PyError>(m, "Error", PyExc_RuntimeError);
  m.def("version", [] { return std::string(mminfer::version()); }, "The library's version, \"0.1.0\".");
  m.def("build_commit", [] { return std::string(mminfer::build_commit()); },
        "The source commit's short hash (\"\" when built outside git).");
  m.def("build_type", [] { return std::string(mminfer::build_type()); }, "CMake's build type of the library.");
  m.def(
      "precision_spec",
      [](const std::string& spec) {
        mminfer::PrecisionPolicy policy;
        mminfer::Status status = mminfer::parse_precision(spec, &policy);
        if (!status) throw py::value_error(status.message());
        return mminfer::precision_spec(policy);
      },
      py::arg("spec"), "The precision spec as mminfer reads it back (ValueError when it does not parse).");
  mp::bind_session(m);
  mp::bind_pipelines(m);
}
