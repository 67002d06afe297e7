"""Deprecated name of `ict.report.selection_overlap` (which tokens ICT and 20-Entropy pick)."""

from ict.report.selection_overlap import *  # noqa: F403
