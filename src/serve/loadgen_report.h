// What the load generator measured, summed over virtual users, and its two renderings: a table
// for people and one JSON object for scripts.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mminfer::serve {

// Counts for one modality (or all): every attempt ends as an HTTP status or a connection error.
struct LoadTally {
  std::vector<double> ok_latencies_ms;  // of 2xx answers
  std::map<int, uint64_t> status;       // every HTTP status seen
  std::map<std::string, uint64_t> connection_errors;  // by HttpConnectionError::kind

  void merge(const LoadTally& other);
  uint64_t requests() const;  // answered plus failed
  uint64_t ok() const;        // 2xx answers
};

struct LoadgenReport {
  std::string url;
  int concurrency = 0;
  uint64_t first_input = 0;  // the number of the run's first fresh input
  double elapsed_s = 0;
  std::map<std::string, LoadTally> by_modality;  // "text", "image", "audio": those in the mix
  LoadTally total;
};

// Nearest-rank percentile (p in 0..100) of values; 0 when empty. Sorts values.
double percentile(std::vector<double>& values, double p);

std::string format_table(const LoadgenReport& report);
std::string format_json(const LoadgenReport& report);  // one line

}  // namespace mminfer::serve
