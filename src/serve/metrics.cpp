#include "serve/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "mminfer/status.h"

namespace mminfer::serve::metrics {

namespace {

bool valid_name(std::string_view s, bool allow_colon) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':') ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// Shortest text that reads back as the same double, in plain decimals where that stays short
// (bucket bounds are matched as strings in queries: le="0.0005", not le="5e-04").
// Prometheus spells infinities +Inf/-Inf.
std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[400];
  const double a = std::fabs(v);
  auto fmt = (a == 0 || (a >= 1e-5 && a < 1e15)) ? std::chars_format::fixed : std::chars_format::scientific;
  auto r = std::to_chars(buf, buf + sizeof buf, v, fmt);
  return std::string(buf, r.ptr);
}

// The length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlongs, no
// surrogates, nothing above U+10FFFF), or 0 when the bytes there are not one.
size_t utf8_sequence(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  auto cont = [&](size_t k) { return k < s.size() && (b(k) & 0xC0) == 0x80; };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(i + 1) || !cont(i + 2)) return 0;
    if (c == 0xE0 && b(i + 1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(i + 1) >= 0xA0) return 0;  // UTF-16 surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    if (c == 0xF0 && b(i + 1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(i + 1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

void append_escaped(std::string& out, std::string_view s, bool quote) {
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '"' && quote) out += "\\\"";
    else out += c;
  }
}

// `{a="1",b="2"}`, with an extra last label (a histogram's le) when given; nothing when empty.
std::string label_text(const Labels& labels, std::string_view le = {}) {
  if (labels.empty() && le.empty()) return {};
  std::string s = "{";
  for (const auto& [name, value] : labels) {
    if (s.size() > 1) s += ',';
    s += name;
    s += "=\"";
    append_escaped(s, value, true);
    s += '"';
  }
  if (!le.empty()) {
    if (s.size() > 1) s += ',';
    s += "le=\"";
    s += le;
    s += '"';
  }
  return s + "}";
}

void write_sample(std::string& out, std::string_view name, std::string_view suffix, const std::string& labels,
            const std::string& value) {
  out += name;
  out += suffix;
  out += labels;
  out += ' ';
  out += value;
  out += '\n';
}

}  // namespace

std::string printable_text(std::string_view s) {
  static constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence(s, i);
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (n == 0 || (n == 1 && ((c < 0x20 && c != '\n') || c == 0x7F))) {
      out += kReplacement;
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

void Counter::inc(double amount) {
  if (!(amount >= 0)) throw Error("a counter cannot be increased by " + format_value(amount));
  value_.fetch_add(amount, std::memory_order_relaxed);
}

void Counter::advance_to(double total) {
  double now = value_.load(std::memory_order_relaxed);
  while (total > now && !value_.compare_exchange_weak(now, total, std::memory_order_relaxed)) {
  }
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i])) throw Error("histogram bounds must be finite (+Inf is implied)");
    if (i && !(bounds_[i] > bounds_[i - 1])) throw Error("histogram bounds must be strictly increasing");
  }
  buckets_ = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1);
}

void Histogram::observe(double v) {
  // NaN compares false everywhere, so lower_bound would put it first; it belongs to +Inf.
  size_t i = std::isnan(v) ? bounds_.size()
                           : static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.cumulative.resize(bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = total;
  }
  // The count is the +Inf bucket, so the two always agree even while others observe.
  s.count = total;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> latency_buckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

std::vector<double> batch_size_buckets() { return {1, 2, 4, 8, 16, 32, 64}; }

Registry::Family& Registry::family(std::string_view name, std::string_view help, Type type, const Labels& labels,
                                   Labels& sorted) {
  sorted = labels;
  // Made printable here, not when rendering: two raw values that print alike are one child, so
  // the exposition never holds the same series twice.
  for (auto& [label, value] : sorted) value = printable_text(value);
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    const std::string& label = sorted[i].first;
    if (!valid_name(label, false) || label.rfind("__", 0) == 0)
      throw Error("metric " + std::string(name) + ": invalid label name '" + label + "'");
    if (i && sorted[i - 1].first == label)
      throw Error("metric " + std::string(name) + ": label '" + label + "' given twice");
    if (type == Type::kHistogram && label == "le")
      throw Error("metric " + std::string(name) + ": 'le' is reserved for histogram buckets");
  }
  auto it = families_.find(name);
  if (it == families_.end()) {
    if (!valid_name(name, true)) throw Error("invalid metric name '" + std::string(name) + "'");
    it = families_.emplace(std::string(name), Family{type, printable_text(help), {}, {}, {}, {}}).first;
  } else if (it->second.type != type) {
    throw Error("metric " + std::string(name) + " is already registered with another type");
  }
  return it->second;
}

Counter& Registry::counter(std::string_view name, std::string_view help, const Labels& labels) {
  std::lock_guard lk(mu_);
  Labels key;
  Family& f = family(name, help, Type::kCounter, labels, key);
  auto& child = f.counters[key];
  if (!child) child = std::make_unique<Counter>();
  return *child;
}

Gauge& Registry::gauge(std::string_view name, std::string_view help, const Labels& labels) {
  std::lock_guard lk(mu_);
  Labels key;
  Family& f = family(name, help, Type::kGauge, labels, key);
  auto& child = f.gauges[key];
  if (!child) child = std::make_unique<Gauge>();
  return *child;
}

Histogram& Registry::histogram(std::string_view name, std::string_view help, const Labels& labels,
                               const std::vector<double>& bounds) {
  std::lock_guard lk(mu_);
  Labels key;
  const bool fresh = families_.find(name) == families_.end();
  if (fresh) {
    Histogram validate(bounds);  // throws on bad bounds before the family exists
  }
  Family& f = family(name, help, Type::kHistogram, labels, key);
  if (fresh) f.bounds = bounds;
  else if (f.bounds != bounds)
    throw Error("metric " + std::string(name) + " is already registered with other bucket bounds");
  auto& child = f.histograms[key];
  if (!child) child = std::make_unique<Histogram>(f.bounds);
  return *child;
}

std::string Registry::render() const {
  std::lock_guard lk(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    out += "# HELP " + name + ' ';
    append_escaped(out, f.help, false);
    out += "\n# TYPE " + name + ' ';
    switch (f.type) {
      case Type::kCounter:
        out += "counter\n";
        for (const auto& [labels, c] : f.counters) write_sample(out, name, "", label_text(labels), format_value(c->value()));
        break;
      case Type::kGauge:
        out += "gauge\n";
        for (const auto& [labels, g] : f.gauges) write_sample(out, name, "", label_text(labels), format_value(g->value()));
        break;
      case Type::kHistogram:
        out += "histogram\n";
        for (const auto& [labels, h] : f.histograms) {
          Histogram::Snapshot s = h->snapshot();
          for (size_t i = 0; i < s.cumulative.size(); ++i) {
            std::string le = i < f.bounds.size() ? format_value(f.bounds[i]) : "+Inf";
            write_sample(out, name, "_bucket", label_text(labels, le), std::to_string(s.cumulative[i]));
          }
          write_sample(out, name, "_sum", label_text(labels), format_value(s.sum));
          write_sample(out, name, "_count", label_text(labels), std::to_string(s.count));
        }
        break;
    }
  }
  return out;
}

}  // namespace mminfer::serve::metrics
