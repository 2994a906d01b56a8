"""The gradient noise scale B_simple = tr(Sigma) / |G|^2 (McCandlish et al. 2018, "An Empirical Model of
Large-Batch Training"): the batch size, in tokens, beyond which a larger batch buys little per step.

Two gradient norms of different batch sizes estimate both terms without bias (their appendix A.1):

    |G|^2    ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
    tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)

where G_small is the mean gradient of B_small tokens and G_big that of B_big tokens. Single-step estimates are
very noisy (|G|^2 can even come out negative), so each term is smoothed with an exponential moving average,
bias-corrected like Adam's moments, before the ratio is taken.

In the trainer, the big batch is the step's global batch and the small batch is its first round of
micro-batches (one micro-batch on each data-parallel rank), whose gradient is reduced once more when
measured: see trainer.rank.step.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class NoiseScale:
    """Bias-corrected EMAs of |G|^2 and tr(Sigma); `update` returns the current B_simple in tokens."""

    beta: float = 0.95
    updates: int = 0
    ema_grad_sq: float = 0.0
    ema_trace: float = 0.0

    def update(self, small_sq: float, small_tokens: int, big_sq: float, big_tokens: int) -> float | None:
        grad_sq, trace = two_batch_estimates(small_sq, small_tokens, big_sq, big_tokens)
        self.updates += 1
        self.ema_grad_sq = self.beta * self.ema_grad_sq + (1 - self.beta) * grad_sq
        self.ema_trace = self.beta * self.ema_trace + (1 - self.beta) * trace
        return self.value

    @property
    def grad_sq(self) -> float:
        """Bias-corrected average of |G|^2 (the early averages would otherwise lean towards 0)."""
        return self.ema_grad_sq / (1 - self.beta**self.updates)

    @property
    def trace(self) -> float:
        return self.ema_trace / (1 - self.beta**self.updates)

    @property
    def value(self) -> float | None:
        """B_simple in tokens, or None before any update and while the averaged |G|^2 is not positive."""
        if self.updates == 0 or self.grad_sq <= 0:
            return None
        return self.trace / self.grad_sq


def two_batch_estimates(small_sq: float, small_tokens: int, big_sq: float, big_tokens: int) -> tuple[float, float]:
    """Unbiased single-step estimates of |G|^2 and tr(Sigma) from the squared norms of two mean gradients."""
    if not 0 < small_tokens < big_tokens:
        raise ValueError(f"need 0 < small batch < big batch, got {small_tokens} and {big_tokens} tokens")
    grad_sq = (big_tokens * big_sq - small_tokens * small_sq) / (big_tokens - small_tokens)
    trace = (small_sq - big_sq) / (1 / small_tokens - 1 / big_tokens)
    return grad_sq, trace


def measured_on(step: int, every: int) -> bool:
    """Whether optimizer step `step` (1, 2, ...) measures the noise scale under train.gns_every `every` (0: none)."""
    return every > 0 and step % every == 0


def recommended_batch_tokens(noise_scale: float | None, seq_len: int) -> int | None:
    """B_simple rounded to whole rows: a global batch near the noise scale trades steps for samples evenly."""
    if noise_scale is None or noise_scale <= 0:
        return None
    return max(1, round(noise_scale / seq_len)) * seq_len
