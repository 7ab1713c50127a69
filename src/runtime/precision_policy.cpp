#include <regex>

#include "core/ascii.h"
#include "mminfer/precision.h"

namespace mminfer {

namespace {

bool parse_word(const std::string& word, Precision* p, std::string* error) {
  if (word == "fp32") {
    *p = Precision::kFp32;
    return true;
  }
  if (word == "int8") {
    *p = Precision::kInt8;
    return true;
  }
  if (word == "bf16") {
    *p = Precision::kBf16;
    return true;
  }
  if (word == "fp16") {
    *p = Precision::kFp16;
    return true;
  }
  *error = "--precision: unknown precision '" + word + "' (use fp32, fp16, bf16 or int8)";
  return false;
}

}  // namespace

const char* modality_name(Modality m) {
  switch (m) {
    case Modality::kVision: return "vision";
    case Modality::kText: return "text";
    case Modality::kAudio: return "audio";
    case Modality::kOther: return "other";
  }
  return "?";
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kInt8: return "int8";
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
  }
  return "?";
}

bool PrecisionPolicy::any_below_fp32() const {
  for (Precision p : by_modality)
    if (p != Precision::kFp32) return true;
  return false;
}

bool PrecisionPolicy::any_int8() const {
  for (Precision p : by_modality)
    if (p == Precision::kInt8) return true;
  return false;
}

Status parse_precision(const std::string& spec, PrecisionPolicy* policy) {
  if (spec.empty()) return Status::error("--precision: empty value (use int8, bf16, fp32 or MODALITY=PRECISION,...)");
  PrecisionPolicy out = *policy;
  std::string error;
  if (spec.find('=') == std::string::npos && spec.find(',') == std::string::npos) {
    Precision p;
    if (!parse_word(spec, &p, &error)) return Status::error(error);
    out.by_modality.fill(p);
    *policy = out;
    return Status::ok();
  }
  for (const std::string& item : split_list(spec)) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      return Status::error("--precision: expected MODALITY=PRECISION, got '" + item + "'");
    std::string name = item.substr(0, eq);
    Precision p;
    if (!parse_word(item.substr(eq + 1), &p, &error)) return Status::error(error);
    if (name == "all") {
      out.by_modality.fill(p);
    } else {
      int found = -1;
      for (int m = 0; m < kNumModalities; ++m)
        if (name == modality_name(static_cast<Modality>(m))) found = m;
      if (found < 0)
        return Status::error("--precision: unknown modality '" + name + "' (use vision, text, audio, other or all)");
      out.by_modality[found] = p;
    }
  }
  *policy = out;
  return Status::ok();
}

std::string precision_spec(const PrecisionPolicy& policy) {
  bool same = true;
  for (Precision p : policy.by_modality) same = same && p == policy.by_modality[0];
  if (same) return precision_name(policy.by_modality[0]);
  std::string out;
  for (int m = 0; m < kNumModalities; ++m)
    out += std::string(m ? "," : "") + modality_name(static_cast<Modality>(m)) + "=" + precision_name(policy.by_modality[m]);
  return out;
}

Status set_keep_fp32(const std::string& regex, PrecisionPolicy* policy) {
  try {
    std::regex check(regex, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return Status::error("--keep-fp32: bad regular expression '" + regex + "' (" + e.what() + ")");
  }
  policy->keep_fp32 = regex;
  return Status::ok();
}

}  // namespace mminfer
