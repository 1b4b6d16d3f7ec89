"""Tool classification shared by every importer: a tool's τ²-Bench tag → step kind, and the hold rule.

Why its own module: the τ²-Bench and OpenAI-chat importers (and user tag maps)
classify tools the same way, and neither importer should import the other.

Tags: a packaged copy of τ²-Bench's tool tags (traces/data/tool_types.json,
keyed by domain; user tools under ``<domain>_user``). A tool with no known tag is
a WRITE (under irreversibility the safe default is to hold it). GENERIC stays
``generic``; GENERIC tools in ``IRREVERSIBLE_GENERIC`` (``transfer_to_human_agents``,
which ends the conversation) get ``irreversible=True``, as does every WRITE.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib import resources
from typing import Any

from .errors import TraceFormatError
from .files import parse_json, read_text
from .schema import StepKind

#: GENERIC tools the protocol treats as irreversible (they end or hand off the conversation).
IRREVERSIBLE_GENERIC = frozenset({"transfer_to_human_agents"})

TAG_TO_KIND = {"READ": StepKind.READ, "WRITE": StepKind.WRITE, "GENERIC": StepKind.GENERIC, "THINK": StepKind.THINK}

TagMap = Mapping[str, Mapping[str, str]]


def default_tag_map() -> dict[str, dict[str, str]]:
    """τ²-Bench's own tool tags (packaged copy), keyed by domain."""
    with resources.files("specagent.traces").joinpath("data/tool_types.json").open(encoding="utf-8") as fh:
        return json.load(fh)


def load_tag_map(path: str | os.PathLike) -> dict[str, dict[str, str]]:
    """Load a user tag map: either ``{domain: {tool: TAG}}`` or flat ``{tool: TAG}`` (applies to all domains)."""
    text = read_text(path, "a JSON tool-tag map")
    return normalize_tag_map(parse_json(text, str(path), "a JSON tool-tag map"), str(path))


def normalize_tag_map(raw: Any, file: str = "<tag map>") -> dict[str, dict[str, str]]:
    if not isinstance(raw, dict):
        raise TraceFormatError(file, "top level", "<record>", "a JSON object of tool tags", type(raw).__name__)
    if all(isinstance(v, str) for v in raw.values()):
        raw = {"*": raw}
    out: dict[str, dict[str, str]] = {}
    for dom, tools in raw.items():
        if not isinstance(tools, dict):
            raise TraceFormatError(file, f"domain {dom!r}", dom, "an object {tool: TAG}", type(tools).__name__)
        for name, tag in tools.items():
            if str(tag).upper() not in TAG_TO_KIND:
                raise TraceFormatError(file, f"domain {dom!r}", name, f"one of {sorted(TAG_TO_KIND)}", tag)
        out[dom] = {k: str(v).upper() for k, v in tools.items()}
    return out


def merged_tag_map(tag_map: TagMap | str | os.PathLike | None) -> dict[str, dict[str, str]]:
    """τ²-Bench's tags with a user map (dict or JSON file) laid over them; a flat user map wins in every domain."""
    tags: dict[str, dict[str, str]] = default_tag_map()
    if tag_map is None:
        return tags
    user = load_tag_map(tag_map) if isinstance(tag_map, (str, os.PathLike)) else normalize_tag_map(dict(tag_map))
    for dom, m in user.items():
        if dom == "*":
            for dm in tags.values():
                dm.update({k: v for k, v in m.items() if k in dm})
        tags.setdefault(dom, {}).update(m)
    return tags


def tool_kind(name: str, domain: str, tags: TagMap, user_side: bool = False) -> tuple[StepKind, bool]:
    """(kind, irreversible) for a tool; unknown tools are WRITE (held)."""
    dom = f"{domain}_user" if user_side else domain
    tag = tags.get(dom, {}).get(name) or tags.get("*", {}).get(name)
    kind = TAG_TO_KIND[tag] if tag else StepKind.WRITE
    irreversible = kind == StepKind.WRITE or (kind == StepKind.GENERIC and name in IRREVERSIBLE_GENERIC)
    return kind, irreversible
