// Checks shared by the robustness tests and the libFuzzer target; no gtest here.
#pragma once
#include <string>
#include <vector>

#include "mminfer/session.h"
#include "model_builder.h"

namespace robust {

// "" when the status is acceptable: success, or an error whose message is one non-empty line
// (and mentions `must_mention` when given). Otherwise a description of what is wrong.
std::string status_problem(const mminfer::Status& s, const std::string& must_mention = "");

// Random inputs for every model input whose shape is known and small (symbolic dims become
// `symbolic_dim`). Returns false when some input cannot be made that way.
bool small_inputs(const mminfer::Session& session, Rng& rng, int64_t symbolic_dim,
                  std::vector<mminfer::NamedTensor>* out);

struct Outcome {
  bool loaded = false;
  bool ran = false;
  std::string problem;  // non-empty: a rule was broken (message not one line, ...)
};

// Loads a model from bytes and, when it loads and its inputs are small, runs it once.
Outcome load_and_run(const std::string& bytes, const std::string& base_dir);

// A fresh empty folder under the system temp dir, removed by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_file(const std::string& path, const std::string& bytes);
std::string read_file(const std::string& path);

}  // namespace robust
