#include "serve/loadgen_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace mminfer::serve {

void LoadTally::merge(const LoadTally& other) {
  ok_latencies_ms.insert(ok_latencies_ms.end(), other.ok_latencies_ms.begin(), other.ok_latencies_ms.end());
  for (const auto& [code, n] : other.status) status[code] += n;
  for (const auto& [kind, n] : other.connection_errors) connection_errors[kind] += n;
}

uint64_t LoadTally::requests() const {
  uint64_t n = 0;
  for (const auto& [code, count] : status) n += count;
  for (const auto& [kind, count] : connection_errors) n += count;
  return n;
}

uint64_t LoadTally::ok() const {
  uint64_t n = 0;
  for (const auto& [code, count] : status)
    if (code >= 200 && code < 300) n += count;
  return n;
}

double percentile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  double rank = std::ceil(p / 100 * static_cast<double>(values.size()));
  size_t i = rank < 1 ? 0 : std::min(values.size() - 1, static_cast<size_t>(rank) - 1);
  return values[i];
}

namespace {

struct Summary {
  uint64_t requests = 0, ok = 0;
  double req_per_s = 0, ok_per_s = 0, p50 = 0, p90 = 0, p99 = 0, mean = 0, max = 0;
  std::string errors;  // "429:20 refused:3", or "-"
};

Summary summarize(const LoadTally& t, double elapsed_s) {
  Summary s;
  s.requests = t.requests();
  s.ok = t.ok();
  if (elapsed_s > 0) {
    s.req_per_s = static_cast<double>(s.requests) / elapsed_s;
    s.ok_per_s = static_cast<double>(s.ok) / elapsed_s;
  }
  std::vector<double> lat = t.ok_latencies_ms;
  s.p50 = percentile(lat, 50);
  s.p90 = percentile(lat, 90);
  s.p99 = percentile(lat, 99);
  if (!lat.empty()) {
    double sum = 0;
    for (double v : lat) sum += v;
    s.mean = sum / static_cast<double>(lat.size());
    s.max = lat.back();
  }
  for (const auto& [code, n] : t.status)
    if (code < 200 || code >= 300) s.errors += (s.errors.empty() ? "" : " ") + std::to_string(code) + ":" + std::to_string(n);
  for (const auto& [kind, n] : t.connection_errors)
    s.errors += (s.errors.empty() ? "" : " ") + kind + ":" + std::to_string(n);
  if (s.errors.empty()) s.errors = "-";
  return s;
}

std::string table_row(const std::string& name, const Summary& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-9s %9llu %9.1f %9.1f %9.2f %9.2f %9.2f  %s\n", name.c_str(),
                static_cast<unsigned long long>(s.requests), s.req_per_s, s.ok_per_s, s.p50, s.p90, s.p99,
                s.errors.c_str());
  return buf;
}

nlohmann::json tally_json(const LoadTally& t, double elapsed_s) {
  Summary s = summarize(t, elapsed_s);
  nlohmann::json status = nlohmann::json::object(), conn = nlohmann::json::object();
  for (const auto& [code, n] : t.status) status[std::to_string(code)] = n;
  for (const auto& [kind, n] : t.connection_errors) conn[kind] = n;
  return {{"requests", s.requests},
          {"ok", s.ok},
          {"req_per_s", s.req_per_s},
          {"ok_per_s", s.ok_per_s},
          {"latency_ms", {{"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}, {"mean", s.mean}, {"max", s.max}}},
          {"status", status},
          {"connection_errors", conn}};
}

}  // namespace

std::string format_table(const LoadgenReport& r) {
  char head[512];
  std::snprintf(head, sizeof head, "mminfer loadgen: %s, %d virtual users, %.2f s\n", r.url.c_str(), r.concurrency,
                r.elapsed_s);
  std::string out = head;
  std::snprintf(head, sizeof head, "%-9s %9s %9s %9s %9s %9s %9s  %s\n", "modality", "requests", "req/s", "ok/s",
                "p50 ms", "p90 ms", "p99 ms", "errors");
  out += head;
  for (const auto& [name, t] : r.by_modality) out += table_row(name, summarize(t, r.elapsed_s));
  if (r.by_modality.size() != 1) out += table_row("total", summarize(r.total, r.elapsed_s));
  out += "latencies are of 2xx answers; errors: HTTP status:count, connection error:count\n";
  return out;
}

std::string format_json(const LoadgenReport& r) {
  nlohmann::json modalities = nlohmann::json::object();
  for (const auto& [name, t] : r.by_modality) modalities[name] = tally_json(t, r.elapsed_s);
  nlohmann::json j = {{"url", r.url},
                      {"concurrency", r.concurrency},
                      {"first_input", r.first_input},
                      {"elapsed_s", r.elapsed_s},
                      {"modalities", modalities},
                      {"total", tally_json(r.total, r.elapsed_s)}};
  return j.dump();
}

}  // namespace mminfer::serve
