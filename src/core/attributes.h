// Node attributes as plain values, so kernels can read them without seeing the IR.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "mminfer/status.h"
#include "mminfer/tensor.h"

namespace mminfer {

struct GraphAttr;  // opaque subgraph (If/Loop/Scan bodies), owned by the IR

using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
                               std::vector<std::string>, Tensor, std::shared_ptr<GraphAttr>>;

class Attributes {
 public:
  void set(const std::string& name, AttrValue v) { values_[name] = std::move(v); }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  const std::map<std::string, AttrValue>& all() const { return values_; }

  int64_t get_int(const std::string& name, int64_t fallback) const {
    return get_or<int64_t>(name, fallback);
  }
  float get_float(const std::string& name, float fallback) const {
    return get_or<float>(name, fallback);
  }
  std::string get_string(const std::string& name, const std::string& fallback) const {
    return get_or<std::string>(name, fallback);
  }
  std::vector<int64_t> get_ints(const std::string& name, std::vector<int64_t> fallback = {}) const {
    return get_or<std::vector<int64_t>>(name, std::move(fallback));
  }
  std::vector<float> get_floats(const std::string& name, std::vector<float> fallback = {}) const {
    return get_or<std::vector<float>>(name, std::move(fallback));
  }
  std::vector<std::string> get_strings(const std::string& name) const {
    return get_or<std::vector<std::string>>(name, {});
  }
  const Tensor* get_tensor(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end()) return nullptr;
    if (auto* t = std::get_if<Tensor>(&it->second)) return t;
    throw Error("attribute '" + name + "' is not a tensor");
  }

 private:
  template <typename T>
  T get_or(const std::string& name, T fallback) const {
    auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    if (auto* v = std::get_if<T>(&it->second)) return *v;
    // ONNX files sometimes store an int where a float is expected and vice versa.
    if constexpr (std::is_same_v<T, float>) {
      if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<float>(*i);
    }
    if constexpr (std::is_same_v<T, int64_t>) {
      if (auto* f = std::get_if<float>(&it->second)) return static_cast<int64_t>(*f);
    }
    throw Error("attribute '" + name + "' has an unexpected type");
  }
  std::map<std::string, AttrValue> values_;
};

}  // namespace mminfer
