"""ict's token statistics inside TRL: from the policy's final hidden states and its LM head
(ict.stats.token_stats_from_hidden, chunked: the [tokens x V] logits are never built), with the
trainer's temperature, the method's reference and divergence; and the layout check a group
reference needs (`check_whole_groups`)."""

from __future__ import annotations

import torch
from accelerate.utils import is_peft_model
from trl.trainer.utils import maybe_gather_lm_head_ctx

from ict.errors import ConfigError
from ict.head import LogitHead, logit_head
from ict.stats import GROUP_REFERENCES, TokenStats, token_stats_from_hidden

# the statistics that travel with TRL's batch as `ict_<name>` columns (kl too, when computed)
STAT_COLUMNS = ("entropy", "renyi2", "logprob", "js")


def check_whole_groups(
    n_local: int, group_size: int, num_processes: int, mode: str, reference: str = "group_position"
) -> None:
    """A group reference (`ict.stats.GROUP_REFERENCES`) under several processes: TRL's
    RepeatSampler puts a prompt's G completions on consecutive rows of the global generation batch
    and gives process r the rows [r * n_local, (r + 1) * n_local), so a process holds whole groups
    iff n_local % G == 0. Raise ConfigError naming the TRL settings otherwise (the reference needs
    every completion of a prompt; TRL only checks that the global batch is a multiple of G)."""
    if reference not in GROUP_REFERENCES or num_processes <= 1 or n_local % group_size == 0:
        return
    if mode == "train":
        setting = (
            f"per_device_train_batch_size * steps_per_generation = {n_local} rows per process is "
            f"not a multiple of num_generations = {group_size}"
        )
        fix = (
            "make per_device_train_batch_size * steps_per_generation a multiple of num_generations"
        )
    else:
        setting = (
            f"the per-process eval batch of {n_local} rows is not a multiple of "
            f"num_generations_eval = {group_size}"
        )
        fix = "make per_device_eval_batch_size a multiple of num_generations_eval"
    what = " (the paper's ICT score)" if reference == "group_position" else ""
    raise ConfigError(
        f'reference="{reference}"{what} needs each prompt\'s completions on '
        f"one process, but with {num_processes} processes {setting}, so TRL splits a prompt's group "
        f"across processes: {fix}, or choose another reference (e.g. reference='batch_mean')."
    )


class StatsSteps:
    """The trainer side (mixed into ICTGRPOTrainer, which provides `ict_plan`, `model`,
    `ref_model`, `accelerator`, `args`): the old policy's statistics of a local batch."""

    @torch.no_grad()
    def _ict_hidden(self, model, input_ids, attention_mask, first, last):
        """Final hidden states at positions [first, last) of every row: [B, last-first, D], model dtype."""
        base = model.get_base_model() if is_peft_model(model) else model
        rows = (
            self.args.per_device_train_batch_size
        )  # the rows TRL itself runs through the model at once
        parts = []
        for start in range(0, input_ids.size(0), max(rows, 1)):
            with self.accelerator.autocast():
                out = base.base_model(
                    input_ids=input_ids[start : start + rows],
                    attention_mask=attention_mask[start : start + rows],
                    use_cache=False,
                )
            parts.append(out.last_hidden_state[:, first:last])
        return torch.cat(parts, dim=0)

    @staticmethod
    def _lm_head(model) -> LogitHead:
        """The logits `model` samples from (ict.head: its transform), on full tensors."""
        base = model.get_base_model() if is_peft_model(model) else model
        head = logit_head(base)
        weight, bias = head.weight, head.bias
        if hasattr(weight, "full_tensor"):  # FSDP2 DTensor
            weight = weight.full_tensor()
            bias = bias.full_tensor() if bias is not None else None
        return LogitHead(weight, bias, head.scale, head.softcap)

    @torch.no_grad()
    def ict_token_stats(
        self, prompt_ids, prompt_mask, completion_ids, completion_mask, valid, group_ids,
        hidden=None,
    ):  # fmt: skip
        """Token statistics of the current (old) policy on a local batch.

        prompt_ids/prompt_mask: [B, P] (left-padded); completion_ids/completion_mask: [B, C];
        valid: [B, C] bool (loss mask); group_ids: [B] long (global prompt index).
        hidden: the policy's final hidden states on prompt + completion, [B, P + C, D], when a
        forward already computed them (the loss forward, ict.integrations.trl.single_forward);
        None: a no-grad forward of the policy here.
        Returns TokenStats with [B, C] float32 fields (kl too when the method scores by KL), 0
        where `valid` is False. The reference and divergence are the method's. One leading column
        (the distribution predicting the last prompt token) is passed to ict.stats and dropped, so
        `reference="previous_token"` has a p_{t-1} for the first response token.
        """
        lead = 1 if prompt_ids.size(1) >= 2 else 0
        P, C = prompt_ids.size(1), completion_ids.size(1)
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        first, last = P - 1 - lead, P + C - 1
        tokens = input_ids[:, first + 1 : last + 1]
        mask = torch.cat([valid.new_zeros(valid.size(0), lead), valid.bool()], dim=1)

        if hidden is None:
            hidden = self._ict_hidden(self.model, input_ids, attention_mask, first, last)
        else:
            hidden = hidden[:, first:last]
        ref_kwargs = {}
        if self.ict_plan.method.reference == "reference_policy":
            ref_kwargs = dict(
                reference_hidden=self._ict_hidden(
                    self.ref_model, input_ids, attention_mask, first, last
                ),
                reference_head=self._lm_head(self.ref_model),
            )
        stats = self.ict_stats_from_hidden(
            hidden, self._lm_head(self.model), tokens, mask, group_ids, **ref_kwargs
        )
        fields = {f: getattr(stats, f)[:, lead:] for f in STAT_COLUMNS}
        return TokenStats(**fields, kl=None if stats.kl is None else stats.kl[:, lead:])

    def ict_stats_from_hidden(self, hidden, head, tokens, mask, group_ids, **ref_kwargs):
        """`token_stats_from_hidden` with this trainer's temperature, reference and chunk size.

        hidden: [B, T, D]; head: the model's ict.head.LogitHead (weight [V, D]); tokens: [B, T];
        mask: [B, T] bool; group_ids: [B]; ref_kwargs: reference_hidden, reference_head.
        Returns TokenStats, [B, T] float32 fields.
        """
        method = self.ict_plan.method
        if self.args.stats_chunk_size is not None:
            ref_kwargs["chunk_size"] = self.args.stats_chunk_size
        if "kl" in method.needs():
            ref_kwargs["divergence"] = "kl"
        ref = ref_kwargs.get("reference_head")
        gather = (head.weight, head.bias, *((ref.weight, ref.bias) if ref is not None else ()))
        with maybe_gather_lm_head_ctx(*gather):  # ZeRO-3: the head's shards, for the duration
            return token_stats_from_hidden(
                hidden, head, tokens, mask, temperature=self._ict_temperature,
                reference=method.reference, group_ids=group_ids, **ref_kwargs,
            )  # fmt: skip
