"""Scoring responses safely: a reward function that raises or hangs scores 0 and is counted.

A training run must never die because one verifier call failed. Each call runs under a wall-clock
limit (SIGALRM in the main thread; elsewhere a worker thread that is abandoned on timeout).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ict.rewards.results import unpack_reward

logger = logging.getLogger("ict.train")


class _Timeout(Exception):
    pass


def call_with_timeout(fn: Callable, args: tuple, timeout_s: float):
    """fn(*args), raising TimeoutError after `timeout_s` seconds (best effort off the main thread)."""
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):

        def _alarm(signum, frame):
            raise _Timeout()

        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            return fn(*args)
        except _Timeout:
            raise TimeoutError(f"reward function exceeded {timeout_s:g} s") from None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    result: dict = {}

    def _run():
        try:
            result["value"] = fn(*args)
        except BaseException as err:  # noqa: BLE001 - reported to the caller
            result["error"] = err

    worker = threading.Thread(target=_run, daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise TimeoutError(f"reward function exceeded {timeout_s:g} s")
    if "error" in result:
        raise result["error"]
    return result["value"]


@dataclass
class Scored:
    """Rewards of a batch of responses. reward/formatted are per response; errors/timeouts counts."""

    rewards: list[float]
    formatted: list[bool | None]
    errors: int
    timeouts: int


def reward_responses(
    reward_fns: list[Callable[[str], object]],
    responses: list[str],
    *,
    timeout_s: float,
    guarded: list[bool] | None = None,
) -> Scored:
    """Score response i with reward_fns[i]; errors and timeouts give reward 0 and are counted.

    guarded[i] True: reward_fns[i] enforces its own time limit (ict.rewards' sandbox), so it is called
    directly (its Verdict's `timed_out` / `error` still count).
    """
    rewards, formatted, errors, timeouts = [], [], 0, 0
    guarded = guarded or [False] * len(reward_fns)
    for reward_fn, response, own_limit in zip(reward_fns, responses, guarded, strict=True):
        try:
            value = (
                reward_fn(response)
                if own_limit
                else call_with_timeout(reward_fn, (response,), timeout_s)
            )
            reward, fmt = unpack_reward(value)
            if reward != reward:  # NaN
                raise ValueError("reward is NaN")
        except TimeoutError as err:
            timeouts += 1
            errors += 1
            reward, fmt = 0.0, None
            if timeouts == 1:
                logger.warning("reward function timed out (scored 0): %s", err)
        except Exception as err:  # noqa: BLE001 - a bad verifier must not kill the run
            errors += 1
            reward, fmt = 0.0, None
            if errors - timeouts == 1:
                logger.warning(
                    "reward function raised %s: %s (scored 0; counted in reward/errors)",
                    type(err).__name__,
                    err,
                )
        rewards.append(reward)
        formatted.append(fmt)
    return Scored(rewards, formatted, errors, timeouts)
