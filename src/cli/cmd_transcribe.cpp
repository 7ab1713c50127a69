// mminfer transcribe --pipeline DIR AUDIO... : text of speech with a Whisper-style model folder.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/json_output.h"
#include "cli/output_text.h"
#include "core/one_line.h"
#include "modal/audio/load.h"
#include "pipelines/generation/speech_to_text.h"

namespace mminfer::cli {

int cmd_transcribe(int argc, char** argv) {
  Args args(argc, argv, 2,
            with_decoder_precision_flags({"--pipeline", "--language", "--task", "--max-new-tokens", "--beam", "--kv-cache", "--threads",
                                          "--feature-cache-mb"}),
            {"--help", "--json", "--jsonl", "--timestamps", "--profile"});
  if (args.has("--help") || !args.has("--pipeline") || args.positional().empty()) {
    std::fputs(
        "usage: mminfer transcribe --pipeline DIR AUDIO... [--language en] [--task transcribe|translate]\n"
        "                          [--max-new-tokens N] [--beam N] [--kv-cache fp32|fp16|int8] [--threads N]\n"
        "                          [--timestamps] [--feature-cache-mb N] [--json | --jsonl] [--profile]\n"
        "  the text of each audio file (WAV, FLAC, Ogg, MP3...) with a Whisper-style folder (Optimum's\n"
        "  encoder_model.onnx, decoder_model.onnx, decoder_with_past_model.onnx, tokenizer.json and\n"
        "  the configs); audio longer than the model's window (30 s) is cut into windows decoded together\n"
        "  (without --timestamps; with it they decode one after another, see below)\n"
        "  --language: the spoken language (detected from the first window when neither it nor the\n"
        "  folder says); --json prints {\"results\": [{\"input\", \"text\", \"language\", \"windows\",\n"
        "  \"tokens\", \"encoder_ms\", \"encoder_runs\", \"prefill_ms\", \"decode_ms\", \"decode_ms_per_token\"}]}\n"
        "  (encoder_runs: windows encoded so far; a repeated window is encoded once unless\n"
        "  --feature-cache-mb is 0)\n"
        "  --timestamps: Whisper's timestamp mode (the folder's <|0.00|>..<|30.00|> tokens); prints\n"
        "  FILE: then one line per segment, [mm:ss.mmm --> mm:ss.mmm] text, times from the audio's\n"
        "  start. Windows decode one after another as Whisper's long-form transcription does: when a\n"
        "  window's tokens hold two timestamps in a row (and do not end in one timestamp after text),\n"
        "  its segments end at the last such pair and the next window starts at that time, so a\n"
        "  segment cut by the window's end is decoded again; else the next window follows this one.\n"
        "  --json adds \"segments\": [{\"start\", \"end\", \"text\", \"tokens\"}] (seconds),\n"
        "  \"window_starts\" (seconds) and \"window_tokens\" of the windows decoded; \"text\" holds\n"
        "  the kept segments' tokens, \"tokens\" every window's\n"
        "  a bad file prints one error line and the others still run (exit status 1)\n"
        "  --profile prints the decoder's per-step time per op type to stderr\n",
        args.usage_stream());
    std::fputs(kDecoderPrecisionUsage, args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  SessionOptions session;
  session.threads = threads_flag(args);
  const size_t feature_bytes = feature_cache_flag(args);
  session.precision = decoder_precision_flags(args);
  session.profile = args.has("--profile");
  pipelines::SpeechToText model(args.get("--pipeline"), session, kv_cache_flag(args));
  model.features().set_cache_bytes(feature_bytes);
  pipelines::TranscribeOptions options;
  options.language = args.get("--language");
  options.task = args.get("--task");
  if (!options.task.empty() && options.task != "transcribe" && options.task != "translate")
    throw Error("--task must be transcribe or translate, got '" + options.task + "'");
  options.max_new_tokens = max_new_tokens_flag(args);
  options.beams = beams_flag(args, "--beam", 16);
  options.timestamps = args.has("--timestamps");
  if (options.timestamps) model.require_timestamps();  // once, before any file
  audio::LoadOptions load;
  load.sample_rate = model.sample_rate();
  load.max_seconds = 4 * 3600;  // hours of speech are windows; past that, one clear line
  JsonResults json(json_flag(args));
  int failures = 0;
  for (const std::string& file : args.positional()) {
    try {
      pipelines::Transcript t = model.transcribe(audio::load_audio_file(file, load), options);
      double per_token = t.timings.ms_per_token();
      if (json.on()) {
        nlohmann::ordered_json result = {{"input", file},
                                         {"text", t.text},
                                         {"language", t.language},
                                         {"windows", t.windows},
                                         {"tokens", t.tokens},
                                         {"encoder_ms", t.encoder_ms},
                                         {"encoder_runs", model.features().counts().encoded.load()},
                                         {"prefill_ms", t.timings.prefill_ms},
                                         {"decode_ms", t.timings.decode_ms},
                                         {"decode_ms_per_token", per_token}};
        if (options.timestamps) {
          nlohmann::ordered_json segments = nlohmann::ordered_json::array();
          for (const auto& seg : t.segments)
            segments.push_back({{"start", seg.start}, {"end", seg.end}, {"text", seg.text}, {"tokens", seg.tokens}});
          result["segments"] = std::move(segments);
          result["window_starts"] = t.window_starts;
          result["window_tokens"] = t.window_tokens;
        }
        json.add(std::move(result));
      } else if (options.timestamps) {
        std::printf("%s:\n", one_line_text(file).c_str());
        for (const auto& seg : t.segments) {
          size_t lead = seg.text.find_first_not_of(' ');
          std::printf("[%s --> %s] %s\n", pipelines::format_timestamp(seg.start).c_str(),
                      pipelines::format_timestamp(seg.end).c_str(),
                      lead == std::string::npos ? "" : one_line(seg.text.substr(lead)).c_str());
        }
      } else {
        std::printf("%s: %s\n", one_line_text(file).c_str(), t.text.c_str());
      }
    } catch (const Error& e) {
      ++failures;
      if (json.on()) json.add({{"input", file}, {"error", e.what()}});
      std::fprintf(stderr, "mminfer transcribe: error: %s: %s\n", one_line_text(file).c_str(), e.what());
    }
    std::fflush(stdout);
  }
  json.finish();
  if (session.profile) print_op_times(model.decoder_op_times());
  return failures ? 1 : 0;
}

}  // namespace mminfer::cli
