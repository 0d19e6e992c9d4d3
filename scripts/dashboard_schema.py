"""Check dashboard JSON against the schema of grafana-foundation-sdk (Grafana's typed models).

The SDK (PyPI grafana-foundation-sdk, cog-generated from Grafana's schemas) has no validator:
`Dashboard.from_json` decodes without complaining about unknown keys or bad enum values. So
the check is built from what it does have:

1. decode the JSON into the SDK's typed models, with the default plugins registered so that
   panel options, fieldConfig.custom and Prometheus queries decode to their panel/datasource
   models too (otherwise they stay untyped dicts);
2. walk the decoded models: every field whose class annotation is an enum must hold one of the
   enum's values, every str/int/float/bool field a value of that type;
3. encode the models back to JSON and compare with the input: a key the schema does not know is
   dropped by the decoder, and that is reported. Keys the encoder adds (defaults) are allowed.

`selftest()` feeds a dashboard a key the schema lacks and an invalid enum value and fails when
either goes unnoticed, so the check is known to be able to fail.

usage: python dashboard_schema.py FILE.json...   (exit 1 on any error)
"""
from __future__ import annotations

import copy
import enum
import json
import sys
import types
import typing

from grafana_foundation_sdk.cog import plugins
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import Dashboard

plugins.register_default_plugins()

PRIMITIVES = (str, int, float, bool)


def _allowed(hint) -> list:
    """Flatten Optional/Union/Literal type hints into a list of accepted types or literals."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return [t for a in typing.get_args(hint) for t in _allowed(a)]
    if origin is typing.Literal:
        return [("literal", v) for v in typing.get_args(hint)]
    return [hint]


def _check_value(value, hint, path: str, errors: list[str]) -> None:
    allowed = _allowed(hint)
    if value is None or typing.Any in allowed:
        return
    enums = [t for t in allowed if isinstance(t, type) and issubclass(t, enum.Enum)]
    prims = [t for t in allowed if t in PRIMITIVES]
    literals = [v for t in allowed if isinstance(t, tuple) for v in t[1:]]
    # Only judge fields whose type is entirely enums/primitives/literals: model-typed and
    # container fields are walked (or left to the round trip).
    if len(enums) + len(prims) + (1 if literals else 0) != len([a for a in allowed if a is not type(None)]):
        return
    if isinstance(value, enum.Enum) and any(isinstance(value, e) for e in enums):
        return
    raw = value.value if isinstance(value, enum.Enum) else value
    if any(raw in [m.value for m in e] for e in enums):
        return
    if literals and raw in literals:
        return
    if prims and (isinstance(raw, tuple(prims)) or (float in prims and isinstance(raw, int))):
        if not (isinstance(raw, bool) and bool not in prims):
            return
    want = [e.__name__ + str([m.value for m in e]) for e in enums] + [p.__name__ for p in prims]
    want += [repr(v) for v in literals]
    errors.append(f"{path}: {raw!r} is not one of {', '.join(want)}")


def _walk(obj, path: str, errors: list[str], seen: set[int]) -> None:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            _walk(item, f"{path}[{i}]", errors, seen)
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            _walk(v, f"{path}/{k}", errors, seen)
        return
    if not hasattr(obj, "to_json"):
        return
    try:
        hints = typing.get_type_hints(type(obj))
    except Exception:  # a forward reference the SDK cannot resolve: walk without types
        hints = {}
    for name, value in vars(obj).items():
        if name in hints:
            _check_value(value, hints[name], f"{path}/{name}", errors)
        _walk(value, f"{path}/{name}", errors, seen)


def _diff(src, back, path: str, errors: list[str]) -> None:
    if isinstance(src, dict) and isinstance(back, dict):
        for k, v in src.items():
            if k not in back:
                errors.append(f"{path}/{k}: key unknown to the schema (dropped when decoded)")
            else:
                _diff(v, back[k], f"{path}/{k}", errors)
    elif isinstance(src, list) and isinstance(back, list) and len(src) == len(back):
        for i, (a, b) in enumerate(zip(src, back)):
            _diff(a, b, f"{path}[{i}]", errors)
    elif src != back and not (isinstance(src, (int, float)) and isinstance(back, (int, float))
                              and not isinstance(src, bool) and float(src) == float(back)):
        errors.append(f"{path}: {src!r} decodes and re-encodes as {back!r}")


def check(data: dict) -> list[str]:
    """Schema errors of one dashboard's JSON (empty when it conforms)."""
    errors: list[str] = []
    try:
        model = Dashboard.from_json(data)
    except Exception as ex:  # a wrong type deep inside fails the typed decoder
        return [f"does not decode into the SDK's Dashboard model: {type(ex).__name__}: {ex}"]
    _walk(model, "", errors, set())
    back = json.loads(json.dumps(model, cls=JSONEncoder))
    _diff(data, back, "", errors)
    return errors


def selftest(sample: dict) -> None:
    """The check must catch an unknown key and an invalid enum value in a real dashboard."""
    bad_key = copy.deepcopy(sample)
    first = next(p for p in bad_key["panels"] if p.get("type") != "row")
    first["notAGrafanaKey"] = 1
    bad_enum = copy.deepcopy(sample)
    stat = next(p for p in bad_enum["panels"] if p.get("type") == "stat")
    stat["options"]["colorMode"] = "rainbow"
    for what, mutated in (("an unknown key", bad_key), ("an invalid enum value", bad_enum)):
        if not check(mutated):
            raise SystemExit(f"error: schema self-test: {what} went unnoticed")


def main(paths: list[str]) -> int:
    failed = 0
    for i, path in enumerate(paths):
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        if i == 0:
            selftest(data)
        errors = check(data)
        for e in errors:
            print(f"error: {path}: schema: {e}", file=sys.stderr)
        failed += bool(errors)
    if failed:
        return 1
    print(f"dashboards match the grafana-foundation-sdk schema: {len(paths)} files "
          "(typed decode, enum and scalar types, no unknown keys; self-test caught both faults)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
