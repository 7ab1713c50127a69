// What the binding files share: the Python exception mminfer.Error, Status -> exception, and
// the SessionOptions the Python constructors' keywords describe.
#pragma once
#include <optional>
#include <stdexcept>
#include <string>

#include <pybind11/pybind11.h>

#include "mminfer/session.h"
#include "mminfer/status.h"

namespace mminfer::python {

namespace py = pybind11;

// Raised in Python as mminfer.Error (a RuntimeError) with the one-line message.
class PyError : public std::runtime_error {
 public:
  explicit PyError(const std::string& message) : std::runtime_error(message) {}
};

inline void check(const Status& status) {
  if (!status) throw PyError(status.message());
}

// Runs `call` (a C++ API call returning Status) with the GIL released, then raises on failure.
template <typename Call>
void check_without_gil(Call&& call) {
  Status status;
  {
    py::gil_scoped_release release;
    status = call();
  }
  check(status);
}

// threads (0: all cores), precision (None: FP32; else parse_precision's syntax, a bad one raises
// ValueError with its message), opt_level 0..2 as SessionOptions has them.
SessionOptions make_options(int threads, const std::optional<std::string>& precision, int opt_level);

// Python str from UTF-8 bytes that came from a model or a pipeline (invalid bytes replaced).
py::str utf8_str(const std::string& s);

void bind_session(py::module_& m);
void bind_pipelines(py::module_& m);

}  // namespace mminfer::python
