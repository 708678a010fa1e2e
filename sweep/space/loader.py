"""Space files: where they are found, how recipes and profiles merge into them, and how every problem in
one is reported at once (file, key path, rule, value, fix) as a :class:`~sweep.errors.SpaceError`.

The models a file must match are in ``sweep/space/model.py``; the rules that span several keys (or need the
shapes a space enumerates) in ``sweep/space/validation.py``. Nothing runs when a space is invalid.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.resources
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from sweep.errors import MISSING, ConfigIssue, SpaceError, UnknownSpaceError
from sweep.space import SPACES_DIR_ENV
from workers.vocabulary import DEFAULT_DATA_SET, did_you_mean

if TYPE_CHECKING:
    from sweep.space.model import Space

# Finding and reading space files (and laying recipes under them) loads neither the space's schema nor the
# data sets' and families' modules (torch, timm): `sweep spaces` only reads YAML. What validates a space
# (sweep.space.model, .validation, workers.data.registry) is imported where a space is validated.

# --- locating and loading ---------------------------------------------------------------------------------


def package_spaces_dir() -> Path:
    """The spaces that ship with the tool: the ``search_spaces`` package's YAML files (package data), found
    through the import system, so a wheel installed anywhere and an editable checkout both have them."""
    try:
        return Path(str(importlib.resources.files("search_spaces")))
    except ModuleNotFoundError:  # an editable install made before search_spaces became a package
        return Path(__file__).resolve().parent.parent / "search_spaces"


def spaces_dirs() -> list[Path]:
    """Folders searched for a space given by name, first match wins.

    A personal folder first, then the shipped spaces: ``$SWEEP_SPACES_DIR`` when it is set (it takes the
    place of the working directory's folder), otherwise a ``search_spaces/`` folder in the working directory.
    A personal space shadows a shipped one of the same name (``sweep spaces`` says so) and may extend any
    shipped space, that one included. In a checkout both are the same folder, listed once.
    """
    override = os.environ.get(SPACES_DIR_ENV)
    personal = Path(override) if override else Path.cwd() / "search_spaces"
    folders: list[Path] = []
    for folder in (personal, package_spaces_dir()):
        if folder.is_dir() and all(folder.resolve() != seen.resolve() for seen in folders):
            folders.append(folder)
    return folders


def space_files() -> dict[str, list[Path]]:
    """Every space file by name, sorted by name: ``{name: [path, …]}`` in :func:`spaces_dirs` order, so the
    first is the one a name finds and the others are the ones it shadows."""
    found: dict[str, list[Path]] = {}
    for folder in spaces_dirs():
        for path in sorted(folder.glob("*.yaml")):
            found.setdefault(path.stem, []).append(path)
    return dict(sorted(found.items()))


def shipped_spaces() -> dict[str, Path]:
    """Every space that can be named: ``{name: path}``, sorted by name, the first folder of
    :func:`spaces_dirs` winning where two hold the same name."""
    return {name: paths[0] for name, paths in space_files().items()}


def find_space(name_or_path: str) -> Path:
    """A space by name (``vit_b_fixed_mlp``) or by path to a YAML file."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise UnknownSpaceError(f"no space file at {path}")
        return path
    shipped = shipped_spaces()
    if name_or_path in shipped:
        return shipped[name_or_path]
    hint = did_you_mean(name_or_path, shipped)
    raise UnknownSpaceError(
        f"unknown space {name_or_path!r}; {hint}shipped spaces: {', '.join(shipped)} "
        f"(list them with `sweep spaces`, or pass a path to a YAML file)"
    )


def read_yaml(path: Path) -> dict:
    try:
        raw = parse_yaml(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        rule, fix = "not UTF-8 text", "save the file as UTF-8"
        issue = ConfigIssue(display_path(path), f"byte {exc.start}", rule, MISSING, fix)
        raise SpaceError([issue]) from exc
    except yaml.YAMLError as exc:
        where, rule, fix = yaml_problem(exc)
        raise SpaceError([ConfigIssue(display_path(path), where, rule, MISSING, fix)]) from exc
    if not isinstance(raw, dict):
        raise SpaceError(
            [ConfigIssue(display_path(path), "", "a space must be a mapping of keys", raw, "see search_spaces/*.yaml")]
        )
    return raw


def parse_yaml(text: str):
    """``yaml.safe_load`` with libyaml's parser where PyYAML has it (7x faster: 25 shipped spaces in 0.03 s, not
    0.2 s); on an error, the pure-Python parser's, whose messages name the character (``'\\t'``)."""
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:
        try:
            return yaml.load(text, Loader=fast)  # CSafeLoader: safe_load's loader, in C
        except yaml.YAMLError:
            pass
    return yaml.safe_load(text)


def yaml_problem(exc: yaml.YAMLError) -> tuple[str, str, str]:
    """PyYAML's multi-line report as (where, rule, fix), one line: ``line 3, column 1``, ``a tab``, ``use
    spaces``. Lines and columns count from 1, as editors do."""
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
    if "'\\t'" in problem:
        return where, "a tab", "use spaces to indent (YAML does not allow tabs)"
    context = getattr(exc, "context", None)
    context_mark = getattr(exc, "context_mark", None)
    opened = f" ({context} opened at line {context_mark.line + 1})" if context and context_mark else ""
    rule = f"not valid YAML: {problem}{opened}"
    if problem == "mapping values are not allowed here":
        return where, rule, "indent a key under its parent, or quote a value that holds ': '"
    return where, rule, "fix the syntax at that place"


def deep_merge(base: dict, override: dict) -> dict:
    """``override`` merged into a copy of ``base``: nested dicts merge, anything else replaces. A ``data``
    block that names another data set keeps only the base's keys that data set takes (``seq_len`` from one
    token data set to another, not ``num_classes`` from class folders to digits)."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if key == "data" and names_another_data_set(merged.get(key), value):
            merged[key] = deep_merge(keys_taken_by(value["name"], merged[key]), value)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def names_another_data_set(base, override) -> bool:
    """Both are data blocks and the override names a data set other than the base's (``digits`` when the
    base names none); an override without a name refines the base's data set."""
    if not (isinstance(base, dict) and isinstance(override, dict)) or "name" not in override:
        return False
    return override["name"] != base.get("name", DEFAULT_DATA_SET)


def keys_taken_by(data_set: str, block: dict) -> dict:
    """The keys of a data block that ``data_set`` takes (all of them for an unknown name, reported later)."""
    from workers.data.registry import BY_NAME

    cls = BY_NAME.get(data_set)
    return {k: v for k, v in block.items() if cls is None or k in cls.model_fields}


RECIPES = "recipes"  # the folder, beside the spaces, of the recipes a space may extend


def with_recipes(raw: dict, path: Path, chain: tuple[Path, ...] = ()) -> dict:
    """The space file's keys laid over the recipes its ``extends`` names.

    ``extends``: a recipe's name, or a list of them applied in order (each over the ones before); a recipe
    is a partial space, ``recipes/<name>.yaml`` beside the file, else under a folder of
    :func:`spaces_dirs`, and may itself extend others. Mappings merge key by key (profiles too: a
    space's ``smoke`` overrides only what it names of the recipe's ``smoke``); any other value replaces.
    """
    if "extends" not in raw:
        return raw
    file, names = display_path(path), raw["extends"]
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        rule, fix = "must be a recipe's or a space's name, or a list of them", "e.g. extends: local_digits"
        raise SpaceError([ConfigIssue(file, "extends", rule, raw["extends"], fix)])
    merged: dict = {}
    for name in names:
        recipe = find_recipe(name, path, file, chain)
        if recipe.resolve() in (p.resolve() for p in (*chain, path)):
            loop = " → ".join(p.stem for p in (*chain, path, recipe))
            raise SpaceError([ConfigIssue(file, "extends", f"recipes extend each other in a loop ({loop})", name, "")])
        merged = deep_merge(merged, with_recipes(read_yaml(recipe), recipe, (*chain, path)))
    return deep_merge(merged, {key: value for key, value in raw.items() if key != "extends"})


def find_recipe(name: str, path: Path, file: str, chain: tuple[Path, ...] = ()) -> Path:
    """A recipe by name (``recipes/NAME.yaml`` beside the file, else under a spaces folder), else a whole
    space a user may start from (a shipped one, or one of ``./search_spaces/``): "local_digits with other axes"
    is ``extends: local_digits`` and the axes."""
    beside = path.parent if path.parent.name == RECIPES else path.parent / RECIPES  # a recipe's siblings
    folders = dict.fromkeys([beside, *(folder / RECIPES for folder in spaces_dirs())])
    for folder in folders:
        if (folder / f"{name}.yaml").is_file():
            return folder / f"{name}.yaml"
    spaces = space_files()
    # a personal space may extend the shipped one it shadows: the first file of that name other than itself
    taken = {p.resolve() for p in (*chain, path)}
    candidates = spaces.get(name, [])
    for candidate in candidates:
        if candidate.resolve() not in taken:
            return candidate
    if candidates:
        return candidates[0]  # every one is in the chain: with_recipes reports the loop
    known = sorted({p.stem for folder in folders if folder.is_dir() for p in folder.glob("*.yaml")})
    fix = did_you_mean(name, [*known, *spaces]) + (
        f"recipes: {', '.join(known) or 'none'} (in {RECIPES}/ beside the spaces), or any space `sweep spaces` lists"
    )
    raise SpaceError([ConfigIssue(file, "extends", "must name a recipe or a space that exists", name, fix)])


def load_space(name_or_path: str, profile: str | None = None) -> tuple[str, Space, str | None]:
    """Load, validate (base and every profile, all problems together) and return
    ``(space_name, space with the chosen profile applied, profile name)``.

    ``profile`` None picks the file's ``default_profile`` (or none).
    """
    name, space, chosen, _ = load_space_with_notes(name_or_path, profile)
    return name, space, chosen


def load_space_with_notes(
    name_or_path: str, profile: str | None = None
) -> tuple[str, Space, str | None, list[ConfigIssue]]:
    """:func:`load_space`, and the notes of a valid space (``ConfigIssue.note``: axis values the rules
    remove). An invalid space raises :class:`SpaceError` with its problems and its notes together."""
    path = find_space(name_or_path)
    raw = with_recipes(read_yaml(path), path)
    file = display_path(path)
    issues, base = validate_variant(raw, file, prefix="")
    profiles = raw.get("profiles") if isinstance(raw.get("profiles"), dict) else {}
    variants: dict[str, Space | None] = {}
    for name, override in profiles.items():
        if isinstance(override, dict):
            merged = deep_merge({k: v for k, v in raw.items() if k != "profiles"}, strip_description(override))
            merged["profiles"] = profiles
            profile_issues, variants[name] = validate_variant(
                merged, file, prefix=f"profiles.{name}.", override=override
            )
            profile_issues = [unjudged_note(issue, name) for issue in profile_issues]
            issues += [issue for issue in profile_issues if issue not in issues]
    if base is not None and base.default_profile is not None and base.default_profile not in profiles:
        issues.append(unknown_profile_issue(file, "default_profile", base.default_profile, profiles))
    chosen = profile if profile is not None else (base.default_profile if base else None)
    if chosen is not None and chosen not in profiles:
        issues.append(unknown_profile_issue(file, "--profile", chosen, profiles))
    if any(not issue.note for issue in issues):
        raise SpaceError(issues)
    return path.stem, (variants[chosen] if chosen else base), chosen, issues


def unjudged_note(issue: ConfigIssue, profile: str) -> ConfigIssue:
    """A profile whose grid leaves out a side of a claim (``expect:``) does not judge that claim: a note
    saying so, not a problem (the space's own grid must still hold it: that one stays an issue)."""
    from sweep.questions.expectations import NOT_IN_GRID

    if issue.rule != NOT_IN_GRID or issue.path.startswith("profiles."):
        return issue
    rule = f"not judged under profile {profile!r}: this side picks out none of the profile's configurations"
    fix = "nothing to fix: the claim is judged under the profiles that hold it"
    return dataclasses.replace(issue, rule=rule, fix=fix, note=True)


def strip_description(override: dict) -> dict:
    return {k: v for k, v in override.items() if k != "description"}


def unknown_profile_issue(file: str, where: str, name: str, profiles: dict) -> ConfigIssue:
    known = ", ".join(profiles) or "none defined"
    fix = did_you_mean(name, profiles, n=2) + f"profiles in this space: {known}"
    return ConfigIssue(file, where, "must name a profile defined under `profiles`", name, fix)


def validate_variant(
    raw: dict, file: str, prefix: str, override: dict | None = None
) -> tuple[list[ConfigIssue], Space | None]:
    """Validate one merged variant: pydantic's structural rules, then the cross-field rules."""
    from sweep.space.model import Space
    from sweep.space.validation import space_issues

    try:
        space = Space.model_validate(raw)
    except ValidationError as exc:
        issues = [pydantic_issue(error, file, prefix, override) for error in exc.errors()]
        return issues + rules_without(raw, exc, file, prefix, override), None
    return [
        dataclasses.replace(issue, path=profile_path(issue.path, prefix, override))
        for issue in space_issues(space, file)
    ], space


# The keys the cross-field rules read to judge the others: with one of them rejected, they are not run.
def rules_read() -> frozenset[str]:
    from sweep.questions import sections

    return frozenset({"model", "axes", "baseline", "data", "head_dim_rule", *sections()})


def rules_without(raw: dict, exc: ValidationError, file: str, prefix: str, override: dict | None) -> list[ConfigIssue]:
    """The cross-field problems of the rest of a file whose structure failed: its keys that pydantic rejected
    left out (each is reported already), so one run reports a wrong metric mode beside a misspelt key.
    Nothing when the rest cannot stand alone (a required key was among the rejected)."""
    from sweep.space.model import Space
    from sweep.space.validation import space_issues

    rejected = {error["loc"][0] for error in exc.errors() if error["loc"]}
    if rejected & rules_read():
        return []  # the rules would judge the rest against defaults, not against what the file meant
    try:
        rest = Space.model_validate({k: v for k, v in raw.items() if k not in rejected})
        found = space_issues(rest, file)
    except Exception:  # what remains does not validate alone: its own report is enough
        return []
    return [
        dataclasses.replace(issue, path=profile_path(issue.path, prefix, override))
        for issue in found
        if issue.path.split(".")[0].split("[")[0] not in rejected
    ]


def profile_path(path: str, prefix: str, override: dict | None) -> str:
    """Attribute an issue to the profile when the offending key came from the profile's overrides."""
    if override is None:
        return path
    node: Any = override
    for part in path.replace("[", ".").replace("]", "").split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):  # controls[0], published[1]
            node = node[int(part)]
        else:
            return path
    return prefix + path


# Keys a space file may still have from an older version: the rule and the fix it gets instead of "unknown".
MOVED_KEYS = {
    "analysis": (
        "`analysis` was replaced by `metric`, the headline metric with its direction and tolerance",
        "analysis.tolerance_top1 moved to metric.tolerance: write `metric: {name: top1, mode: max, "
        "tolerance: X}` with the old value as X, and remove `analysis`",
    ),
}


def pydantic_issue(error: dict, file: str, prefix: str, override: dict | None) -> ConfigIssue:
    """Turn one pydantic error into file, key path, rule, value and fix."""
    from workers.data.registry import DATA_SET_NAMES

    path = format_loc(error["loc"])
    value = error.get("input", MISSING) if error["type"] != "missing" else MISSING
    rule, fix = error["msg"].removeprefix("Value error, "), fix_hint(error)
    if error["type"] == "extra_forbidden" and error["loc"][-1] in MOVED_KEYS:
        rule, fix = MOVED_KEYS[error["loc"][-1]]
    elif error["type"] == "unknown_data_set":
        name = value.get("name") if isinstance(value, dict) else value
        path, value, rule = f"{path}.name", name, "must name a registered data set (workers/data/registry.py)"
        fix = did_you_mean(str(name), DATA_SET_NAMES, n=2) + f"known: {', '.join(DATA_SET_NAMES)}"
    elif error["type"] == "extra_forbidden" and is_data_set_key(error["loc"]):
        rule, fix = misplaced_data_key(*error["loc"][1:]) or (rule, fix)
    return ConfigIssue(file, profile_path(path, prefix, override), rule, value, fix)


def is_data_set_key(loc: tuple) -> bool:
    """``("data", <data set>, key)``: a key directly under ``data:`` (pydantic puts the data set's name,
    the union's tag, between them)."""
    from workers.data.registry import BY_NAME

    return len(loc) == 3 and loc[0] == "data" and loc[1] in BY_NAME


def misplaced_data_key(data_set: str, key: str) -> tuple[str, str] | None:
    """(rule, fix) for a key that belongs to other data sets than ``data_set``; None for an unknown key."""
    from workers.data.registry import fields_taken_by

    takers = fields_taken_by(key)
    if not takers:
        return None
    return (
        f"{key} is not a field of data set {data_set!r}; it is for {', '.join(takers)}",
        f"remove `{key}`, or set data.name to a data set that takes it",
    )


def format_loc(loc: tuple) -> str:
    from workers.data.registry import BY_NAME

    parts: list[str] = []
    for index, item in enumerate(loc):
        if index == 1 and loc[0] == "data" and item in BY_NAME:
            continue  # the data set's name: the union's tag, not a key in the file
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in (
            "list[constrained-int]",
            "Range",
            "list[int]",
            "grid",
            "optuna",
            "function-after[_ordered(), Range]",
        ):
            continue  # union-branch labels pydantic adds; they are not keys in the file
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


def fix_hint(error: dict) -> str:
    kind, ctx, loc = error["type"], error.get("ctx", {}), error["loc"]
    if kind == "extra_forbidden":
        return f"remove `{loc[-1]}` or correct its spelling{close_key_hint(loc)}"
    if kind == "missing":
        return f"add `{loc[-1]}`"
    if kind in ("greater_than_equal", "greater_than", "less_than", "less_than_equal"):
        return "use a value within the stated bound"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "write a whole number"
    if kind in ("float_type", "float_parsing"):
        return "write a number"
    if kind in ("bool_type", "bool_parsing"):
        return "write true or false"
    if kind in ("literal_error", "union_tag_invalid"):
        return f"use one of {ctx.get('expected', ctx.get('expected_tags', ''))}"
    if kind == "too_short":
        return "give at least one value"
    if kind in ("list_type", "dict_type", "model_type", "model_attributes_type"):
        return 'see docs/spaces.md, section "Writing a space", for the expected shape'
    return ""


def close_key_hint(loc: tuple) -> str:
    hint = did_you_mean(loc[-1], allowed_keys(loc[:-1]), n=2, cutoff=0.6)
    return f" ({hint.strip()})" if hint else ""


def allowed_keys(parent: tuple) -> list[str]:
    from sweep.space.model import SEARCH_MODELS, SECTION_MODELS, Space
    from workers.data.registry import BY_NAME

    if not parent:
        return list(Space.model_fields)
    if parent[0] == "search" and len(parent) > 1 and str(parent[1]) in SEARCH_MODELS:
        model = SEARCH_MODELS[str(parent[1])]
    elif parent[0] == "data":
        model = BY_NAME.get(str(parent[1])) if len(parent) > 1 else None
    else:
        model = SECTION_MODELS.get(str(parent[0]))
    return list(model.model_fields) if model else []


def display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
