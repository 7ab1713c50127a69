#!/usr/bin/env python3
"""Test audio and reference Whisper log-mel features for tests/modal/audio_test.cpp.

    logmel_reference.py OUTDIR

Makes the clips with espeak-ng and sox, then writes, as float32 .npy files:
  <clip>.samples.npy            the samples a decoder should produce (mono, channels averaged)
  <clip>.mel<N>.<pad|nopad>.npy  log-mel features [N, frames] for the 16 kHz clips, computed in
                                float64 with torch.stft; 'pad' first pads or trims to 30 s
  mel<N>_filters.npy            the Slaney mel filterbank [N, 201] built here from its formulas
  speech_16k.mel80.pad.whisper_f32.npy  Whisper's own float32 arithmetic, for comparison only
"""
import os
import shutil
import subprocess
import sys
import wave

import numpy as np
import torch

SAMPLE_RATE = 16000
N_FFT = 400
HOP = 160
N_SAMPLES_30S = 30 * SAMPLE_RATE
SPEECH = "The quick brown fox jumps over the lazy dog. Audio preprocessing for a speech model."

# Clips whose features are compared; the key is the file stem. short_16k has fewer samples than
# one hop, so it only has padded features.
FEATURE_CLIPS = ["speech_16k", "tone440_16k", "silence_16k", "short_16k", "short170_16k", "long_16k"]


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def sox(*args):
    run("sox", "-D", *args)  # -D: no dither, so the files do not change from run to run


def make_clips(out):
    p = lambda name: os.path.join(out, name)
    run("espeak-ng", "-w", p("speech_22k.wav"), SPEECH)  # 22050 Hz mono
    # Stereo with the right channel at half level, so a mixdown that is not the mean shows.
    sox(p("speech_22k.wav"), "-c", "2", p("speech_22k_stereo.wav"), "remix", "1", "1v0.5")
    sox(p("speech_22k_stereo.wav"), "-r", "16000", "-c", "1", p("speech_16k.wav"))
    sox(p("speech_16k.wav"), p("speech_16k.flac"))
    sox(p("speech_16k.wav"), p("speech_16k.ogg"))
    sox(p("speech_16k.ogg"), "-b", "16", p("speech_16k_ogg.wav"))  # sox's Vorbis decode
    # sox's very-high-quality resampling of the stereo clip, in float: the resampler's yardstick.
    sox(p("speech_22k_stereo.wav"), "-c", "1", "-e", "float", "-b", "32", p("speech_16k_sox.wav"),
        "rate", "-v", "16000")
    sox(p("speech_16k.wav"), p("long_16k.wav"), "repeat", "12")  # ~38 s, to be trimmed to 30 s
    # The rate goes before -n so sox synthesises at that rate instead of resampling from 48 kHz.
    synth = lambda rate: ["-r", str(rate), "-c", "1", "-n", "-b", "16"]
    sox(*synth(16000), p("tone440_16k.wav"), "synth", "2", "sine", "440", "vol", "0.5")
    sox(*synth(16000), p("silence_16k.wav"), "trim", "0", "1")
    sox(*synth(16000), p("short_16k.wav"), "synth", "100s", "sine", "1000", "vol", "0.5")  # < 1 hop
    sox(*synth(16000), p("short170_16k.wav"), "synth", "170s", "sine", "700", "vol", "0.5")  # < n_fft/2
    sox(*synth(44100), p("tone1k_44k.wav"), "synth", "1", "sine", "1000", "vol", "0.5")
    with open(p("not_audio.txt"), "w") as f:
        f.write("This is a text file, not audio.\n" * 20)
    # 31 minutes of silence: FLAC keeps it small, its header says how long it is.
    sox(*synth(8000), p("silence_31min.flac"), "trim", "0", "31:00")


def read_wav16(path):
    """Samples as libsndfile gives floats: int16 / 32768, channels averaged."""
    with wave.open(path) as w:
        assert w.getsampwidth() == 2, path
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float64) / 32768
        return x.reshape(-1, w.getnchannels()).mean(axis=1), w.getframerate()


# --- Slaney mel scale and filterbank (librosa.filters.mel, htk=False, norm='slaney') ----------
def hz_to_mel(hz):
    hz = np.asarray(hz, dtype=np.float64)
    linear = hz / (200.0 / 3)
    log = 15.0 + np.log(np.maximum(hz, 1e-300) / 1000.0) / (np.log(6.4) / 27.0)
    return np.where(hz >= 1000.0, log, linear)


def mel_to_hz(mel):
    mel = np.asarray(mel, dtype=np.float64)
    linear = mel * (200.0 / 3)
    log = 1000.0 * np.exp((np.log(6.4) / 27.0) * (mel - 15.0))
    return np.where(mel >= 15.0, log, linear)


def mel_filters(n_mels, sr=SAMPLE_RATE, n_fft=N_FFT, fmin=0.0, fmax=8000.0):
    freqs = np.arange(n_fft // 2 + 1) * sr / n_fft
    edges = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    left, centre, right = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rise = (freqs[None, :] - left) / (centre - left)
    fall = (right - freqs[None, :]) / (right - centre)
    weights = np.maximum(0.0, np.minimum(rise, fall))
    return weights * (2.0 / (right - left))  # unit area per triangle


# --- log-mel -----------------------------------------------------------------------------------
def log_mel(audio, filters, pad_to_30s, dtype=torch.float64):
    audio = np.asarray(audio, dtype=np.float64)
    if pad_to_30s:
        audio = np.pad(audio[:N_SAMPLES_30S], (0, max(0, N_SAMPLES_30S - len(audio))))
    # center=True pads by reflection, but torch refuses padding longer than the clip; numpy's
    # reflect keeps bouncing and equals torch's wherever torch works (checked below).
    padded = torch.from_numpy(np.pad(audio, N_FFT // 2, mode="reflect")).to(dtype)
    window = torch.hann_window(N_FFT, periodic=True, dtype=dtype)
    stft = torch.stft(padded, N_FFT, HOP, window=window, center=False, return_complex=True)
    if len(audio) > N_FFT // 2:
        direct = torch.stft(torch.from_numpy(audio).to(dtype), N_FFT, HOP, window=window, center=True,
                            pad_mode="reflect", return_complex=True)
        assert torch.allclose(stft, direct, rtol=0, atol=1e-9 if dtype == torch.float64 else 1e-4)
    power = stft[..., :-1].abs() ** 2  # Whisper drops the last frame
    mel = torch.from_numpy(filters).to(dtype) @ power
    log_spec = torch.clamp(mel, min=1e-10).log10()
    log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).numpy()


def save(out, name, array):
    np.save(os.path.join(out, name), np.ascontiguousarray(array, dtype=np.float32))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    for tool in ("espeak-ng", "sox"):
        if not shutil.which(tool):
            sys.exit(f"logmel_reference: {tool} is missing; scripts/bootstrap installs it")
    os.makedirs(out, exist_ok=True)
    make_clips(out)

    filters = {n: mel_filters(n) for n in (80, 128)}
    for n, f in filters.items():
        save(out, f"mel{n}_filters.npy", f)

    for stem in ["speech_16k", "speech_22k_stereo", "speech_16k_ogg"] + FEATURE_CLIPS:
        samples, _ = read_wav16(os.path.join(out, stem + ".wav"))
        save(out, f"{stem}.samples.npy", samples)
        if stem not in FEATURE_CLIPS:
            continue
        for n in (80, 128):
            for pad in (True, False):
                if not pad and len(samples) < HOP:
                    continue
                save(out, f"{stem}.mel{n}.{'pad' if pad else 'nopad'}.npy", log_mel(samples, filters[n], pad))

    speech, _ = read_wav16(os.path.join(out, "speech_16k.wav"))
    whisper = log_mel(speech, filters[80].astype(np.float32), True, dtype=torch.float32)
    save(out, "speech_16k.mel80.pad.whisper_f32.npy", whisper)


if __name__ == "__main__":
    main()
