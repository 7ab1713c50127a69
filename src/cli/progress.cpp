#include "cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "cli/args.h"
#include "mminfer/status.h"

namespace mminfer::cli {

const char* const kProgressUsage =
    "--progress: draw the progress bar on stderr even when it is not a terminal;\n"
    "--no-progress (or --quiet): never draw it\n";

ProgressMode progress_flag(const Args& args) {
  bool off = args.has("--no-progress") || args.has("--quiet");
  if (args.has("--progress") && off) throw Error("give --progress or --no-progress/--quiet, not both");
  if (args.has("--progress")) return ProgressMode::kAlways;
  return off ? ProgressMode::kNever : ProgressMode::kAuto;
}

std::string clock_text(double seconds) {
  long long s = std::llround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}

std::string render_progress(const std::string& label, size_t done, size_t total, double elapsed_s, int width) {
  done = total ? std::min(done, total) : done;
  size_t filled = total ? done * static_cast<size_t>(width) / total : 0;
  std::string bar = label + " [" + std::string(filled, '#') + std::string(static_cast<size_t>(width) - filled, '.') + "] " +
                    std::to_string(done) + "/" + std::to_string(total);
  if (total && done == total) return bar + "  done in " + clock_text(elapsed_s);
  // The rate so far, carried over what is left; nothing to go on before the first step.
  if (done == 0 || total == 0) return bar + "  eta --:--";
  double left = elapsed_s / static_cast<double>(done) * static_cast<double>(total - done);
  return bar + "  eta " + clock_text(left);
}

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Progress::Progress(std::string label, size_t total, ProgressMode mode, std::FILE* out, Clock clock)
    : label_(std::move(label)), total_(total), out_(out), clock_(clock ? std::move(clock) : Clock(steady_seconds)) {
  drawing_ = mode == ProgressMode::kAlways || (mode == ProgressMode::kAuto && isatty(fileno(out_)));
  start_ = clock_();
  draw();
}

Progress::~Progress() {
  if (open_) std::fputc('\n', out_), std::fflush(out_);
}

void Progress::set(size_t done) {
  done_ = done;
  draw();
}

void Progress::relabel(std::string label) {
  label_ = std::move(label);
  draw();
}

void Progress::restart(std::string label, size_t total) {
  if (open_) std::fputc('\n', out_), open_ = false, shown_ = 0;
  label_ = std::move(label);
  total_ = total;
  done_ = 0;
  start_ = clock_();
  draw();
}

void Progress::finish() {
  if (done_ != total_) set(total_);
  if (open_) std::fputc('\n', out_), std::fflush(out_), open_ = false, shown_ = 0;
}

void Progress::draw() {
  if (!drawing_) return;
  // \r redraws the line in place; spaces cover what a longer line before left behind.
  std::string line = render_progress(label_, done_, total_, clock_() - start_);
  size_t pad = shown_ > line.size() ? shown_ - line.size() : 0;
  std::fprintf(out_, "\r%s%s", line.c_str(), std::string(pad, ' ').c_str());
  std::fflush(out_);
  shown_ = line.size();
  open_ = true;
}

}  // namespace mminfer::cli
