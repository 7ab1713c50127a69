// Status: the outcome of a public API call. Internally mminfer throws mminfer::Error;
// the public boundary turns it into a Status so callers never see an exception.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>

namespace mminfer {

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.ok_ = false;
    s.message_ = std::move(message);
    return s;
  }
  bool is_ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& message() const { return message_; }

 private:
  bool ok_ = true;
  std::string message_;
};

// The one exception type used inside the engine. Messages are one line and name the
// thing at fault (node, op, input, byte offset).
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace mminfer
