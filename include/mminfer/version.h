// Which mminfer this is: the library's version and the build it came from.
#pragma once

namespace mminfer {

const char* version();       // "0.1.0"
const char* build_commit();  // the source commit's short hash, "" when built outside git
const char* build_type();    // CMake's build type: "Release", "Debug", ...

}  // namespace mminfer
