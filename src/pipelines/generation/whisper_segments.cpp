#include "pipelines/generation/whisper_segments.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace mminfer::pipelines {

std::vector<TimedSegment> timestamp_segments(std::span<const generate::TokenId> tokens, generate::TokenId timestamp_begin,
                                             generate::TokenId eot, double window_start, double window_close,
                                             const generate::DecodeFn& decode) {
  std::vector<TimedSegment> out;
  bool open = false;
  TimedSegment current;
  double last = window_start;  // the last timestamp seen
  auto has_text = [&](const TimedSegment& s) {
    return std::any_of(s.tokens.begin(), s.tokens.end(), [&](generate::TokenId t) { return t < timestamp_begin; });
  };
  auto finish = [&](double end) {
    current.end = std::max(current.start, end);
    if (has_text(current)) {
      std::vector<generate::TokenId> text;
      for (generate::TokenId t : current.tokens)
        if (t < timestamp_begin) text.push_back(t);
      current.text = decode(text);
      out.push_back(std::move(current));
    }
    current = TimedSegment();
    open = false;
  };
  for (generate::TokenId t : tokens) {
    if (t == eot) break;
    if (t >= timestamp_begin) {
      const double seconds = window_start + static_cast<double>(t - timestamp_begin) * kSecondsPerTimestamp;
      current.tokens.push_back(t);
      if (!open) {
        open = true;
        current.start = seconds;
        continue;
      }
      finish(seconds);
      last = seconds;
      continue;
    }
    if (!open) {
      open = true;
      current.start = last;
    }
    current.tokens.push_back(t);
  }
  if (open) finish(window_close);
  return out;
}

WindowCut window_cut(std::span<const generate::TokenId> tokens, generate::TokenId timestamp_begin, generate::TokenId eot) {
  const size_t n = static_cast<size_t>(std::find(tokens.begin(), tokens.end(), eot) - tokens.begin());
  auto stamp = [&](size_t i) { return tokens[i] >= timestamp_begin; };
  const bool single_ending = n >= 2 && stamp(n - 1) && !stamp(n - 2);
  WindowCut cut{n, std::nullopt};
  if (single_ending) return cut;
  for (size_t i = n; i-- > 1;)
    if (stamp(i) && stamp(i - 1)) return {i, static_cast<int64_t>(tokens[i - 1] - timestamp_begin)};
  return cut;
}

size_t seek_advance(const WindowCut& cut, size_t window_samples, int sample_rate) {
  if (!cut.timestamp) return window_samples;
  const auto samples = [&](double index) {
    return static_cast<size_t>(std::llround(index * kSecondsPerTimestamp * sample_rate));
  };
  const size_t step = std::max<size_t>(1, samples(1));
  return std::clamp(samples(static_cast<double>(*cut.timestamp)), step, std::max(step, window_samples));
}

std::string format_timestamp(double seconds) {
  // Half-way milliseconds round to even, as Python's round() does for the reference.
  long long ms = static_cast<long long>(std::nearbyint(seconds * 1000.0));
  const long long h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60;
  ms %= 1000;
  char buf[48];
  if (h) std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld.%03lld", h, m, s, ms);
  else std::snprintf(buf, sizeof buf, "%02lld:%02lld.%03lld", m, s, ms);
  return buf;
}

}  // namespace mminfer::pipelines
