// Stop strings matched on the decoded text, across token boundaries: text that could be the
// start of a stop string is held back until the next piece shows whether it is one.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mminfer::generate {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stop_strings);  // throws on an empty string

  struct Result {
    std::string text;      // safe to print now (up to the stop string when one matched)
    bool stopped = false;  // a stop string matched; it is not part of `text`
  };
  Result push(std::string_view piece);
  // The held-back text, for the end of a stream that did not stop on a string.
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string pending_;
};

}  // namespace mminfer::generate
