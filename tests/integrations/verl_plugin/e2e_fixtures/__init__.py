"""Test fixtures that let verl 0.9.1's own `main_ppo` driver run on a CPU (tests only).

Loaded into every verl process by verl's external-module hook,
`VERL_USE_EXTERNAL_MODULES=e2e_fixtures.cpu_platform,e2e_fixtures.hf_rollout,ict.integrations.verl`
(this package's parent directory on PYTHONPATH; launch.py sets both): a CPU platform and the FSDP
engine for it (cpu_platform), and an HF-sampler rollout backend `hf` (hf_rollout), each through
verl's own registries. Nothing here is product code; docs/engines/verl.md says what the
end-to-end test that runs on them proves.

Import cpu_platform and hf_rollout only through that hook: imported first, before verl, they would
load verl, whose hook would load ict before the platform exists. launch.py, reward.py and
hf_server.py (the sampler actor's module) import no verl.
"""
