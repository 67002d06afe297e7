"""pass@k (unbiased estimator); its bootstrap interval over problems is ict.evidence.bootstrap.

pass@k for one problem with n samples of which c are correct (Chen et al. 2021):
    1 - C(n - c, k) / C(n, k)  =  1 - prod_{i = n-c+1}^{n} (1 - k / i)     (1 when n - c < k)
The product form never builds large binomials. A benchmark's pass@k is the mean over problems.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_KS = (1, 4, 8)  # the k of pass@k when the user gives none (`ict eval --k`, EvalSettings)


def default_ks(n: int) -> list[int]:
    """1, 2, 4, ... <= n: the k values reported when only the number of samples n is set
    (the trainer's eval hook, the held-out before/after evaluation)."""
    return [2**i for i in range(n.bit_length())]


def curve_ks(n: int) -> list[int]:
    """1, 2, 4, ... < n and n itself: the k axis of a pass@k-against-k curve (`ict eval` without
    --k, the compare report's exploration section). Equals default_ks(n) when n is a power of 2."""
    ks = default_ks(n)
    return ks if ks[-1] == n else [*ks, n]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with `c` correct among `n` samples (requires k <= n)."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}: sample at least k responses")
    if n - c < k:
        return 1.0
    i = np.arange(n - c + 1, n + 1, dtype=np.float64)
    return float(1.0 - np.prod(1.0 - k / i))


def pass_at_k_per_problem(n: Sequence[int], c: Sequence[int], k: int) -> np.ndarray:
    """[P] float64: pass@k of each problem (numbers of samples `n` and correct `c`, each [P])."""
    return np.array(
        [pass_at_k(int(ni), int(ci), k) for ni, ci in zip(n, c, strict=True)], dtype=np.float64
    )


def pass_at_k_matrix(n: Sequence[int], c: Sequence[int], ks: Sequence[int]) -> np.ndarray:
    """[K, P] float64: pass@k of each problem (columns, counts `n` and `c` each [P]) for each k of
    `ks` (rows); every k must be <= every n."""
    return np.stack([pass_at_k_per_problem(n, c, k) for k in ks]) if len(ks) else np.zeros((0, 0))
