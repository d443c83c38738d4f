"""Compatibility name (DECISIONS §7): `from harness.zoo import register_model` keeps working.
The model registry lives in harness.core.zoo, shared by the goldens and the benchmarks."""

from harness.core.zoo import ModelSpec, get_model, load_user_models, model_names, register_model  # noqa: F401
