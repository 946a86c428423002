"""VLN-BERT's instruction encoder: a small BERT-style transformer (``TextEncoder``)."""
from __future__ import annotations

import torch
from torch import nn

from ..encoders import _note, load_weights
from ..vocab import PAD_ID, Vocabulary


class TextEncoder(nn.Module):
    """Word + position embeddings and a transformer encoder (BERT-style, small, from scratch);
    ``weights``: a local torch state dict of this module."""

    def __init__(self, vocab: Vocabulary, size: int = 64, layers: int = 2, heads: int = 4, max_length: int = 512,
                 weights: str | None = None, notes: list[str] | None = None):
        super().__init__()
        self.embedding = nn.Embedding(len(vocab), size, padding_idx=PAD_ID)
        self.position = nn.Embedding(max_length, size)
        layer = nn.TransformerEncoderLayer(size, heads, dim_feedforward=2 * size, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(size)
        self.out_dim = size
        if weights:
            load_weights(self, weights, "text_encoder.weights")
            _note(notes, f"text_encoder: loaded weights from {weights}")
        else:
            _note(notes, "text_encoder: no pretrained weights given (text_encoder.weights): small transformer "
                         "trained from scratch")

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B, L) ids → outputs (B, L, D), mask (B, L) (a fully padded row keeps its first token), mean (B, D)."""
        mask = tokens != PAD_ID
        mask[:, 0] |= ~mask.any(1)
        pos = torch.arange(tokens.shape[1], device=tokens.device).clamp(max=self.position.num_embeddings - 1)
        out = self.norm(self.encoder(self.embedding(tokens) + self.position(pos)[None], src_key_padding_mask=~mask))
        m = mask.float().unsqueeze(-1)
        return out, mask, (out * m).sum(1) / m.sum(1).clamp(min=1.0)
