"""Declaring node parameters with types, defaults and descriptions, in one idiom.

The parameters of a node are the fields of its core config dataclasses, in the spirit of
PickNikRobotics/generate_parameter_library: the dataclass is the schema (name, type from
the default, default, description, validation range), so a parameter's text lives next to
the field it sets, not in a node-local dict. :func:`declare_config` is the entry point;
:func:`declare` covers the few parameters that belong to the node alone (topics, frames).

Field metadata read (all optional)::

    x: float = field(default=0.05, metadata={
        "description": "What x sets, with its unit (m)",   # ParameterDescriptor.description
        "range": (0.0, 1.0),           # or (lo, hi, step): FloatingPointRange for a float,
                                       # IntegerRange for an int (rclpy then refuses values
                                       # outside it, at declaration and at run time)
        "read_only": True,             # ParameterDescriptor.read_only
        "param": False,                # not a parameter (set by the node, or not scalar)
        "name": "weights.x",           # its parameter name where a params file groups it
    })
    table: Dict[str, Any] = field(metadata={
        "keys": {"backend": "...", "open_clip.device": "..."},   # a map's known keys
        "template": "s of '{0}' and '{1}'",  # an open map's keys (<name>.<a>.<b>)
    })

``name``, ``keys`` and ``template`` serve configs that are read from a params file's layout
rather than declared from their defaults: :func:`description_of` finds the text of such a
parameter by its dotted name.

Fields whose default is not a bool, int, float, str or a list/tuple of them (nested
configs, maps) are not declared by :func:`declare_fields`: ROS parameters have no such
types; declare them through a nested prefix (``declare_config(node, "vlm_sim.latency",
VlmLatencyModel)``), for maps one parameter per key (:func:`declare_map`), or the whole
tree at once with ``declare_config(..., nested=True)`` (:func:`declare_tree`): nested
dataclass fields under ``<field>.<sub>``, dict fields one leaf per key.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Tuple, Type, TypeVar

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.node import Node

C = TypeVar("C")

_SCALARS = (bool, int, float, str, list)
#: Name suffix -> unit, for fallback descriptions (``{unit}``: " (m)" or "").
UNITS = {"_m": "m", "_n": "N", "_s": "s", "_rad": "rad", "_mps": "m/s"}


def unit_of(name: str) -> str:
    """`` (unit)`` of a parameter named with a unit suffix (UNITS), else ""."""
    return next((f" ({unit})" for suffix, unit in UNITS.items() if name.endswith(suffix)), "")


def descriptor(description: str, value_range: Optional[tuple] = None, default: Any = None,
               read_only: bool = False) -> ParameterDescriptor:
    """A ParameterDescriptor; ``value_range`` (lo, hi[, step]) typed after ``default``."""
    desc = ParameterDescriptor(description=description, read_only=read_only)
    if value_range is not None:
        lo, hi, *step = value_range
        if isinstance(default, bool) or not isinstance(default, (int, float)):
            raise ValueError(f"a range needs an int or float default, got {default!r}")
        if isinstance(default, int):
            desc.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi),
                                               step=int(step[0]) if step else 1)]
        else:
            desc.floating_point_range = [FloatingPointRange(
                from_value=float(lo), to_value=float(hi),
                step=float(step[0]) if step else 0.0)]
    return desc


def declare(node: Node, name: str, default: Any, description: str,
            value_range: Optional[tuple] = None, read_only: bool = False) -> Any:
    """Declare one parameter and return its value (from the params file or the default)."""
    if isinstance(default, (list, tuple)) and not default:
        raise ValueError(f"parameter {name}: give a non-empty default so its type is known")
    desc = descriptor(description, value_range, default, read_only)
    value = node.declare_parameter(name, default, desc).value
    return list(value) if isinstance(value, (list, tuple)) else value


def field_default(f: dataclasses.Field) -> Any:
    """A field's default (the factory called), MISSING when it has none."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING


def parameter_fields(cls: Type, exclude: Iterable[str] = ()) -> Dict[str, Any]:
    """Field name -> parameter default (tuples as lists) of the fields that are parameters."""
    skip = set(exclude)
    out: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        default = field_default(f)
        if f.name in skip or not f.metadata.get("param", True) \
                or default is dataclasses.MISSING:
            continue
        if isinstance(default, tuple):
            default = list(default)
        if isinstance(default, _SCALARS):
            out[f.name] = default
    return out


def declare_fields(node: Node, prefix: str, cls: Type, *, exclude: Iterable[str] = (),
                   fallback: str = "{cls}.{name}") -> Dict[str, Any]:
    """Declare the parameter fields of ``cls`` as ``<prefix>.<field>``; their values.

    ``prefix`` "" declares the bare field names. A field without a ``description`` in its
    metadata gets ``fallback`` formatted with ``cls`` and ``name``. Values come back as
    declared (lists stay lists); see :func:`declare_config` for the config itself.
    """
    meta = {f.name: f.metadata for f in dataclasses.fields(cls)}
    values: Dict[str, Any] = {}
    for name, default in parameter_fields(cls, exclude).items():
        m = meta[name]
        text = m.get("description") or fallback.format(cls=cls.__name__, name=name)
        values[name] = declare(node, f"{prefix}.{name}" if prefix else name, default, text,
                               m.get("range"), bool(m.get("read_only", False)))
    return values


def declare_config(node: Node, prefix: str, cls: Type[C], *, exclude: Iterable[str] = (),
                   extra: Optional[Mapping[str, Any]] = None,
                   build: Optional[Callable[[Dict[str, Any]], C]] = None,
                   fallback: str = "{cls}.{name}", nested: bool = False) -> C:
    """Declare every parameter field of the config dataclass ``cls``; return the config.

    Parameters are named ``<prefix>.<field>`` (bare ``<field>`` for prefix ""), typed and
    defaulted by the field's default and described by its metadata (module docstring:
    ``description``, ``range``, ``read_only``, ``param``). The config is built by
    ``build(values)`` (e.g. ``cls.from_params``) or ``cls(**values)``, so the dataclass's
    own validation runs and raises ConfigError / ValidationError for bad values; list
    values are given back as tuples where the field's default is a tuple. ``extra`` adds
    values for the fields that are not parameters (nested configs, maps).

    ``nested=True`` declares the whole tree instead (:func:`declare_tree`): nested
    dataclass and dict fields leaf by leaf under dotted names, defaulted by the validated
    ``cls()`` (its ``__post_init__`` may coerce the field defaults), and ``build`` (then
    required) gets the flat dotted names, e.g. ``cls.from_params``.

    Example::

        self.config = declare_config(self, "limits", ExecutorLimits)
        planner = declare_config(self, "", PlannerConfig, nested=True,
                                 build=PlannerConfig.from_params)
    """
    if nested:
        if build is None:
            raise ValueError("declare_config(nested=True) needs build (the dotted names)")
        if exclude or extra:
            raise ValueError("declare_config(nested=True) takes no exclude or extra")
        return build(declare_tree(node, prefix, cls(), fallback=fallback))
    values: Dict[str, Any] = declare_fields(node, prefix, cls, exclude=exclude,
                                            fallback=fallback)
    for f in dataclasses.fields(cls):
        if f.name in values and isinstance(field_default(f), tuple):
            values[f.name] = tuple(values[f.name])
    values.update(extra or {})
    return build(values) if build is not None else cls(**values)


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One parameter of a config tree (:func:`parameter_tree`)."""

    default: Any
    description: str
    value_range: Optional[tuple] = None
    read_only: bool = False


def parameter_tree(config: Any, fallback: str = "{cls}.{name}") -> Dict[str, Leaf]:
    """Every leaf of the config dataclass instance ``config`` as dotted name -> Leaf.

    Defaults are the instance's values (a validated config's, so coerced by its
    ``__post_init__``), tuples as lists. A nested dataclass field ``hand`` gives
    ``hand.<field>`` for each of its fields, a dict field ``phi_thresholds`` one leaf
    ``phi_thresholds.<key>`` per key; fields with ``param: False`` metadata and values of
    no ROS type are left out. A leaf's text is its field's ``description`` metadata, else
    ``fallback`` formatted with ``cls`` (the class holding the field), ``name`` (the
    field), ``section`` (the description of the outermost nested field the leaf is in, or
    its name; ``cls`` at the top level), ``path`` (the dotted name below that section,
    dots as spaces) and ``unit`` (:func:`unit_of` the name).
    """
    out: Dict[str, Leaf] = {}

    def walk(obj: Any, prefix: str, section: Optional[str], top: str) -> None:
        for f in dataclasses.fields(obj):
            if not f.metadata.get("param", True):
                continue
            name = f"{prefix}{f.name}"
            value = getattr(obj, f.name)
            here = section if section is not None else \
                (f.metadata.get("description") or f.name)
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                walk(value, name + ".", here, top if section is not None else name)
                continue
            items = value.items() if isinstance(value, Mapping) else [(None, value)]
            for key, item in items:
                leaf = name if key is None else f"{name}.{key}"
                if isinstance(item, tuple):
                    item = list(item)
                if not isinstance(item, _SCALARS):
                    continue
                text = f.metadata.get("description") if key is None else None
                if not text:
                    rest = leaf[len(top) + 1:] if section is not None else leaf
                    text = fallback.format(
                        cls=type(obj).__name__, name=f.name, path=rest.replace(".", " "),
                        section=section if section is not None else type(obj).__name__,
                        unit=unit_of(leaf))
                out[leaf] = Leaf(item, text, f.metadata.get("range") if key is None else None,
                                 bool(f.metadata.get("read_only", False)))

    walk(config, "", None, "")
    return out


def declare_tree(node: Node, prefix: str, config: Any, *, fallback: str = "{cls}.{name}"
                 ) -> Dict[str, Any]:
    """Declare every leaf of ``config`` (:func:`parameter_tree`) as ``<prefix>.<leaf>``.

    Returns dotted leaf name (without ``prefix``) -> value, the form a config's
    ``from_params`` reads (e.g. ``PlannerConfig.from_params``).
    """
    values: Dict[str, Any] = {}
    for name, leaf in parameter_tree(config, fallback).items():
        values[name] = declare(node, f"{prefix}.{name}" if prefix else name, leaf.default,
                               leaf.description, leaf.value_range, leaf.read_only)
    return values


def field_descriptions(cls: Type) -> Dict[str, str]:
    """Parameter name -> text of the fields of ``cls`` (and of their ``keys``) that have one.

    A field's parameter name is its ``name`` metadata or its own; a map field's ``keys``
    metadata (key -> text) describes its leaves ``<name>.<key>``.
    """
    out: Dict[str, str] = {}
    for f in dataclasses.fields(cls):
        if not f.metadata.get("param", True):
            continue
        name = f.metadata.get("name", f.name)
        if f.metadata.get("description"):
            out[name] = f.metadata["description"]
        for key, text in (f.metadata.get("keys") or {}).items():
            out[f"{name}.{key}"] = text
    return out


def description_of(cls: Type, name: str, fallback: str = "{name}") -> str:
    """The text of the parameter ``name`` of config dataclass ``cls`` (its field metadata).

    Exact names come from :func:`field_descriptions`; a leaf ``<map>.<a>.<b>`` of a map field
    with a ``template`` gets the template formatted with ``a`` and ``b`` (the key's first
    part and the rest); anything else ``fallback`` formatted with ``name``.
    """
    texts = field_descriptions(cls)
    if name in texts:
        return texts[name]
    for f in dataclasses.fields(cls):
        head = f.metadata.get("name", f.name) + "."
        if f.metadata.get("template") and name.startswith(head):
            first, _, rest = name[len(head):].partition(".")
            return f.metadata["template"].format(first, rest)
    return fallback.format(name=name)


def overrides(node: Node) -> Dict[str, Any]:
    """Parameter name -> value of the node's overrides (params files, -p, kwargs)."""
    # rclpy keeps them in this attribute and offers no public accessor; without it, map
    # keys (categories, material pairs) a params file adds could not be declared.
    found = getattr(node, "_parameter_overrides", None) or {}
    return {name: param.value for name, param in found.items()}


def warn_undeclared(node: Node, what: str, prefixes: Tuple[str, ...] = ("",)) -> None:
    """Warn about every override under ``prefixes`` that no declaration took (a typo)."""
    for name in sorted(overrides(node)):
        if name.startswith(prefixes) and not node.has_parameter(name):
            node.get_logger().warning(f"parameter '{name}' is not a {what} parameter "
                                      "(typo?); ignored")


def param_key(category: str) -> str:
    """Parameter-name form of a category ("wine glass" -> "wine_glass"); the core reverses it."""
    return "_".join(category.strip().lower().split())


def declare_map(node: Node, prefix: str, defaults: Mapping[str, Any], description: str
                ) -> Dict[str, Any]:
    """A category -> value map as one parameter per category; key -> value.

    ROS parameters have no map type: the params file's nested mapping arrives as
    ``<prefix><category>`` (``prefix`` ends in "."). The core's ``defaults`` are declared
    (keys through :func:`param_key`), plus every key the overrides add under ``prefix``,
    typed as given. ``description`` is formatted with the key. An empty list has no ROS
    type: it is left out, with a warning.
    """
    values = {param_key(k): v for k, v in defaults.items()}
    for name, value in overrides(node).items():
        key = name[len(prefix):] if name.startswith(prefix) else ""
        if key and key not in values:
            values[key] = value     # its own type; a wrong one is the core's ConfigError
    out: Dict[str, Any] = {}
    for key, default in values.items():
        if isinstance(default, (list, tuple)) and not default:
            node.get_logger().warning(f"parameter '{prefix}{key}' is an empty list; ignored")
            continue
        out[key] = declare(node, prefix + key, default, description.format(key))
    return out
