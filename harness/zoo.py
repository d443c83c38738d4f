"""Compatibility name: `from harness.zoo import register_model` keeps working for users.
The model registry lives in harness.core.zoo, shared by the goldens and the benchmarks."""

from harness.core.user_models import load_user_models  # noqa: F401
from harness.core.zoo import ModelSpec, get_model, model_names, register_model  # noqa: F401
