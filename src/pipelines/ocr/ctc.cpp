#include "pipelines/ocr/ctc.h"

#include <fstream>

#include "mminfer/status.h"

namespace mminfer::ocr {

Decoded ctc_greedy(const float* probs, int steps, int classes, const std::vector<std::string>& charset) {
  Decoded d;
  double sum = 0;
  int kept = 0, prev = -1;
  for (int t = 0; t < steps; ++t) {
    const float* row = probs + static_cast<size_t>(t) * classes;
    int best = 0;
    for (int c = 1; c < classes; ++c)
      if (row[c] > row[best]) best = c;
    if (best != 0 && best != prev && best - 1 < static_cast<int>(charset.size())) {
      d.text += charset[best - 1];
      sum += row[best];
      ++kept;
    }
    prev = best;
  }
  d.score = kept ? static_cast<float>(sum / kept) : 0.f;
  return d;
}

std::vector<std::string> load_charset(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error("cannot read the character list " + path);
  std::vector<std::string> chars;
  for (std::string line; std::getline(f, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    chars.push_back(line);
  }
  chars.push_back(" ");
  return chars;
}

}  // namespace mminfer::ocr
