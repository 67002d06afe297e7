"""The quiet console of `ict train` and `ict compare`: third-party logs and bars off, ict's kept.

`quiet_console()` silences, for its duration, transformers' info logs and the loading/saving bars
of transformers, huggingface_hub and datasets, and every other tqdm bar created outside the `ict`
package (such as transformers' GGUF de-quantisation, which uses tqdm directly). Errors still
print, ict's own bars (the trainer's step bar) still show, and everything is restored on exit.
`--verbose` on those commands skips it.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys

# set for the duration: the libraries' own switches (read when a bar is made, and by child
# processes); TQDM_DISABLE is not among them, since tqdm reads it once at import time
_ENV = {"HF_DATASETS_DISABLE_PROGRESS_BARS": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


@contextlib.contextmanager
def quiet_console(verbose: bool = False):
    """Silence third-party logs and progress bars for the duration (errors still print); no-op
    when `verbose`. Restores the previous verbosity, bar settings and environment on exit."""
    if verbose:
        yield
        return
    import transformers.utils.logging as tf_logging
    from huggingface_hub import utils as hub_utils

    saved_env = {key: os.environ.get(key) for key in _ENV}
    saved = (
        tf_logging.get_verbosity(),
        tf_logging.is_progress_bar_enabled(),
        hub_utils.are_progress_bars_disabled(),
    )
    os.environ.update(_ENV)
    tf_logging.set_verbosity_error()
    tf_logging.disable_progress_bar()
    hub_utils.disable_progress_bars()
    datasets_bars = _datasets_bars(enable=False)
    try:
        with quiet_tqdm():
            yield
    finally:
        tf_logging.set_verbosity(saved[0])
        if saved[1]:
            tf_logging.enable_progress_bar()
        if not saved[2]:
            hub_utils.enable_progress_bars()
        if datasets_bars:
            _datasets_bars(enable=True)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def quiet_tqdm():
    """Disable every tqdm bar created during the context by code outside the `ict` package.

    Wraps `tqdm.std.tqdm.__init__`, which every tqdm bar class runs (tqdm.auto, huggingface_hub's
    and datasets' subclasses, transformers' wrapper): a bar whose creator, the first caller outside
    tqdm itself, is not an `ict` module gets `disable=True`. tqdm's own `__init__` is put back on
    exit; a nested context changes nothing.
    """
    from tqdm import std

    original = std.tqdm.__dict__["__init__"]  # a partialmethod (tqdm's TQDM_* env defaults)
    if getattr(original, "_ict_quiet", False):  # nested in another quiet context: already quiet
        yield
        return
    params = list(inspect.signature(getattr(original, "func", original)).parameters)
    disable_at = params.index("disable") - 1  # its position among the arguments after self

    def __init__(self, *args, **kwargs):
        if not _created_by_ict():
            if len(args) > disable_at:
                args = (*args[:disable_at], True, *args[disable_at + 1 :])
            else:
                kwargs["disable"] = True
        original.__get__(self, type(self))(*args, **kwargs)

    __init__._ict_quiet = True
    std.tqdm.__init__ = __init__
    try:
        yield
    finally:
        std.tqdm.__init__ = original


def _created_by_ict() -> bool:
    """Whether the code that made the bar being initialised (the first frame outside tqdm, above
    the `__init__` wrapper) belongs to the `ict` package."""
    frame = sys._getframe(2)  # 0: this function, 1: the __init__ wrapper
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name != "tqdm" and not name.startswith("tqdm."):
            return name == "ict" or name.startswith("ict.")
        frame = frame.f_back
    return False


def _datasets_bars(*, enable: bool) -> bool:
    """Switch datasets' bars if datasets is already imported (else the env variable covers it);
    returns whether they were on before a disable."""
    if "datasets" not in sys.modules:
        return False
    from datasets.utils import logging as ds_logging

    if enable:
        ds_logging.enable_progress_bar()
        return True
    was_on = ds_logging.is_progress_bar_enabled()
    ds_logging.disable_progress_bar()
    return was_on
