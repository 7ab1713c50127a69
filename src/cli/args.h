// A small command-line parser: --flag VALUE, --flag=VALUE, repeated flags, positionals.
#pragma once
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "mminfer/session.h"

namespace mminfer::cli {

class Args {
 public:
  // value_flags take a value; bool_flags do not. Unknown flags throw Error.
  Args(int argc, char** argv, int first, const std::set<std::string>& value_flags,
       const std::set<std::string>& bool_flags);
  bool has(const std::string& flag) const { return values_.count(flag) || bools_.count(flag); }
  // Where a command's usage goes: stdout when asked for (--help, -h), stderr after a mistake.
  std::FILE* usage_stream() const { return has("--help") ? stdout : stderr; }
  std::string get(const std::string& flag, const std::string& fallback = "") const;
  int get_int(const std::string& flag, int fallback) const;  // throws Error on non-numbers
  double get_double(const std::string& flag, double fallback) const;  // throws Error on non-numbers
  std::vector<std::string> all(const std::string& flag) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // Every flag with a value, in command-line order (for inputs whose order matters across flags).
  const std::vector<std::pair<std::string, std::string>>& in_order() const { return in_order_; }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::set<std::string> bools_;
  std::vector<std::string> positional_;
  std::vector<std::pair<std::string, std::string>> in_order_;
};

// --threads N (0, all cores, when absent). Also made the process default: a command is one
// user's intent, so its preprocessing and the figures it prints follow the same count.
int threads_flag(const Args& args);

// --inter-op auto|off|on (auto when absent); throws Error on anything else.
InterOp inter_op_flag(const Args& args);

// --max-new-tokens N (0 when absent: the folder's generation_config); throws Error below 1.
size_t max_new_tokens_flag(const Args& args);
// `flag` (--beam, --num-beams) N from 1 to `most` (0 when absent); throws Error outside.
size_t beams_flag(const Args& args, const std::string& flag, int most);

// --kv-cache fp32|fp16|int8 (fp32 when absent): the dtype of a generative model's KV cache.
DType kv_cache_flag(const Args& args);

// --feature-cache-mb N (256 when absent; 0: none): the bytes an encoder-feature cache may hold.
size_t feature_cache_flag(const Args& args);

// `list` split at its commas; an empty item throws Error naming `flag` and the `form` it expects.
std::vector<std::string> comma_list(const std::string& list, const std::string& flag, const std::string& form);

// --outputs NAME,NAME: the model outputs to compute (all when absent); empty names are an error.
std::vector<std::string> outputs_flag(const Args& args);

// --merge-tokens R (run): tokens merged after each ViT block's attention (0: none).
int merge_tokens_flag(const Args& args, const std::string& flag = "--merge-tokens");
// --merge-tokens R[,R...] (bench): one value per session timed in turn ({0} when absent), at
// most 8.
std::vector<int> merge_tokens_list(const Args& args);

// The precision flags shared by run, bench and inspect; throws Error (one line) on bad values.
//   --precision SPEC         int8 | fp32 | MODALITY=PRECISION,... (see mminfer/precision.h)
//   --keep-fp32 REGEX        node names that stay FP32
//   --fp32-edges on|off      keep first/last/projection layers FP32 (default on)
//   --int8-activations token|tensor   quantize activations per token (default) or per tensor
extern const std::set<std::string> kPrecisionFlags;
extern const char* const kPrecisionUsage;
PrecisionPolicy precision_flags(const Args& args);
// kPrecisionFlags added to a command's own value flags.
std::set<std::string> with_precision_flags(std::set<std::string> flags);

// The precision flags of the generative commands (generate, transcribe, caption, chat, bench
// --pipeline): the decoder's weights quantized as it loads (PrecisionPolicy::decoder_weight_bits).
//   --precision text=int4|int8|fp32 (or the word alone)   4- or 8-bit weights in blocks, or FP32
//   --block-size N                                          values per block along K (default 32)
//   --keep-fp32 REGEX                                       MatMuls (node or weight names) kept FP32
extern const char* const kDecoderPrecisionUsage;
std::set<std::string> with_decoder_precision_flags(std::set<std::string> flags);
PrecisionPolicy decoder_precision_flags(const Args& args);
// --cascade H (generate, caption): the entropy in nats above which the full model chooses a
// token, the draft (--draft, --draft-precision) choosing the others; -1 without it.
double cascade_flag(const Args& args);
// --speculate K (1 to 16), 0 without it; --draft-precision int4|int8 (or fp32 where `fp32_draft`)
// as the draft decoder's weight bits (0: fp32), `default_word` when not given. Either flag without
// --speculate or --cascade is an error, and so are both.
size_t speculate_flag(const Args& args);
int draft_bits_flag(const Args& args, const std::string& default_word, bool fp32_draft);

// Splits "NAME=VALUE" at the last '=' (names may contain '=' rarely; paths rarely do).
std::pair<std::string, std::string> split_assignment(const std::string& s, const std::string& flag);

}  // namespace mminfer::cli
