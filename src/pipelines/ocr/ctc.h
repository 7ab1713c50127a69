// Greedy CTC decoding of a recognizer's per-step class scores.
#pragma once
#include <string>
#include <vector>

namespace mminfer::ocr {

struct Decoded {
  std::string text;
  float score = 0;  // mean probability of the kept steps (0 when none)
};

// `probs` is [steps, classes]; class 0 is the CTC blank and class i > 0 is charset[i - 1].
// Takes each step's best class, merges repeats, drops blanks.
Decoded ctc_greedy(const float* probs, int steps, int classes, const std::vector<std::string>& charset);

// PP-OCR's character list: one entry per line of the keys file, then a space.
std::vector<std::string> load_charset(const std::string& path);  // throws Error on I/O failure

}  // namespace mminfer::ocr
