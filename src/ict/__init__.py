"""ict: token-selective RLVR for language models (ICT, GRPO, 20-Entropy, STAPO, random control)."""

__version__ = "0.1.0"
