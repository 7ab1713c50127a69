#include "cli/args.h"

#include <cmath>
#include <optional>

#include "core/ascii.h"
#include "core/parallel.h"

#include "mminfer/status.h"

namespace mminfer::cli {

Args::Args(int argc, char** argv, int first, const std::set<std::string>& value_flags,
           const std::set<std::string>& bool_flags) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" && bool_flags.count("--help")) a = "--help";  // every command takes both
    // Long options, and a short one ("-o") where a command registers it.
    bool short_flag = a.size() == 2 && a[0] == '-' && (value_flags.count(a) || bool_flags.count(a));
    if ((a.rfind("--", 0) == 0 && a.size() > 2) || short_flag) {
      std::string name = a, value;
      bool inline_value = false;
      size_t eq = a.find('=');
      if (eq != std::string::npos) {
        name = a.substr(0, eq);
        value = a.substr(eq + 1);
        inline_value = true;
      }
      if (value_flags.count(name)) {
        if (!inline_value) {
          if (i + 1 >= argc) throw Error(name + " needs a value");
          value = argv[++i];
        }
        values_[name].push_back(value);
        in_order_.emplace_back(name, value);
      } else if (bool_flags.count(name)) {
        if (inline_value) throw Error(name + " takes no value");
        bools_.insert(name);
      } else {
        throw Error("unknown option " + name);
      }
    } else {
      positional_.push_back(a);
    }
  }
}

std::string Args::get(const std::string& flag, const std::string& fallback) const {
  auto it = values_.find(flag);
  return it == values_.end() ? fallback : it->second.back();
}

namespace {

// `text` read whole by `parse` (std::stoi, std::stod...); nothing where it is not a number of
// that kind, has more after it, or is out of range.
template <typename T, typename Parse>
std::optional<T> read_whole(const std::string& text, Parse parse) {
  try {
    size_t pos = 0;
    T v = parse(text, &pos);
    if (pos == text.size()) return v;
  } catch (const std::logic_error&) {
  }
  return std::nullopt;
}

int stoi_at(const std::string& s, size_t* p) { return std::stoi(s, p); }

// The last value of `flag` read whole by `parse`; `what` in the error.
template <typename T, typename Parse>
T number_flag(const std::map<std::string, std::vector<std::string>>& values, const std::string& flag, T fallback,
              Parse parse, const char* what) {
  auto it = values.find(flag);
  if (it == values.end()) return fallback;
  if (std::optional<T> v = read_whole<T>(it->second.back(), parse)) return *v;
  throw Error(flag + " expects " + what + ", got '" + it->second.back() + "'");
}

}  // namespace

double Args::get_double(const std::string& flag, double fallback) const {
  return number_flag(values_, flag, fallback, [](const std::string& s, size_t* p) { return std::stod(s, p); }, "a number");
}

int Args::get_int(const std::string& flag, int fallback) const {
  return number_flag(values_, flag, fallback, stoi_at, "a whole number");
}

std::vector<std::string> Args::all(const std::string& flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::pair<std::string, std::string> split_assignment(const std::string& s, const std::string& flag) {
  size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
    throw Error(flag + " expects NAME=VALUE, got '" + s + "'");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

const std::set<std::string> kPrecisionFlags = {"--precision", "--keep-fp32", "--fp32-edges", "--int8-activations"};

const char* const kPrecisionUsage =
    "--precision int8|fp16|bf16|fp32|MODALITY=PRECISION,...  (modalities: vision, text, audio, other, all)\n"
    "    dynamic INT8 (MatMul/Gemm, and Conv where it pays), FP16 weights or BF16 (where the CPU has\n"
    "    native bfloat16) for MatMul/Gemm; first, last and projection layers stay FP32 unless\n"
    "    --fp32-edges off\n"
    "--keep-fp32 REGEX: nodes whose names or op types match stay FP32; --int8-activations token|tensor (default token)\n";

int merge_tokens_flag(const Args& args, const std::string& flag) {
  const int r = args.get_int(flag, 0);
  if (r < 0) throw Error(flag + " takes the tokens merged per block, 0 or more, got " + std::to_string(r));
  return r;
}

std::vector<int> merge_tokens_list(const Args& args) {
  if (!args.has("--merge-tokens")) return {0};
  const std::string list = args.get("--merge-tokens");
  const std::string form = "R[,R...] (tokens merged per block, each 0 or more)";
  std::vector<int> rs;
  for (const std::string& item : comma_list(list, "--merge-tokens", form)) {
    std::optional<int> r = read_whole<int>(item, stoi_at);
    if (!r || *r < 0) throw Error("--merge-tokens expects " + form + ", got '" + list + "'");
    rs.push_back(*r);
  }
  // Each value loads the model once more: a long list would hold as many copies of its weights.
  constexpr size_t kMostSessions = 8;
  if (rs.size() > kMostSessions)
    throw Error("--merge-tokens takes at most " + std::to_string(kMostSessions) + " values (one session, one copy of the "
                "weights, each), got " + std::to_string(rs.size()));
  return rs;
}

std::set<std::string> with_precision_flags(std::set<std::string> flags) {
  flags.insert(kPrecisionFlags.begin(), kPrecisionFlags.end());
  return flags;
}

PrecisionPolicy precision_flags(const Args& args) {
  PrecisionPolicy p;
  for (const std::string& spec : args.all("--precision")) {
    Status s = parse_precision(spec, &p);
    if (!s) throw Error(s.message());
  }
  if (args.has("--keep-fp32")) {
    Status s = set_keep_fp32(args.get("--keep-fp32"), &p);
    if (!s) throw Error(s.message());
  }
  std::string edges = args.get("--fp32-edges", "on");
  if (edges != "on" && edges != "off") throw Error("--fp32-edges expects on or off, got '" + edges + "'");
  p.keep_edges_fp32 = edges == "on";
  std::string acts = args.get("--int8-activations", "token");
  if (acts != "token" && acts != "tensor") throw Error("--int8-activations expects token or tensor, got '" + acts + "'");
  p.int8_per_tensor = acts == "tensor";
  return p;
}

const char* const kDecoderPrecisionUsage =
    "  --precision text=int4|int8 [--block-size 32..128] [--keep-fp32 REGEX]: the decoder's MatMul weights\n"
    "  quantized as it loads (MatMulNBits: 4 or 8 bits in blocks along K with a scale and zero point each;\n"
    "  the float copy is not kept); --keep-fp32 lm_head keeps the output projection FP32\n";

std::set<std::string> with_decoder_precision_flags(std::set<std::string> flags) {
  flags.insert({"--precision", "--block-size", "--keep-fp32"});
  return flags;
}

size_t speculate_flag(const Args& args) {
  if (!args.has("--speculate")) {
    for (const char* flag : {"--draft", "--draft-precision"})
      if (args.has(flag) && !args.has("--cascade")) throw Error(std::string(flag) + " goes with --speculate K or --cascade H");
    return 0;
  }
  if (args.has("--cascade")) throw Error("--speculate and --cascade do not mix: one draft, one use");
  const int k = args.get_int("--speculate", 0);
  if (k < 1 || k > 16) throw Error("--speculate takes 1 to 16 proposed tokens per pass, got " + std::to_string(k));
  return static_cast<size_t>(k);
}

double cascade_flag(const Args& args) {
  if (!args.has("--cascade")) return -1;
  const double h = args.get_double("--cascade", -1);
  if (!(h >= 0) || !std::isfinite(h)) throw Error("--cascade takes the entropy (nats) above which the full model chooses, 0 or more");
  return h;
}

int draft_bits_flag(const Args& args, const std::string& default_word, bool fp32_draft) {
  const std::string word = args.get("--draft-precision", default_word);
  if (word == "int4") return 4;
  if (word == "int8") return 8;
  if (word == "fp32" && fp32_draft) return 0;
  throw Error(std::string("--draft-precision takes int4") + (fp32_draft ? ", int8 or fp32" : " or int8") + ", got '" + word + "'");
}

PrecisionPolicy decoder_precision_flags(const Args& args) {
  PrecisionPolicy p;
  for (const std::string& spec : args.all("--precision")) {
    for (const std::string& item : split_list(spec)) {
      size_t eq = item.find('=');
      std::string modality = eq == std::string::npos ? "text" : item.substr(0, eq);
      std::string word = eq == std::string::npos ? item : item.substr(eq + 1);
      if (modality != "text")
        throw Error("--precision: only text=int4|int8|fp32 (the decoder's weights) applies to generative folders, got '" + item + "'");
      if (word == "int4") p.decoder_weight_bits = 4;
      else if (word == "int8") p.decoder_weight_bits = 8;
      else if (word == "fp32") p.decoder_weight_bits = 0;
      else throw Error("--precision: unknown decoder precision '" + word + "' (use int4, int8 or fp32)");
    }
  }
  if (args.has("--block-size")) {
    int b = args.get_int("--block-size", 32);
    if (b != 16 && b != 32 && b != 64 && b != 128 && b != 256)
      throw Error("--block-size must be 16, 32, 64, 128 or 256, got " + std::to_string(b));
    if (p.decoder_weight_bits == 0) throw Error("--block-size needs --precision text=int4 or text=int8");
    p.decoder_weight_block = b;
  }
  if (args.has("--keep-fp32")) {
    if (p.decoder_weight_bits == 0) throw Error("--keep-fp32 needs --precision text=int4 or text=int8");
    Status s = set_keep_fp32(args.get("--keep-fp32"), &p);
    if (!s) throw Error(s.message());
  }
  return p;
}

std::vector<std::string> comma_list(const std::string& list, const std::string& flag, const std::string& form) {
  std::vector<std::string> items = split_list(list);
  for (const std::string& item : items)
    if (item.empty()) throw Error(flag + " expects " + form + ", got '" + list + "'");
  return items;
}

std::vector<std::string> outputs_flag(const Args& args) {
  if (!args.has("--outputs")) return {};
  return comma_list(args.get("--outputs"), "--outputs", "NAME[,NAME...]");
}

int threads_flag(const Args& args) {
  int threads = args.get_int("--threads", 0);
  set_num_threads(threads);
  return threads;
}

InterOp inter_op_flag(const Args& args) {
  std::string v = args.get("--inter-op", "auto");
  if (v == "auto") return InterOp::kAuto;
  if (v == "off") return InterOp::kOff;
  if (v == "on") return InterOp::kOn;
  throw Error("--inter-op expects auto, off or on, got '" + v + "'");
}

size_t max_new_tokens_flag(const Args& args) {
  if (!args.has("--max-new-tokens")) return 0;
  int n = args.get_int("--max-new-tokens", 0);
  if (n <= 0) throw Error("--max-new-tokens must be at least 1, got " + std::to_string(n));
  return static_cast<size_t>(n);
}

size_t beams_flag(const Args& args, const std::string& flag, int most) {
  if (!args.has(flag)) return 0;
  int beams = args.get_int(flag, 1);
  if (beams < 1 || beams > most) throw Error(flag + " must be from 1 to " + std::to_string(most) + ", got " + std::to_string(beams));
  return static_cast<size_t>(beams);
}

size_t feature_cache_flag(const Args& args) {
  if (!args.has("--feature-cache-mb")) return size_t{256} << 20;
  int mb = args.get_int("--feature-cache-mb", 0);
  if (mb < 0) throw Error("--feature-cache-mb must not be negative, got " + std::to_string(mb));
  return static_cast<size_t>(mb) << 20;
}

DType kv_cache_flag(const Args& args) {
  std::string v = args.get("--kv-cache", "fp32");
  if (v == "fp32") return DType::kFloat32;
  if (v == "fp16") return DType::kFloat16;
  if (v == "int8") return DType::kInt8;
  throw Error("--kv-cache must be fp32, fp16 or int8, got '" + v + "'");
}

}  // namespace mminfer::cli
