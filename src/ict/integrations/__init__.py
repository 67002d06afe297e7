"""Engine integrations: the same selectors and loss inside other RL trainers.

- `ict.integrations.trl`: `ICTGRPOConfig` / `ICTGRPOTrainer`, drop-in for TRL's GRPO (`pip install -e ".[trl]"` in a clone of ict).
- `ict.integrations.verl`: verl plugin (registered loss + model-output hook), in the verl environment.
- `ict.integrations.cases`: fixed cases every engine must turn into the native selection and loss.

Nothing is imported here, so `import ict.integrations` never needs an optional engine.
"""
