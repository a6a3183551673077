"""Kafka's message specs and ours side by side, for the tests that compare them."""

from __future__ import annotations

import importlib
import importlib.resources
import json
import re
from typing import Any

from protocol.schema import ArrayOf, Field, Primitive, Struct, Versions

MISSING = "<no default>"


# Element names that do not follow "Kafka's struct name minus the message/API prefix".
ELEMENT_NAME_EXCEPTIONS = {
    ("ListOffsetsResponse", "ListOffsetsTopicResponse"): "Topic",
    ("ListOffsetsResponse", "ListOffsetsPartitionResponse"): "Partition",
}


def kafka_spec(name: str) -> dict[str, Any]:
    """One of Kafka's JSON specs as ``tests/kafka_specs`` holds it (Kafka 4.x's, for what
    kafka-python does not ship or ships at an older version: ApiVersions v5), else as kafka-python
    ships it; comments stripped, common structs inlined."""
    shipped = importlib.resources.files("kafka.protocol.schemas.resources").joinpath(f"{name}.json")
    ours = importlib.resources.files("tests.kafka_specs").joinpath(f"{name}.json")
    text = (ours if ours.is_file() else shipped).read_text()
    spec: dict[str, Any] = json.loads(re.sub(r"(?m)^\s*//.*$", "", text))
    common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}

    def inline(fields: list[dict[str, Any]]) -> None:
        for fl in fields:
            elem = fl["type"].removeprefix("[]")
            if "fields" not in fl and elem in common:
                fl["fields"] = common[elem]
            if "fields" in fl:
                inline(fl["fields"])

    inline(spec["fields"])
    return spec


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def element_name(kafka_name: str, message: str) -> str:
    if (message, kafka_name) in ELEMENT_NAME_EXCEPTIONS:
        return ELEMENT_NAME_EXCEPTIONS[(message, kafka_name)]
    api = re.sub(r"(Request|Response)$", "", message)
    for prefix in (message, api):
        rest = kafka_name[len(prefix) :]
        if kafka_name.startswith(prefix) and rest[:1].isupper():
            return rest
    return kafka_name


def parse_default(value: Any, type_name: str) -> Any:
    if not isinstance(value, str):
        return value
    if value == "null":
        return None
    if type_name == "bool":
        return {"true": True, "false": False}[value]
    if type_name == "string":
        return value
    return int(value, 0)


def kafka_view(fields: list[dict[str, Any]], version: int, message: str) -> list[tuple[Any, ...]]:
    """The fields of a Kafka spec present at ``version``, as comparable tuples."""
    view = []
    for fl in fields:
        versions = Versions.parse(fl["versions"])
        if version not in versions:
            continue
        type_name: str = fl["type"]
        children = None
        if "fields" in fl:
            elem = element_name(type_name.removeprefix("[]"), message)
            type_name = ("[]" if type_name.startswith("[]") else "") + "struct " + elem
            children = kafka_view(fl["fields"], version, message)
        tag = fl.get("tag")
        if tag is not None:
            # Our tables assume a tagged field is tagged in every version it exists in.
            assert Versions.parse(fl["taggedVersions"]) == versions, fl["name"]
        default = parse_default(fl["default"], fl["type"]) if "default" in fl else MISSING
        view.append(
            (
                snake(fl["name"]),
                type_name,
                version in Versions.parse(fl.get("nullableVersions", "none")),
                tag,
                default,
                bool(fl.get("ignorable", False)),
                children,
            )
        )
    return view


def our_type_name(typ: Any) -> str:
    if isinstance(typ, Primitive):
        return typ.name
    if isinstance(typ, ArrayOf):
        return "[]" + typ.item.name
    assert isinstance(typ, Struct)
    return ("[]" if typ.many else "") + "struct " + typ.name


def our_view(fields: list[Field], version: int) -> list[tuple[Any, ...]]:
    view = []
    for fl in fields:
        if version not in fl.versions:
            continue
        children = our_view(fl.type.fields, version) if isinstance(fl.type, Struct) else None
        view.append(
            (
                fl.name,
                our_type_name(fl.type),
                version in fl.nullable,
                fl.tag,
                fl.default if fl.has_default else MISSING,
                fl.ignorable,
                children,
            )
        )
    return view


