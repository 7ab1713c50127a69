"""Torch replicas of the generative architectures issue 17 tests on, written from the published
descriptions (no transformers): a LLaMA-style decoder (RoPE, grouped-query attention, RMSNorm,
SwiGLU), a Whisper-style encoder-decoder and the vision side of a SmolVLM / Idefics3-style VLM
(SigLIP-style encoder, pixel-shuffle connector) in front of the LLaMA-style decoder. Their
forward signatures are the flat ones the Optimum ONNX layouts have, so torch.onnx.export traces
them directly; the same modules run the greedy loops that are the references."""
import math

import torch
from torch import nn


# --- LLaMA-style decoder -------------------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, self.heads, self.kv_heads = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.head_dim = d // self.heads
        self.q_proj = nn.Linear(d, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, d, bias=False)

    def forward(self, x, cos, sin, mask, past_k, past_v):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = torch.cat((past_k, k), dim=2)
        v = torch.cat((past_v, v), dim=2)
        present_k, present_v = k, v
        rep = self.heads // self.kv_heads
        if rep > 1:  # grouped-query attention: each KV head serves `rep` query heads
            k = k.unsqueeze(2).expand(b, self.kv_heads, rep, k.shape[2], self.head_dim).reshape(b, self.heads, -1, self.head_dim)
            v = v.unsqueeze(2).expand(b, self.kv_heads, rep, v.shape[2], self.head_dim).reshape(b, self.heads, -1, self.head_dim)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        scores = torch.where(mask, scores, torch.tensor(-1e9, dtype=scores.dtype))
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        out = out.transpose(1, 2).reshape(b, s, self.heads * self.head_dim)
        return self.o_proj(out), present_k, present_v


class LlamaMLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, i = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(d, i, bias=False)
        self.up_proj = nn.Linear(d, i, bias=False)
        self.down_proj = nn.Linear(i, d, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.self_attn = LlamaAttention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.mlp = LlamaMLP(cfg)

    def forward(self, x, cos, sin, mask, past_k, past_v):
        h, pk, pv = self.self_attn(self.input_layernorm(x), cos, sin, mask, past_k, past_v)
        x = x + h
        return x + self.mlp(self.post_attention_layernorm(x)), pk, pv


class LlamaForCausalLM(nn.Module):
    """forward(input_ids [B,S], attention_mask [B,P+S], position_ids [B,S], past k/v per layer
    [B,kv,P,hd]) -> (logits [B,S,V], present k/v per layer [B,kv,P+S,hd])."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList(LlamaLayer(cfg) for _ in range(cfg["num_hidden_layers"]))
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        if cfg["tie_word_embeddings"]:
            self.lm_head.weight = self.embed_tokens.weight
        hd = cfg["hidden_size"] // cfg["num_attention_heads"]
        inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, input_ids, attention_mask, position_ids, *past):
        return self.run_embeds(self.embed_tokens(input_ids), attention_mask, position_ids, past)

    def run_embeds(self, x, attention_mask, position_ids, past):
        s = x.shape[1]
        total = attention_mask.shape[1]
        freqs = position_ids.unsqueeze(-1).to(torch.float32) * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)
        # Query i sits at absolute position total - s + i and sees keys up to it, minus padding.
        key_pos = torch.arange(total, device=x.device)
        query_pos = key_pos[total - s:]
        causal = key_pos.unsqueeze(0) <= query_pos.unsqueeze(1)
        mask = causal.unsqueeze(0).unsqueeze(0) & attention_mask.bool().unsqueeze(1).unsqueeze(2)
        presents = []
        for i, layer in enumerate(self.layers):
            x, pk, pv = layer(x, cos, sin, mask, past[2 * i], past[2 * i + 1])
            presents += [pk, pv]
        return (self.lm_head(self.norm(x)), *presents)


# --- Whisper-style encoder-decoder ---------------------------------------------------------

def sinusoids(length, channels):
    inc = math.log(10000) / (channels // 2 - 1)
    inv = torch.exp(-inc * torch.arange(channels // 2, dtype=torch.float32))
    t = torch.arange(length, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], dim=1)


class WhisperAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.q_proj = nn.Linear(d, d)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d)

    def split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def keys_values(self, x):
        return self.split(self.k_proj(x)), self.split(self.v_proj(x))

    def attend(self, x, k, v, causal=False):
        b, s, d = x.shape
        q = self.split(self.q_proj(x) * (self.head_dim ** -0.5))
        scores = torch.matmul(q, k.transpose(2, 3))
        if causal:  # query i at absolute position T - s + i sees keys up to it
            total = k.shape[2]
            key_pos = torch.arange(total, device=x.device)
            allowed = key_pos.unsqueeze(0) <= key_pos[total - s:].unsqueeze(1)
            scores = torch.where(allowed, scores, torch.tensor(-1e9, dtype=scores.dtype))
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out_proj(out.transpose(1, 2).reshape(b, s, d))


class WhisperEncoderLayer(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.self_attn = WhisperAttention(d, heads)
        self.final_layer_norm = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x):
        h = self.self_attn_layer_norm(x)
        x = x + self.self_attn.attend(h, *self.self_attn.keys_values(h))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.final_layer_norm(x))))


class WhisperEncoder(nn.Module):
    """input_features [B, mel, 2 * max_source_positions] -> last_hidden_state [B, max_source_positions, d]."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.conv1 = nn.Conv1d(cfg["num_mel_bins"], d, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(d, d, kernel_size=3, stride=2, padding=1)
        self.register_buffer("embed_positions", sinusoids(cfg["max_source_positions"], d))
        self.layers = nn.ModuleList(WhisperEncoderLayer(d, cfg["encoder_attention_heads"], cfg["encoder_ffn_dim"])
                                    for _ in range(cfg["encoder_layers"]))
        self.layer_norm = nn.LayerNorm(d)

    def forward(self, input_features):
        x = nn.functional.gelu(self.conv1(input_features))
        x = nn.functional.gelu(self.conv2(x)).permute(0, 2, 1)
        x = x + self.embed_positions
        for layer in self.layers:
            x = layer(x)
        return self.layer_norm(x)


class WhisperDecoderLayer(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.self_attn = WhisperAttention(d, heads)
        self.encoder_attn_layer_norm = nn.LayerNorm(d)
        self.encoder_attn = WhisperAttention(d, heads)
        self.final_layer_norm = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x, past_k, past_v, cross_k, cross_v):
        h = self.self_attn_layer_norm(x)
        k, v = self.self_attn.keys_values(h)
        k, v = torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)
        x = x + self.self_attn.attend(h, k, v, causal=True)
        x = x + self.encoder_attn.attend(self.encoder_attn_layer_norm(x), cross_k, cross_v)
        x = x + self.fc2(nn.functional.gelu(self.fc1(self.final_layer_norm(x))))
        return x, k, v


class WhisperDecoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], d)
        self.embed_positions = nn.Embedding(cfg["max_target_positions"], d)
        self.layers = nn.ModuleList(WhisperDecoderLayer(d, cfg["decoder_attention_heads"], cfg["decoder_ffn_dim"])
                                    for _ in range(cfg["decoder_layers"]))
        self.layer_norm = nn.LayerNorm(d)
        self.num_layers = cfg["decoder_layers"]

    def run(self, input_ids, self_past, cross):
        """self_past, cross: per layer (k, v). Returns logits and the new self (k, v) per layer."""
        past_len = self_past[0][0].shape[2]
        s = input_ids.shape[1]
        positions = torch.arange(past_len + s, device=input_ids.device)[past_len:]
        x = self.embed_tokens(input_ids) + self.embed_positions(positions)
        presents = []
        for layer, (pk, pv), (ck, cv) in zip(self.layers, self_past, cross):
            x, k, v = layer(x, pk, pv, ck, cv)
            presents.append((k, v))
        logits = torch.matmul(self.layer_norm(x), self.embed_tokens.weight.t())
        return logits, presents


class WhisperDecoderFirst(nn.Module):
    """decoder_model.onnx: (input_ids, encoder_hidden_states) -> logits, present.{i}.decoder.key/value,
    present.{i}.encoder.key/value (the cross-attention keys and values, computed once)."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, input_ids, encoder_hidden_states):
        b, d = input_ids.shape[0], encoder_hidden_states.shape[2]
        attn = self.decoder.layers[0].self_attn
        empty = encoder_hidden_states.new_zeros((b, attn.heads, 0, attn.head_dim))
        cross = [layer.encoder_attn.keys_values(encoder_hidden_states) for layer in self.decoder.layers]
        logits, presents = self.decoder.run(input_ids, [(empty, empty)] * self.decoder.num_layers, cross)
        out = [logits]
        for (k, v), (ck, cv) in zip(presents, cross):
            out += [k, v, ck, cv]
        return tuple(out)


class WhisperDecoderWithPast(nn.Module):
    """decoder_with_past_model.onnx: (input_ids, past_key_values.{i}.decoder.key/value,
    past_key_values.{i}.encoder.key/value) -> logits, present.{i}.decoder.key/value."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, input_ids, *past):
        n = self.decoder.num_layers
        self_past = [(past[4 * i], past[4 * i + 1]) for i in range(n)]
        cross = [(past[4 * i + 2], past[4 * i + 3]) for i in range(n)]
        logits, presents = self.decoder.run(input_ids, self_past, cross)
        out = [logits]
        for k, v in presents:
            out += [k, v]
        return tuple(out)


class LlamaFromEmbeds(nn.Module):
    """A VLM's decoder_model_merged.onnx: (inputs_embeds [B,S,d], attention_mask, position_ids,
    past k/v) -> (logits, present k/v); the same weights as the LlamaForCausalLM it wraps."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, inputs_embeds, attention_mask, position_ids, *past):
        return self.lm.run_embeds(inputs_embeds, attention_mask, position_ids, past)


class EmbedTokens(nn.Module):
    """embed_tokens.onnx: input_ids [B,S] -> inputs_embeds [B,S,d]."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids):
        return self.lm.embed_tokens(input_ids)


# --- SmolVLM / Idefics3-style vision encoder and connector ---------------------------------

class SiglipAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.q_proj, self.k_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.v_proj, self.out_proj = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        split = lambda t: t.view(b, s, self.heads, self.head_dim).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        scores = torch.matmul(q, k.transpose(2, 3)) * (self.head_dim ** -0.5)
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out_proj(out.transpose(1, 2).reshape(b, s, d))


class SiglipLayer(nn.Module):
    def __init__(self, d, heads, ffn, eps):
        super().__init__()
        self.layer_norm1 = nn.LayerNorm(d, eps=eps)
        self.self_attn = SiglipAttention(d, heads)
        self.layer_norm2 = nn.LayerNorm(d, eps=eps)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x):
        x = x + self.self_attn(self.layer_norm1(x))
        # SigLIP's MLP uses the tanh approximation of GELU ("gelu_pytorch_tanh").
        return x + self.fc2(nn.functional.gelu(self.fc1(self.layer_norm2(x)), approximate="tanh"))


def pixel_shuffle(x, side, scale):
    """Idefics3's connector shuffle: [B, side*side, D] patch features on a side x side grid ->
    [B, side*side / scale^2, D * scale^2], each output token holding scale patches of one row
    times scale rows. The grid is static (one image size), so only the batch stays symbolic."""
    d = x.shape[-1]
    x = x.reshape(-1, side, side // scale, d * scale)
    x = x.permute(0, 2, 1, 3)
    x = x.reshape(-1, side // scale, side // scale, d * scale * scale)
    x = x.permute(0, 2, 1, 3)
    return x.reshape(-1, (side // scale) ** 2, d * scale * scale)


class Idefics3VisionEncoder(nn.Module):
    """vision_encoder.onnx: pixel_values [B, 3, H, W] (one image per row at the configured size)
    -> image_features [B, (H/patch * W/patch) / scale^2, text d]: SigLIP-style ViT (patch
    convolution, learned positions, pre-norm layers, post-layernorm), pixel shuffle, then the
    connector's bias-free projection into the decoder's width."""

    def __init__(self, vcfg, text_d, scale):
        super().__init__()
        d, p = vcfg["hidden_size"], vcfg["patch_size"]
        self.patch_embedding = nn.Conv2d(vcfg["num_channels"], d, kernel_size=p, stride=p)
        self.position_embedding = nn.Embedding((vcfg["image_size"] // p) ** 2, d)
        self.layers = nn.ModuleList(SiglipLayer(d, vcfg["num_attention_heads"], vcfg["intermediate_size"],
                                                vcfg["layer_norm_eps"]) for _ in range(vcfg["num_hidden_layers"]))
        self.post_layernorm = nn.LayerNorm(d, eps=vcfg["layer_norm_eps"])
        self.scale, self.side = scale, vcfg["image_size"] // p
        self.modality_projection = nn.Linear(d * scale * scale, text_d, bias=False)

    def forward(self, pixel_values):
        x = self.patch_embedding(pixel_values).flatten(2).transpose(1, 2)
        x = x + self.position_embedding.weight
        for layer in self.layers:
            x = layer(x)
        x = self.post_layernorm(x)
        return self.modality_projection(pixel_shuffle(x, self.side, self.scale))
