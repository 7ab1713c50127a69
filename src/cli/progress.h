// A progress bar on stderr for the commands that take a while (optimize, calibration, model
// loading, long benchmarks): counts and an estimate of the time left, redrawn in place.
// Drawn only where a person watches (stderr is a terminal) unless --progress asks for it;
// --no-progress and --quiet silence it. The engine never prints: it calls back, this draws.
#pragma once
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

namespace mminfer::cli {

class Args;

enum class ProgressMode { kAuto, kAlways, kNever };

// --progress (kAlways), --no-progress or --quiet (kNever), else kAuto; both asked is an error.
ProgressMode progress_flag(const Args& args);
// The flags every command with a bar takes, for its Args bool_flags and its usage.
extern const char* const kProgressUsage;

// One line of the bar, e.g. "calibrating [#######.............]  7/20  eta 0:13". `elapsed_s`
// since the start; no estimate before the first step (or when total is 0), "done in" at the end.
std::string render_progress(const std::string& label, size_t done, size_t total, double elapsed_s, int width = 20);
// 0:07, 1:05, 1:02:03.
std::string clock_text(double seconds);

class Progress {
 public:
  using Clock = std::function<double()>;  // seconds since some fixed point; steady by default
  Progress(std::string label, size_t total, ProgressMode mode, std::FILE* out = stderr, Clock clock = {});
  ~Progress();  // finishes the line if it was drawn
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  bool drawing() const { return drawing_; }
  void step(size_t n = 1) { set(done_ + n); }
  void set(size_t done);
  // Another label, the count kept (e.g. the item now in progress).
  void relabel(std::string label);
  // A new stage of the same bar: another label and total, counting from 0.
  void restart(std::string label, size_t total);
  // Draws the final state and ends the line.
  void finish();

 private:
  void draw();
  std::string label_;
  size_t total_, done_ = 0;
  std::FILE* out_;
  Clock clock_;
  double start_ = 0;
  size_t shown_ = 0;  // length of the line on screen
  bool drawing_, open_ = false;
};

}  // namespace mminfer::cli
