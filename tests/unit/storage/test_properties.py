"""The one reader of Java .properties text (meta.properties, a broker's config file)."""

from __future__ import annotations

import pytest

from storage.properties import PropertiesError, parse_properties


def test_names_values_comments_and_both_separators() -> None:
    text = "#\n# written by kcoord\n! also a comment\n\nnode.id=1\ncluster.id = a:b=c \nlog.dirs: /data\n"
    assert parse_properties(text) == {"node.id": "1", "cluster.id": "a:b=c", "log.dirs": "/data"}


def test_a_later_line_wins() -> None:
    assert parse_properties("a=1\na=2\n") == {"a": "2"}


def test_a_line_without_a_separator_names_its_line() -> None:
    with pytest.raises(PropertiesError, match="line 2"):
        parse_properties("a=1\nnonsense\n")
