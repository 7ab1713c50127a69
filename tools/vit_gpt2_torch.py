"""Torch replica of transformers' VisionEncoderDecoderModel(ViT, GPT-2), written from the published
descriptions (no transformers): a ViT encoder (patch embeddings, [CLS], learned positions,
pre-norm blocks, final LayerNorm) and a GPT-2 decoder with cross-attention in every block
(learned positions, LayerNorm, tanh-GELU MLP, LM head tied to the token embeddings). Module
names follow the Hugging Face ones where the maths is the same (GPT-2's fused c_attn is kept as
separate q/k/v projections). The wrappers at the end have the flat signatures of
Optimum's ONNX files, so torch.onnx.export traces them directly."""
import math

import torch
from torch import nn


class SelfAttention(nn.Module):
    """ViT attention: query/key/value/output projections with biases, no mask."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.query, self.key, self.value, self.output = (nn.Linear(d, d) for _ in range(4))

    def split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.output(out.transpose(1, 2).reshape(b, s, d))


def sincos_2d(grid, d):
    """[1, 1 + grid*grid, d]: zeros for [CLS], then per patch sin/cos of its column in the
    first half of the channels and of its row in the second."""
    quarter = d // 4
    freq = 1.0 / (100.0 ** (torch.arange(quarter, dtype=torch.float32) / quarter))
    rows, cols = torch.meshgrid(torch.arange(grid, dtype=torch.float32), torch.arange(grid, dtype=torch.float32),
                                indexing="ij")
    parts = []
    for pos in (cols.reshape(-1), rows.reshape(-1)):
        angle = pos[:, None] * freq[None, :]
        parts += [angle.sin(), angle.cos()]
    table = torch.cat(parts, dim=1)
    return torch.cat((torch.zeros(1, d), table), dim=0)[None]


class ViTLayer(nn.Module):
    def __init__(self, d, heads, ffn, eps):
        super().__init__()
        self.layernorm_before = nn.LayerNorm(d, eps=eps)
        self.attention = SelfAttention(d, heads)
        self.layernorm_after = nn.LayerNorm(d, eps=eps)
        self.intermediate, self.output = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x):
        x = x + self.attention(self.layernorm_before(x))
        return x + self.output(nn.functional.gelu(self.intermediate(self.layernorm_after(x))))


class ViTEncoder(nn.Module):
    """pixel_values [B, 3, H, W] -> last_hidden_state [B, 1 + (H/p)(W/p), d]."""

    def __init__(self, cfg):
        super().__init__()
        d, p = cfg["hidden_size"], cfg["patch_size"]
        patches = (cfg["image_size"] // p) ** 2
        self.projection = nn.Conv2d(cfg["num_channels"], d, kernel_size=p, stride=p)
        self.cls_token = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        # Learned, but started from 2-D sines and cosines (as MAE does): a small model then
        # knows where each patch is from the first step instead of learning it.
        self.position_embeddings = nn.Parameter(sincos_2d(cfg["image_size"] // p, d))
        self.layers = nn.ModuleList(ViTLayer(d, cfg["num_attention_heads"], cfg["intermediate_size"],
                                             cfg["layer_norm_eps"]) for _ in range(cfg["num_hidden_layers"]))
        self.layernorm = nn.LayerNorm(d, eps=cfg["layer_norm_eps"])

    def forward(self, pixel_values):
        x = self.projection(pixel_values).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.position_embeddings
        for layer in self.layers:
            x = layer(x)
        return self.layernorm(x)


class GPT2Attention(nn.Module):
    """Self-attention (causal, with a cache) or cross-attention (keys and values from the
    encoder, computed once). Separate q/k/v projections; GPT-2's fused c_attn is the same maths."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.q_proj, self.k_proj, self.v_proj, self.c_proj = (nn.Linear(d, d) for _ in range(4))

    def split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def keys_values(self, x):
        return self.split(self.k_proj(x)), self.split(self.v_proj(x))

    def attend(self, x, k, v, causal):
        b, s, d = x.shape
        q = self.split(self.q_proj(x))
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        if causal:  # query i sits at absolute position T - s + i and sees keys up to it
            total = k.shape[2]
            key_pos = torch.arange(total, device=x.device)
            allowed = key_pos.unsqueeze(0) <= key_pos[total - s:].unsqueeze(1)
            scores = torch.where(allowed, scores, torch.tensor(-1e9, dtype=scores.dtype))
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.c_proj(out.transpose(1, 2).reshape(b, s, d))


class GPT2MLP(nn.Module):
    def __init__(self, d, ffn):
        super().__init__()
        self.c_fc, self.c_proj = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x):
        return self.c_proj(nn.functional.gelu(self.c_fc(x), approximate="tanh"))  # GPT-2's gelu_new


class GPT2Block(nn.Module):
    def __init__(self, d, heads, ffn, eps):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, eps=eps)
        self.attn = GPT2Attention(d, heads)
        self.ln_cross_attn = nn.LayerNorm(d, eps=eps)
        self.crossattention = GPT2Attention(d, heads)
        self.ln_2 = nn.LayerNorm(d, eps=eps)
        self.mlp = GPT2MLP(d, ffn)

    def forward(self, x, past_k, past_v, cross_k, cross_v):
        h = self.ln_1(x)
        k, v = self.attn.keys_values(h)
        k, v = torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)
        x = x + self.attn.attend(h, k, v, causal=True)
        x = x + self.crossattention.attend(self.ln_cross_attn(x), cross_k, cross_v, causal=False)
        x = x + self.mlp(self.ln_2(x))
        return x, k, v


class GPT2Decoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["n_embd"]
        self.wte = nn.Embedding(cfg["vocab_size"], d)
        self.wpe = nn.Embedding(cfg["n_positions"], d)
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe.weight, std=0.01)
        self.h = nn.ModuleList(GPT2Block(d, cfg["n_head"], cfg["n_inner"], cfg["layer_norm_epsilon"])
                               for _ in range(cfg["n_layer"]))
        self.ln_f = nn.LayerNorm(d, eps=cfg["layer_norm_epsilon"])
        self.num_layers = cfg["n_layer"]
        self.draft_heads = None  # DraftHeads, when trained: exported as the extra output draft_logits

    def cross_keys_values(self, encoder_hidden_states):
        return [block.crossattention.keys_values(encoder_hidden_states) for block in self.h]

    def run(self, input_ids, self_past, cross):
        """self_past, cross: per layer (k, v). Returns logits and the new self (k, v) per layer."""
        hidden, presents = self.run_hidden(input_ids, self_past, cross)
        return self.logits(hidden), presents

    def logits(self, hidden):
        return torch.matmul(hidden, self.wte.weight.t())

    def run_hidden(self, input_ids, self_past, cross):
        """As run(), with the final layer norm's output in place of the logits."""
        past_len = self_past[0][0].shape[2]
        positions = torch.arange(past_len + input_ids.shape[1], device=input_ids.device)[past_len:]
        x = self.wte(input_ids) + self.wpe(positions)
        presents = []
        for block, (pk, pv), (ck, cv) in zip(self.h, self_past, cross):
            x, k, v = block(x, pk, pv, ck, cv)
            presents.append((k, v))
        return self.ln_f(x), presents

    def empty_past(self, batch, like):
        attn = self.h[0].attn
        empty = like.new_zeros((batch, attn.heads, 0, attn.head_dim))
        return [(empty, empty)] * self.num_layers

    def forward(self, input_ids, encoder_hidden_states):
        """Teacher-forced logits of a whole sequence (training)."""
        return self.logits(self.hidden(input_ids, encoder_hidden_states))

    def hidden(self, input_ids, encoder_hidden_states):
        """Teacher-forced final hidden states of a whole sequence."""
        h, _ = self.run_hidden(input_ids, self.empty_past(input_ids.shape[0], encoder_hidden_states),
                               self.cross_keys_values(encoder_hidden_states))
        return h

    def outputs(self, input_ids, self_past, cross):
        """The exported decoders' logits (and draft logits, with heads) and presents."""
        hidden, presents = self.run_hidden(input_ids, self_past, cross)
        extra = [] if self.draft_heads is None else [self.draft_heads(hidden, self.wte.weight)]
        return self.logits(hidden), extra, presents


class DraftHeads(nn.Module):
    """Heads that guess the tokens 2 .. count + 1 positions ahead from the final hidden state, for
    speculative decoding without a draft model (as Medusa does): head j's state is
    h + SiLU(W_j h + b_j), read out through the tied embedding. The heads' layers are one product
    (a few ops a step, however many heads). Zero-initialised, each head starts as the model's own
    next-token guess. forward: hidden [B, S, d] -> draft logits [B, S, count, vocab]."""

    def __init__(self, d, count):
        super().__init__()
        self.count = count
        self.proj = nn.Linear(d, count * d)
        nn.init.zeros_(self.proj.weight), nn.init.zeros_(self.proj.bias)

    def forward(self, hidden, embedding):
        b, s, d = hidden.shape
        states = hidden.unsqueeze(2) + nn.functional.silu(self.proj(hidden)).view(b, s, self.count, d)
        return torch.matmul(states, embedding.t())


class DecoderFirst(nn.Module):
    """decoder_model.onnx: (input_ids, encoder_hidden_states) -> logits, present.{i}.decoder.key/value,
    present.{i}.encoder.key/value (and draft_logits last, when the decoder has draft heads)."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, input_ids, encoder_hidden_states):
        cross = self.decoder.cross_keys_values(encoder_hidden_states)
        logits, extra, presents = self.decoder.outputs(
            input_ids, self.decoder.empty_past(input_ids.shape[0], encoder_hidden_states), cross)
        out = [logits]
        for (k, v), (ck, cv) in zip(presents, cross):
            out += [k, v, ck, cv]
        return tuple(out + extra)


class DecoderWithPast(nn.Module):
    """decoder_with_past_model.onnx: (input_ids, past_key_values.{i}.decoder.key/value,
    past_key_values.{i}.encoder.key/value) -> logits, present.{i}.decoder.key/value (and draft_logits
    last, when the decoder has draft heads)."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, input_ids, *past):
        n = self.decoder.num_layers
        logits, extra, presents = self.decoder.outputs(input_ids, [(past[4 * i], past[4 * i + 1]) for i in range(n)],
                                                       [(past[4 * i + 2], past[4 * i + 3]) for i in range(n)])
        out = [logits]
        for k, v in presents:
            out += [k, v]
        return tuple(out + extra)


def greedy(encoder, decoder, pixel_values, start_id, eos_id, max_new_tokens):
    """Greedy decoding as transformers' generate does it: one token per step through the cache,
    rows that produced eos get eos (the pad) from then on, stop when every row has. Returns the
    new tokens [B, steps] and each step's last-position logits [steps, B, V]."""
    b = pixel_values.shape[0]
    first, with_past = DecoderFirst(decoder), DecoderWithPast(decoder)
    n = decoder.num_layers
    with torch.no_grad():
        logits, *presents = first(torch.full((b, 1), start_id, dtype=torch.int64), encoder(pixel_values))
        cross = [presents[4 * i + 2:4 * i + 4] for i in range(n)]
        self_kv = [presents[4 * i:4 * i + 2] for i in range(n)]
        done = torch.zeros(b, dtype=torch.bool)
        tokens, step_logits = [], []
        for step in range(max_new_tokens):
            last = logits[:, -1, :]
            nxt = torch.where(done, torch.tensor(eos_id), last.argmax(-1))
            done |= nxt == eos_id
            tokens.append(nxt[:, None])
            step_logits.append(last)
            if bool(done.all()) or step + 1 == max_new_tokens:
                break
            logits, *presents = with_past(nxt[:, None], *[t for i in range(n) for t in (*self_kv[i], *cross[i])])
            self_kv = [presents[2 * i:2 * i + 2] for i in range(n)]
    return torch.cat(tokens, dim=1), torch.stack(step_logits)
