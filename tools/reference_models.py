"""Small torch models with real architectures, used as references for mminfer.

Each builder returns (module, cases): cases is a list of (case name, {input name: tensor}) whose
first entry is the export example. All weights come from a fixed seed, so a model is the same
on every run. Sizes are small and deliberately odd (37-pixel-wide images, 13 tokens, 101 audio
frames, batch 3) to catch kernels that only work on round numbers.
"""
import math

import torch
from torch import nn
import torch.nn.functional as F


def quick_gelu(x):
    return x * torch.sigmoid(1.702 * x)


class Attention(nn.Module):
    """Multi-head self-attention written out the way HF writes it (q/k/v/out linears)."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads, self.head_dim = heads, width // heads
        self.q = nn.Linear(width, width)
        self.k = nn.Linear(width, width)
        self.v = nn.Linear(width, width)
        self.out = nn.Linear(width, width)

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x, additive_mask=None):
        b, t, w = x.shape
        q = self.split(self.q(x)) * (self.head_dim ** -0.5)
        k, v = self.split(self.k(x)), self.split(self.v(x))
        scores = q @ k.transpose(-1, -2)
        if additive_mask is not None:
            scores = scores + additive_mask
        ctx = torch.softmax(scores, dim=-1) @ v
        return self.out(ctx.transpose(1, 2).reshape(b, t, w))


class PreLNBlock(nn.Module):
    """CLIP / Whisper block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, width, heads, act):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.act = act

    def forward(self, x, additive_mask=None):
        x = x + self.attn(self.ln1(x), additive_mask)
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class PostLNBlock(nn.Module):
    """BERT block: ln(x + attn(x)), then ln(x + mlp(x)), erf GELU."""

    def __init__(self, width, heads, eps=1e-12):
        super().__init__()
        self.attn = Attention(width, heads)
        self.ln1, self.ln2 = nn.LayerNorm(width, eps=eps), nn.LayerNorm(width, eps=eps)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x, additive_mask):
        x = self.ln1(x + self.attn(x, additive_mask))
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


class ClipVision(nn.Module):
    def __init__(self, image_hw=(30, 37), patch=6, width=48, heads=3, layers=2, proj=32):
        super().__init__()
        grid = (image_hw[0] // patch) * (image_hw[1] // patch)
        self.patch_embed = nn.Conv2d(3, width, patch, stride=patch, bias=False)
        self.class_embedding = nn.Parameter(torch.randn(width))
        self.position_embedding = nn.Parameter(torch.randn(grid + 1, width) * 0.1)
        self.pre_ln = nn.LayerNorm(width)
        self.blocks = nn.ModuleList(PreLNBlock(width, heads, quick_gelu) for _ in range(layers))
        self.post_ln = nn.LayerNorm(width)
        self.proj = nn.Linear(width, proj, bias=False)

    def forward(self, pixel_values):
        x = self.patch_embed(pixel_values).flatten(2).transpose(1, 2)  # [B, grid, W]
        cls = self.class_embedding.expand(x.shape[0], 1, -1)
        x = torch.cat([cls, x], dim=1) + self.position_embedding
        x = self.pre_ln(x)
        for block in self.blocks:
            x = block(x)
        pooled = self.post_ln(x[:, 0, :])
        return x, self.proj(pooled)


class ClipText(nn.Module):
    def __init__(self, vocab=100, max_len=16, width=32, heads=4, layers=2, proj=24):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, width)
        self.position_embedding = nn.Embedding(max_len, width)
        self.blocks = nn.ModuleList(PreLNBlock(width, heads, quick_gelu) for _ in range(layers))
        self.final_ln = nn.LayerNorm(width)
        self.proj = nn.Linear(width, proj, bias=False)

    def forward(self, input_ids, attention_mask):
        b, t = input_ids.shape
        positions = torch.arange(t, dtype=torch.long)  # Range
        x = self.token_embedding(input_ids) + self.position_embedding(positions)
        lowest = torch.finfo(x.dtype).min
        # Causal mask as HF CLIP builds it: fill with the lowest float, keep the strict upper triangle.
        causal = torch.empty(b, t, t, dtype=x.dtype).fill_(lowest).triu_(1).unsqueeze(1)
        # Padding mask as HF expands it: [B, T] -> [B, 1, T, T], inverted, masked_fill (Expand, Where).
        expanded = attention_mask[:, None, None, :].expand(b, 1, t, t).to(x.dtype)
        inverted = 1.0 - expanded
        padding = inverted.masked_fill(inverted.to(torch.bool), lowest)
        mask = causal + padding
        for block in self.blocks:
            x = block(x, mask)
        x = self.final_ln(x)
        # EOT pooling: the end-of-text token has the largest id (ArgMax + Gather).
        pooled = x[torch.arange(b), input_ids.argmax(dim=-1)]
        return x, self.proj(pooled)


class Bert(nn.Module):
    def __init__(self, vocab=120, max_len=32, type_vocab=2, width=48, heads=4, layers=2):
        super().__init__()
        self.word = nn.Embedding(vocab, width)
        self.position = nn.Embedding(max_len, width)
        self.token_type = nn.Embedding(type_vocab, width)
        self.emb_ln = nn.LayerNorm(width, eps=1e-12)
        self.blocks = nn.ModuleList(PostLNBlock(width, heads) for _ in range(layers))
        self.pooler = nn.Linear(width, width)

    def forward(self, input_ids, attention_mask, token_type_ids):
        t = input_ids.shape[1]
        positions = torch.arange(t, dtype=torch.long).unsqueeze(0)
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
        x = self.emb_ln(x)
        # HF's extended attention mask: Unsqueeze, Cast, Sub, Mul.
        extended = attention_mask[:, None, None, :].to(x.dtype)
        extended = (1.0 - extended) * torch.finfo(x.dtype).min
        for block in self.blocks:
            x = block(x, extended)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return x, pooled


def sinusoids(length, channels, max_timescale=10000):
    """Whisper's fixed positional table: sin on the first half of channels, cos on the second."""
    log_step = math.log(max_timescale) / (channels // 2 - 1)
    inv = torch.exp(-log_step * torch.arange(channels // 2, dtype=torch.float32))
    t = torch.arange(length, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], dim=1)


class WhisperEncoder(nn.Module):
    def __init__(self, mels=80, width=48, heads=4, layers=2, max_positions=128):
        super().__init__()
        self.conv1 = nn.Conv1d(mels, width, 3, padding=1)
        self.conv2 = nn.Conv1d(width, width, 3, stride=2, padding=1)
        self.register_buffer("positions", sinusoids(max_positions, width))
        self.blocks = nn.ModuleList(PreLNBlock(width, heads, F.gelu) for _ in range(layers))
        self.final_ln = nn.LayerNorm(width)

    def forward(self, input_features):
        x = F.gelu(self.conv1(input_features))
        x = F.gelu(self.conv2(x)).permute(0, 2, 1)  # [B, T', W]
        x = x + self.positions[: x.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.final_ln(x)


def _randomize(module, seed):
    """Spreads LayerNorm affine parameters away from 1/0 so the tests see them."""
    g = torch.Generator().manual_seed(seed + 1)
    for m in module.modules():
        if isinstance(m, nn.LayerNorm):
            with torch.no_grad():
                m.weight.copy_(1.0 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
    return module.eval()


def _token_batch(g, batch, tokens, vocab, lengths):
    """Ids in [1, vocab-2], the largest id (EOT) at the end of each sequence, 0-padding after it."""
    ids = torch.randint(1, vocab - 1, (batch, tokens), generator=g)
    mask = torch.zeros(batch, tokens, dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, n - 1] = vocab - 1
        ids[i, n:] = 0
        mask[i, :n] = 1
    return ids, mask


def clip_vision(seed):
    torch.manual_seed(seed)
    model = _randomize(ClipVision(), seed)
    g = torch.Generator().manual_seed(seed + 2)
    cases = [("batch3", {"pixel_values": torch.randn(3, 3, 30, 37, generator=g)}),
             ("batch1", {"pixel_values": torch.randn(1, 3, 30, 37, generator=g)})]
    spec = dict(outputs=["last_hidden_state", "image_embeds"],
                dynamic_axes={"pixel_values": {0: "batch"}, "last_hidden_state": {0: "batch"},
                              "image_embeds": {0: "batch"}})
    return model, cases, spec


def clip_text(seed):
    torch.manual_seed(seed)
    model = _randomize(ClipText(), seed)
    g = torch.Generator().manual_seed(seed + 2)
    ids3, mask3 = _token_batch(g, 3, 13, 100, [13, 7, 10])
    ids2, mask2 = _token_batch(g, 2, 5, 100, [5, 3])
    cases = [("batch3_tokens13", {"input_ids": ids3, "attention_mask": mask3}),
             ("batch2_tokens5", {"input_ids": ids2, "attention_mask": mask2})]
    seq = {0: "batch", 1: "sequence"}
    spec = dict(outputs=["last_hidden_state", "text_embeds"],
                dynamic_axes={"input_ids": seq, "attention_mask": seq, "last_hidden_state": seq,
                              "text_embeds": {0: "batch"}})
    return model, cases, spec


def bert(seed):
    torch.manual_seed(seed)
    model = _randomize(Bert(), seed)
    g = torch.Generator().manual_seed(seed + 2)
    ids3, mask3 = _token_batch(g, 3, 13, 120, [13, 9, 4])
    types3 = torch.zeros_like(ids3)
    types3[:, 6:] = 1
    ids1, mask1 = _token_batch(g, 1, 21, 120, [21])
    types1 = torch.randint(0, 2, (1, 21), generator=g)
    cases = [("batch3_tokens13", {"input_ids": ids3, "attention_mask": mask3, "token_type_ids": types3}),
             ("batch1_tokens21", {"input_ids": ids1, "attention_mask": mask1, "token_type_ids": types1})]
    seq = {0: "batch", 1: "sequence"}
    spec = dict(outputs=["last_hidden_state", "pooler_output"],
                dynamic_axes={"input_ids": seq, "attention_mask": seq, "token_type_ids": seq,
                              "last_hidden_state": seq, "pooler_output": {0: "batch"}})
    return model, cases, spec


def whisper_encoder(seed):
    torch.manual_seed(seed)
    model = _randomize(WhisperEncoder(), seed)
    g = torch.Generator().manual_seed(seed + 2)
    cases = [("batch3_frames101", {"input_features": torch.randn(3, 80, 101, generator=g)}),
             ("batch1_frames64", {"input_features": torch.randn(1, 80, 64, generator=g)})]
    spec = dict(outputs=["last_hidden_state"],
                dynamic_axes={"input_features": {0: "batch", 2: "frames"}, "last_hidden_state": {0: "batch", 1: "frames"}})
    return model, cases, spec


# name -> (builder, seed)
MODELS = {
    "clip_vision": (clip_vision, 101),
    "clip_text": (clip_text, 202),
    "bert": (bert, 303),
    "whisper_encoder": (whisper_encoder, 404),
}
