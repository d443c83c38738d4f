"""Models of your own, loaded one way for pytest and the `harness` command alike.

A module that calls `register_model` when imported is named in any of:
- the ini option `harness_models` (`[tool.pytest.ini_options]` in pyproject.toml, pytest.ini,
  tox.ini `[pytest]`, setup.cfg `[tool:pytest]`): one importable module or .py path per entry,
  paths relative to the ini file;
- `HARNESS_MODELS`: comma-separated importable modules or .py paths (relative to the current
  directory);
- the entry-point group `harness.models` of an installed package: a module, or `module:function`
  (the function is called).

The pytest plugin calls `load_user_models` at configure time, before the graph suite is
collected, so `pytest suites -k tiny_cnn` selects a user's model; every `harness` command that
looks a model up (models, graph, graph-diff, check, bench, report, advise, calibrate) calls it
first. A module that fails to load is bad input (BadInput, exit 3; a UsageError in
pytest) naming the module, where it was named, and what to do.
"""

from __future__ import annotations

import configparser
import dataclasses
import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path

from harness.core import settings
from harness.core.exits import BadInput

INI_OPTION = "harness_models"
ENV_VAR = settings.MODELS.name
ENTRY_POINT_GROUP = "harness.models"

# resolved .py paths and module names already loaded: loading is idempotent per process
_LOADED: set[str] = set()
LOADED_FILES: set[str] = set()


@dataclasses.dataclass(frozen=True)
class Source:
    spec: str  # module name or .py path, as written
    # where it was named, for messages: "HARNESS_MODELS", "harness_models in pyproject.toml"
    origin: str
    base: Path  # relative paths are resolved against this folder


def find_ini(start: Path | None = None) -> tuple[Path | None, list[str]]:
    """The pytest ini file governing `start` (searched upward as pytest does) and its
    `harness_models` entries. Used by the `harness` command; pytest itself reads the option."""
    start = Path(start or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        for name in ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"):
            path = folder / name
            if path.is_file():
                found, values = _read_ini(path)
                if found:
                    return path, values
    return None, []


def is_pytest_config(path: Path) -> bool:
    """Whether pytest would take `path` (pytest.ini, pyproject.toml, tox.ini, setup.cfg) as its
    configuration file."""
    return _read_ini(Path(path))[0]


def _read_ini(path: Path) -> tuple[bool, list[str]]:
    """(is this a pytest config file, its harness_models entries)."""
    if path.suffix == ".toml":
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10: pytest's own dependency
            import tomli as tomllib

        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise BadInput(
                f"cannot read {path}: {exc}; fix the file so {INI_OPTION} can be read"
            ) from None
        section = data.get("tool", {}).get("pytest", {})
        section = section.get("ini_options", section) if isinstance(section, dict) else {}
        if not section and "pytest" not in data.get("tool", {}):
            return False, []
        value = section.get(INI_OPTION, [])
        return True, _entries(value)
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as exc:
        raise BadInput(
            f"cannot read {path}: {exc}; fix the file so {INI_OPTION} can be read"
        ) from None
    section = {"setup.cfg": "tool:pytest", "tox.ini": "pytest"}.get(path.name, "pytest")
    if not parser.has_section(section):
        return path.name in ("pytest.ini", ".pytest.ini"), []
    return True, _entries(parser.get(section, INI_OPTION, fallback=""))


def _entries(value) -> list[str]:
    items = value if isinstance(value, list) else str(value).replace(",", "\n").splitlines()
    return [str(item).strip() for item in items if str(item).strip()]


def sources(
    ini_values: list[str] | None = None,
    ini_dir: Path | None = None,
    ini_name: str = "the pytest ini file",
) -> list[Source]:
    """Everything named by the ini option and HARNESS_MODELS, in that order."""
    found = [
        Source(v, f"{INI_OPTION} in {ini_name}", Path(ini_dir or Path.cwd()))
        for v in ini_values or []
    ]
    found += [Source(v, ENV_VAR, Path.cwd()) for v in settings.MODELS.get()]
    return found


def entry_points() -> list:
    from importlib.metadata import entry_points as eps

    return list(eps(group=ENTRY_POINT_GROUP))


def configured(ini_values: list[str] | None = None) -> bool:
    """Whether any source names a module (cheap: imports nothing)."""
    return bool(ini_values or settings.MODELS.get() or entry_points())


def load_user_models(
    ini_values: list[str] | None = None,
    ini_dir: Path | None = None,
    ini_name: str | None = None,
    *,
    start: Path | None = None,
) -> list[str]:
    """Import every module named by the three sources; returns what was loaded.

    Without `ini_values` (the `harness` command) the ini file is found from `start` (default: the
    project named by --project / HARNESS_PROJECT, else the current directory) as pytest would
    find it.
    """
    if ini_values is None:
        path, ini_values = find_ini(start or settings.PROJECT.get())
        ini_dir, ini_name = (path.parent, path.name) if path else (None, None)
    import harness.core.zoo  # noqa: F401  (the registry exists before any user module runs)

    loaded = []
    for source in sources(ini_values, ini_dir, ini_name or "the pytest ini file"):
        loaded.append(_load(source))
    for ep in entry_points():
        key = f"entry point {ep.name} = {ep.value}"
        if key in _LOADED:
            continue
        try:
            target = ep.load()
            if callable(target):
                target()
        except Exception as exc:
            dist = getattr(getattr(ep, "dist", None), "name", "an installed package")
            raise BadInput(
                f"cannot load models from entry point {ep.name!r} = {ep.value!r} (group "
                f"{ENTRY_POINT_GROUP!r}, package {dist}): {type(exc).__name__}: {exc}. "
                f"Fix or reinstall that package, or uninstall it."
            ) from exc
        _LOADED.add(key)
        loaded.append(key)
    return loaded


def suite_models() -> list[str]:
    """The models the packaged suites cover (the graph suite's cases, the models benchmarks):
    every registered model; with HARNESS_OWN_MODELS (a project of its own) only the models its
    modules register, loaded here from its ini (found from HARNESS_PROJECT, else the working
    directory), HARNESS_MODELS and entry points. The built-in zoo's goldens and figures belong
    to the harness's checkout, so a project of its own never runs them."""
    from harness.core import zoo

    if not settings.OWN_MODELS.get():
        return zoo.model_names()
    load_user_models(start=settings.PROJECT.get())
    return [n for n in zoo.model_names() if zoo.get_model(n).origin != zoo.BUILTIN_ORIGIN]


def _file_module_name(path: Path) -> str:
    # A stable module name per file, so the same file is one module in every process.
    return f"harness_user_models.{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"


def load_module(spec: str, origin: str):
    """Import one module named as HARNESS_MODELS names them (a dotted name, or a .py path
    relative to the current directory) and return it; BadInput naming `origin` if it fails.
    `harness check --dataset MODULE:FACTORY` loads a user's dataset module this way."""
    key = _load(Source(spec, origin, Path.cwd()))
    return sys.modules[key] if key in sys.modules else sys.modules[_file_module_name(Path(key))]


def _load(source: Source) -> str:
    spec = source.spec
    fix = f"Fix the module, or remove {spec!r} from {source.origin}."
    if spec.endswith(".py") or "/" in spec or os.sep in spec:
        path = (source.base / spec).resolve()
        if str(path) in _LOADED:
            return str(path)
        if not path.is_file():
            raise BadInput(
                f"cannot load models from {spec!r} (named by {source.origin}): no such file "
                f"{path}. Give a .py path relative to {source.base}, or an importable module name."
            )
        name = _file_module_name(path)
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[name]
            raise BadInput(
                f"cannot load models from {spec!r} (named by {source.origin}): "
                f"{type(exc).__name__}: {exc}. {fix}"
            ) from exc
        _LOADED.add(str(path))
        LOADED_FILES.add(str(path))
        return str(path)
    if spec in _LOADED:
        return spec
    try:
        module = importlib.import_module(spec)
    except Exception as exc:
        hint = (
            " Is it installed, or is its folder on sys.path? A file can be named by its .py path."
            if isinstance(exc, ModuleNotFoundError) and exc.name and spec.startswith(exc.name)
            else ""
        )
        raise BadInput(
            f"cannot load models from module {spec!r} (named by {source.origin}): "
            f"{type(exc).__name__}: {exc}.{hint} {fix}"
        ) from exc
    _LOADED.add(spec)
    if getattr(module, "__file__", None):
        LOADED_FILES.add(str(Path(module.__file__).resolve()))
    return spec
